import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { describe, it } from 'node:test'
import { sql } from 'kysely'
import { openDatabase } from '../../src/db/database.ts'
import { verifyLedger } from '../../src/ledger/verify.ts'
import { createBackup } from '../../src/operations/backup.ts'
import { checkBackup, restoreBackup } from '../../src/operations/restore.ts'
import { ADMIN_KEY, journalSettled, STORAGE } from '../helpers/app.ts'
import { runCoffer } from '../helpers/cli.ts'
import { buildLedgerWorld, checkLedgerWorld } from '../helpers/ledger-world.ts'
import { waitUntil } from '../helpers/receiver.ts'
import { serveStore, storesOfThisFile, type StoreKind } from '../helpers/stores.ts'

// `coffer restore`'s refusals of bad input are in operations-restore-refusals.test.ts.

const admin = { authorization: `Bearer ${ADMIN_KEY}` }
const { scratch, store } = storesOfThisFile('coffer-backups-')

describe(`coffer backup on ${STORAGE}`, () => {
  it('backs up while transfers keep committing: the file is one instant in which every asset sums to zero', async () => {
    const source = await store(STORAGE)
    const service = await serveStore(source)
    try {
      const world = await buildLedgerWorld(service.app, admin, { prefix: 'load', transfers: 1 })
      // Transfers both ways, four at a time, until the backup is done.
      let running = true
      let committed = 0
      const pair = [world.alice, world.bob]
      const load = Array.from({ length: 4 }, async (_, lane) => {
        for (let i = 0; running; i++) {
          const from = pair[(lane + i) % 2]
          const to = pair[(lane + i + 1) % 2]
          const sent = await service.app.inject({
            method: 'POST',
            url: '/wallet/transactions',
            headers: { authorization: `Bearer ${from.token}` },
            payload: { recipient: to.username, assets: { [world.assetName]: 1 + (i % 3) } },
          })
          if (sent.statusCode === 201) committed++
          else assert.equal(sent.json().code, 'I002', sent.body)
        }
      })
      // The load is under way (ten transfers in) before the backup starts, however slow the
      // machine (not a fixed pause), and goes on until it is done.
      await waitUntil(() => committed >= 10, 30_000, 'ten transfers of the load')
      // The backup runs on a connection of its own, as `coffer backup` beside the service does.
      const database = openDatabase(source.config)
      const file = path.join(scratch, `load-${STORAGE}.coffer.gz`)
      let summary
      const progress: [string, number, number][] = []
      try {
        summary = await createBackup(database, file, { progress: (table, done, total) => progress.push([table, done, total]) })
      } finally {
        running = false
        await Promise.all(load)
        await database.close()
      }
      // Progress is reported table by table, never going back, and ends at the whole.
      assert.deepEqual(progress.at(-1)?.slice(1), [summary.rows, summary.rows])
      assert.ok(progress.every(([, done], i) => i === 0 || done >= progress[i - 1][1]))
      assert.ok(progress.some(([table]) => table === 'transactions'))
      assert.ok(
        summary.tables.transactions > 2 && summary.tables.transactions < committed + 3,
        `the backup holds ${summary.tables.transactions} of ${committed + 2} transactions`,
      )
      // Restored on its own, the instant it holds checks out: holdings match the journal, assets sum to zero.
      const target = await store('sqlite')
      const restored = openDatabase(target.config)
      try {
        await restoreBackup(restored, await checkBackup(file))
        const report = await verifyLedger(restored.db)
        assert.ok(report.ok, report.problems.join('\n'))
        assert.equal(report.transactions, summary.tables.transactions)
      } finally {
        await restored.close()
      }
    } finally {
      await service.close()
    }
  })
})

const moves: [StoreKind, StoreKind][] =
  STORAGE === 'postgres'
    ? [
        ['sqlite', 'postgres'],
        ['postgres', 'sqlite'],
      ]
    : [['sqlite', 'sqlite']]

for (const [from, to] of moves) {
  describe(`moving a ledger from ${from} to ${to}`, () => {
    it('backs up while serving, restores into an empty store, and every credential still works', async () => {
      // The secrets key comes from the data directory's file here, carried along as the admin key's is.
      const source = await store(from, { sharedKey: false })
      const service = await serveStore(source)
      const file = path.join(scratch, `move-${from}-${to}.coffer.gz`)
      let world
      try {
        world = await buildLedgerWorld(service.app, admin, { prefix: `mv${from.slice(0, 2)}` })
        // A bound on each statement's answer is the service's, not an operator command's: at 1 ms every
        // statement of a backup or a restore on PostgreSQL would outlast it (its indexes, its ANALYZE).
        const backup = await runCoffer({ ...source.env, PG_QUERY_TIMEOUT_MS: '1' }, 'backup', file)
        assert.equal(backup.code, 0, backup.stderr)
        assert.match(backup.stdout, /^backup written to .*: \d+ rows \(2 users, 3 wallets, 6 transactions, 1 webhooks\)/)
      } finally {
        await service.close()
      }
      const target = await store(to, { sharedKey: false })
      fs.copyFileSync(path.join(source.config.dataDir, 'secrets-key'), path.join(target.config.dataDir, 'secrets-key'))
      const restore = await runCoffer({ ...target.env, PG_QUERY_TIMEOUT_MS: '1' }, 'restore', file)
      assert.equal(restore.code, 0, restore.stderr + restore.stdout)
      assert.match(restore.stdout, /^restored \d+ rows/)
      assert.match(restore.stdout, /ledger OK/)
      if (to === 'postgres') {
        // Every restored transaction holds the restore's own writer id, and the sequencer's watermark starts over.
        const restored = openDatabase(target.config)
        try {
          const { rows } = await sql<{ watermark: number; writers: number; without: number }>`select
            (select watermark_xid from journal_state where id = 1) as watermark,
            (select count(distinct journal_xid) from transactions) as writers,
            (select count(*) from transactions where journal_xid is null) as without`.execute(restored.db)
          assert.deepEqual(rows[0], { watermark: 0, writers: 1, without: 0 })
        } finally {
          await restored.close()
        }
      }
      const moved = await serveStore(target)
      try {
        await checkLedgerWorld(moved.app, admin, world)
        // A transfer after the restore gets the next position: one entry per transaction, positions 1 to n.
        await journalSettled(moved.database.db)
        const { rows } = await sql<{ transactions: number; entries: number; last: number }>`select
          (select count(*) from transactions) as transactions, (select count(*) from journal_entries) as entries,
          (select max(position) from journal_entries) as last`.execute(moved.database.db)
        assert.equal(Number(rows[0].entries), Number(rows[0].transactions))
        assert.equal(Number(rows[0].last), Number(rows[0].transactions))
        const report = await verifyLedger(moved.database.db)
        assert.ok(report.ok, report.problems.join('\n'))
      } finally {
        await moved.close()
      }
    })
  })
}
