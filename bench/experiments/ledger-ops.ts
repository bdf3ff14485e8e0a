/**
 * `coffer verify`, backup, restore and the bytes a transaction leaves on disk, in process
 * (`npx tsx bench/experiments/ledger-ops.ts [--storage=sqlite|postgres] [--transactions=100000]`).
 *
 * Writes a ledger of `--transactions` through the ledger's write path (batches of 500 moves, 100
 * wallets, one asset, an issuance every 5,000), positions and hashes it with the journal's
 * sequencer, runs the retention job as 31 days later, then times `verifyLedger`, `verifyJournal`, a
 * backup and a restore into an empty store (and the verify after it), and prints the stores' bytes
 * per transaction by table and index (SQLite's `dbstat`, PostgreSQL's `pg_relation_size`). With
 * `--keep=<dir>` the stores stay in that directory and a SQLite ledger found there is used again;
 * with `--from=<backup>` the ledger is that backup restored (a ledger built once serves both
 * storages); `--no-verify` leaves out the verifies of the source. Nothing here asserts a time.
 */
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { randomBytes } from 'node:crypto'
import { sql } from 'kysely'
import { openPostgres } from '../../src/db/postgres.ts'
import { openSqlite, type Database } from '../../src/db/database.ts'
import { inTransaction } from '../../src/db/dialect.ts'
import { migrateToLatest } from '../../src/db/migrate.ts'
import { JournalSequencer } from '../../src/journal/sequencer.ts'
import { hasUnpositioned } from '../../src/journal/journal.repository.ts'
import { verifyJournal } from '../../src/journal/verify-journal.ts'
import type { EventWriter } from '../../src/ledger/ledger.types.ts'
import { applyMoves, type Move } from '../../src/ledger/moves.ts'
import { verifyLedger } from '../../src/ledger/verify.ts'
import { createBackup } from '../../src/operations/backup.ts'
import { checkBackup, restoreBackup } from '../../src/operations/restore.ts'
import { pruneOnce } from '../../src/operations/retention.ts'
import { parseSigningKey } from '../../src/secrets/signing-key.ts'
import { startPostgres, type BenchPostgres } from '../postgres.ts'
import { goldAndWallets } from '../seed.ts'

const args = process.argv.slice(2)
const option = (name: string) => args.find((arg) => arg.startsWith(`--${name}=`))?.slice(name.length + 3)
const storage = (option('storage') ?? 'sqlite') as 'sqlite' | 'postgres'
const TRANSACTIONS = Number(option('transactions') ?? 100_000)
const kept = option('keep')
const from = option('from')
const verifySource = !args.includes('--no-verify')
const dir = kept ?? fs.mkdtempSync(path.join(os.tmpdir(), 'coffer-ledger-ops-'))
const fixed = (value: number, digits = 0) => value.toLocaleString('en', { maximumFractionDigits: digits, minimumFractionDigits: digits })
const log = (line: string) => console.log(`[${storage} ${TRANSACTIONS}] ${line} (load ${os.loadavg()[0].toFixed(1)})`)
// The journal's signing key is kept beside a kept ledger (and read beside a `--from` backup): its checkpoints verify again.
const keyFile = path.join(from ? path.dirname(from) : dir, 'signing-key')
if (!fs.existsSync(keyFile)) fs.writeFileSync(keyFile, randomBytes(32).toString('base64'))
const key = parseSigningKey(fs.readFileSync(keyFile, 'utf8'))!

const noEvents: EventWriter = {
  eventWrites: () => [],
  holdEventWrites: () => [],
  recordEvents: async () => undefined,
}

let server: BenchPostgres | undefined
async function open(name: string): Promise<Database> {
  if (storage === 'sqlite') return openSqlite(path.join(dir, `${name}.sqlite`))
  server ??= await startPostgres()
  return openPostgres(await server.createDatabase(`${name}${Date.now().toString(36)}`), 4)
}

async function timed<T>(what: string, work: () => Promise<T>, count = TRANSACTIONS): Promise<T> {
  const started = performance.now()
  const result = await work()
  const seconds = (performance.now() - started) / 1000
  log(`${what}: ${fixed(seconds, 1)} s, ${fixed(count / seconds)} transactions/s`)
  return result
}

