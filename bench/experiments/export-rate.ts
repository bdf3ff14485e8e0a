/**
 * `coffer export`'s reading, in process (`npx tsx bench/experiments/export-rate.ts
 * [--storage=sqlite|postgres] [--transactions=N] [--rounds=N]`): a journal of `--transactions`
 * (200,000) transfers among 100 wallets with usernames, positioned by the journal's own sequencer,
 * then read to the end as `coffer export` reads it (`readJournalText`), the text thrown away.
 * Prints entries/s of wall time and the CPU an entry of this process and, on PostgreSQL, of the server.
 */
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { openPostgres } from '../../src/db/postgres.ts'
import { openSqlite, type Database } from '../../src/db/database.ts'
import { migrateToLatest } from '../../src/db/migrate.ts'
import { readJournalText } from '../../src/journal/journal.service.ts'
import { JournalSequencer } from '../../src/journal/sequencer.ts'
import { resolveSigningKey } from '../../src/secrets/signing-key.ts'
import { processTreeCpuMs } from '../cpu.ts'
import { startPostgres } from '../postgres.ts'
import { goldAndWallets, writeHistory } from '../seed.ts'

const args = process.argv.slice(2)
const option = (name: string) => args.find((arg) => arg.startsWith(`--${name}=`))?.slice(name.length + 3)
const STORAGE = (option('storage') ?? 'sqlite') as 'sqlite' | 'postgres'
const TRANSACTIONS = Number(option('transactions') ?? 200_000)
const ROUNDS = Number(option('rounds') ?? 3)

const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'coffer-export-rate-'))
const server = STORAGE === 'postgres' ? await startPostgres() : undefined
try {
  const url = await server?.createDatabase('exportrate')
  const unbounded = { statementTimeoutMs: 0, idleInTransactionTimeoutMs: 0, queryTimeoutMs: 0 }
  const database: Database = url ? openPostgres(url, 4, unbounded) : openSqlite(path.join(dataDir, 'coffer.sqlite'))
  await migrateToLatest(database.db)
  const { asset, walletIds } = await goldAndWallets(database, 'export')
  await writeHistory(database, asset, walletIds, TRANSACTIONS)
  const sequencer = new JournalSequencer({
    database,
    key: resolveSigningKey(undefined, dataDir),
    checkpointIntervalMs: 1000,
    batch: 10_000,
  })
  sequencer.start()
  for (;;) {
    const state = await database.db.selectFrom('journal_state').select('size').executeTakeFirst()
    if (Number(state?.size) >= TRANSACTIONS) break
    await new Promise((resolve) => setTimeout(resolve, 500))
  }
  await sequencer.stop()
  console.log(
    `${STORAGE}: ${TRANSACTIONS} entries, load ${os
      .loadavg()
      .map((value) => value.toFixed(1))
      .join(' ')}`,
  )
  for (let round = 1; round <= ROUNDS; round++) {
    const cpu = process.cpuUsage()
    const serverBefore = server ? processTreeCpuMs(server.pid) : 0
    const started = performance.now()
    let entries = 0
    for await (const text of readJournalText(database.db, 0, false, new AbortController().signal))
      for (let at = text.indexOf('\n'); at >= 0; at = text.indexOf('\n', at + 1)) entries++
    const seconds = (performance.now() - started) / 1000
    const used = process.cpuUsage(cpu)
    const serverMs = server ? processTreeCpuMs(server.pid) - serverBefore : 0
    const perEntry = (ms: number) => ((ms * 1000) / entries).toFixed(1)
    console.log(
      `round ${round}: ${entries} entries in ${seconds.toFixed(1)} s, ${Math.round(entries / seconds)}/s; ` +
        `CPU an entry ${perEntry((used.user + used.system) / 1000)} µs${server ? ` + server ${perEntry(serverMs)} µs` : ''}`,
    )
  }
  await database.close()
} finally {
  await server?.stop()
  fs.rmSync(dataDir, { recursive: true, force: true })
}
