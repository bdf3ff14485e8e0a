import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { randomBytes } from 'node:crypto'
import { openSqlite } from '../../src/db/database.ts'
import { migrateToLatest } from '../../src/db/migrate.ts'
import { JournalSequencer } from '../../src/journal/sequencer.ts'
import { hasUnpositioned } from '../../src/journal/journal.repository.ts'
import { parseSigningKey } from '../../src/secrets/signing-key.ts'
import { goldAndWallets, noEvents } from '../seed.ts'
import { inTransaction } from '../../src/db/dialect.ts'
import { applyMoves, type Move } from '../../src/ledger/moves.ts'

const batch = Number(process.argv[2] ?? 50)
const steps = Number(process.argv[3] ?? 200)
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'jc-round-'))
const key = parseSigningKey(randomBytes(32).toString('base64'))!
for (let rep = 0; rep < 3; rep++) {
  const database = openSqlite(path.join(dir, `l${rep}.sqlite`))
  await migrateToLatest(database.db)
  const { asset, walletIds } = await goldAndWallets(database, 'r')
  const N = steps * 100
  for (let done = 0; done < N; done += 500) {
    const moves = Array.from({ length: 500 }, (_, i): Move => {
      const k = done + i
      const n = walletIds.length
      if (k < n) return { from: 1, to: walletIds[k % n], kind: 'issuance', lines: [{ asset, quantity: 1_000_000 }], memo: 'issue' }
      const [from, to] = [walletIds[k % n], walletIds[(k + 1 + (k % (n - 1))) % n]]
      return { from, to, kind: 'transfer', lines: [{ asset, quantity: 1 }], memo: '' }
    })
    await inTransaction(database, (trx) => applyMoves(trx, moves, noEvents))
  }
  const sequencer = new JournalSequencer({ database, key, checkpointIntervalMs: 10_000, batch, pollMs: 1 })
  const before = process.cpuUsage()
  const t0 = performance.now()
  sequencer.start()
  while (await hasUnpositioned(database.db)) await new Promise((resolve) => setTimeout(resolve, 50))
  const used = process.cpuUsage(before)
  await sequencer.stop()
  const n = N
  console.log(`batch ${batch}: ${((used.user + used.system) / n).toFixed(1)} µs CPU per positioned (user ${(used.user / n).toFixed(1)}), wall ${((performance.now() - t0) * 1000 / n).toFixed(1)} µs, load ${os.loadavg()[0].toFixed(1)}`)
  await database.close()
}
fs.rmSync(dir, { recursive: true, force: true })