async function build(database: Database): Promise<void> {
  await migrateToLatest(database.db)
  const { asset, walletIds } = await goldAndWallets(database, 'ops')
  const sequencer = new JournalSequencer({ database, key, checkpointIntervalMs: 60_000, batch: 5_000 })
  for (let done = 0; done < TRANSACTIONS; done += 500) {
    const moves = Array.from({ length: Math.min(500, TRANSACTIONS - done) }, (_, i): Move => {
      const k = done + i
      const n = walletIds.length
      if (k % 5_000 < n) return { from: 1, to: walletIds[k % n], kind: 'issuance', lines: [{ asset, quantity: 1_000_000 }], memo: 'issue' }
      const [from, to] = [walletIds[k % n], walletIds[(k + 1 + (k % (n - 1))) % n]]
      return { from, to, kind: 'transfer', lines: [{ asset, quantity: 1 }], memo: 'history', metadata: { order: `o${k}` } }
    })
    await inTransaction(database, (trx) => applyMoves(trx, moves, noEvents))
  }
  sequencer.start()
  while (await hasUnpositioned(database.db)) await new Promise((resolve) => setTimeout(resolve, 200))
  await sequencer.stop()
}

async function sizes(database: Database): Promise<void> {
  const { rows } =
    storage === 'sqlite'
      ? await sql<{ name: string; bytes: number }>`select name, sum(pgsize) as bytes from dbstat group by name order by bytes desc`.execute(
          database.db,
        )
      : await sql<{ name: string; bytes: number }>`
          select c.relname as name, pg_relation_size(c.oid) as bytes from pg_class c join pg_namespace n on n.oid = c.relnamespace
          where n.nspname = current_schema() and c.relkind in ('r', 'i', 't') order by 2 desc`.execute(database.db)
  let total = 0
  for (const row of rows) total += Number(row.bytes)
  log(`store: ${fixed(total / TRANSACTIONS, 1)} bytes per transaction`)
  for (const row of rows.slice(0, 16))
    console.log(`  ${row.name.padEnd(44)} ${fixed(Number(row.bytes) / TRANSACTIONS, 1).padStart(8)} B/tx`)
}

try {
  const built = storage === 'sqlite' && fs.existsSync(path.join(dir, 'source.sqlite'))
  const source = await open('source')
  if (from) await timed('restore of --from', async () => restoreBackup(source, await checkBackup(from)))
  else if (!built) await timed('build', () => build(source))
  else await timed('migrations of a kept ledger', () => migrateToLatest(source.db))
  // Retention as 31 days later: events, idempotency keys and the bodies no event needs go.
  const policy = { eventRetentionDays: 30, idempotencyRetentionHours: 24, sessionIdleDays: 0 }
  await timed('retention', () => pruneOnce(source, policy, Date.now() + 31 * 86_400_000))
  if (verifySource) {
    const ledger = await timed('verifyLedger', () => verifyLedger(source.db))
    if (!ledger.ok) log(`verify found ${ledger.problems.slice(0, 5).join('; ')}`)
    const journal = await timed('verifyJournal', () => verifyJournal(source.db, key))
    if (!journal.ok) log(`journal verify found ${journal.problems.slice(0, 5).join('; ')}`)
  }
  const file = path.join(dir, 'backup.coffer')
  const summary = await timed('backup', () => createBackup(source, file))
  log(`backup file: ${fixed(summary.bytes / TRANSACTIONS, 1)} bytes per transaction`)
  await sizes(source)
  await source.close()
  if (kept) fs.rmSync(path.join(dir, 'target.sqlite'), { force: true })
  const target = await open('target')
  await timed('restore', async () => restoreBackup(target, await checkBackup(file)))
  const after = await timed('verifyLedger after restore', () => verifyLedger(target.db))
  if (!after.ok) log(`verify after restore found ${after.problems.slice(0, 5).join('; ')}`)
  await timed('verifyJournal after restore', () => verifyJournal(target.db, key))
  if (storage === 'sqlite') await sql`vacuum`.execute(target.db)
  await sizes(target)
  await target.close()
} finally {
  await server?.stop()
  if (!kept) fs.rmSync(dir, { recursive: true, force: true })
}
