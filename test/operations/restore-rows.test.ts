import assert from 'node:assert/strict'
import path from 'node:path'
import { describe, it } from 'node:test'
import { sql } from 'kysely'
import { openDatabase, type Database } from '../../src/db/database.ts'
import { verifyLedger } from '../../src/ledger/verify.ts'
import { createBackup } from '../../src/operations/backup.ts'
import { checkBackup, restoreBackup } from '../../src/operations/restore.ts'
import { isBackedUpColumn } from '../../src/operations/store.ts'
import { ADMIN_KEY, journalSettled, STORAGE } from '../helpers/app.ts'
import { buildLedgerWorld } from '../helpers/ledger-world.ts'
import { serveStore, storesOfThisFile } from '../helpers/stores.ts'

// A restore writes many rows per statement (SQLite) or per COPY (PostgreSQL): every row comes back
// as it was, across statement boundaries, whatever characters its text holds.

const admin = { authorization: `Bearer ${ADMIN_KEY}` }
const { scratch, store } = storesOfThisFile('coffer-restore-rows-')

/** Tables holding more rows than one insert statement takes. */
const TABLES = ['transactions', 'transaction_assets', 'running_balances', 'journal_entries', 'journal_nodes'] as const
const TRANSFERS = 230

async function contents(database: Database, table: string): Promise<string[]> {
  const { rows } = await sql<Record<string, unknown>>`select * from ${sql.table(table)}`.execute(database.db)
  // What a backup does not carry (the writer's xid on PostgreSQL) is the restore's own.
  const carried = (row: Record<string, unknown>) =>
    Object.fromEntries(Object.entries(row).filter(([column]) => isBackedUpColumn(table, column)))
  return rows.map((row) => JSON.stringify(carried(row))).sort()
}

describe(`coffer restore on ${STORAGE} writes every row as it was`, () => {
  it('a ledger of a few hundred transfers with tabs, line breaks, backslashes and quotes in their memos', async () => {
    const source = await store(STORAGE)
    const service = await serveStore(source)
    const before: Record<string, string[]> = {}
    const file = path.join(scratch, 'rows.coffer.gz')
    try {
      const world = await buildLedgerWorld(service.app, admin, { prefix: 'rows' })
      const asset = await service.app.inject({ method: 'GET', url: '/assets', headers: admin })
      const id = (asset.json() as { id: number; name: string }[]).find((one) => one.name === world.assetName)!.id
      const issued = await service.app.inject({
        method: 'POST',
        url: `/wallets/${world.alice.walletId}/assets`,
        headers: admin,
        payload: { id, quantity: 10_000 },
      })
      assert.equal(issued.statusCode, 201, issued.body)
      const memos = ['tab\there', 'line\nbreak', 'back\\slash \\N', 'quote " and \r return', 'naïve ✓ 💰', '']
      for (let i = 0; i < TRANSFERS; i++) {
        const sent = await service.app.inject({
          method: 'POST',
          url: '/wallet/transactions',
          headers: { authorization: `Bearer ${world.alice.token}` },
          payload: { recipient: world.bob.username, assets: { [world.assetName]: 1 }, memo: `${memos[i % memos.length]} ${i}` },
        })
        assert.equal(sent.statusCode, 201, sent.body)
      }
      await journalSettled(service.database.db)
      for (const table of TABLES) before[table] = await contents(service.database, table)
      assert.ok(before.transactions.length > TRANSFERS)
      await createBackup(service.database, file)
    } finally {
      await service.close()
    }

    const target = await store(STORAGE)
    const database = openDatabase(target.config)
    try {
      await restoreBackup(database, await checkBackup(file))
      for (const table of TABLES) assert.deepEqual(await contents(database, table), before[table], `${table} differs after the restore`)
      const report = await verifyLedger(database.db)
      assert.ok(report.ok, report.problems.join('\n'))
    } finally {
      await database.close()
    }
  })
})
