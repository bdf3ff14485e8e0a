import assert from 'node:assert/strict'
import fs from 'node:fs'
import { after, before, describe, it } from 'node:test'
import { sql } from 'kysely'
import type { Database } from '../../src/db/database.ts'
import { nextWatermark, readRound } from '../../src/journal/journal.repository.ts'
import { checkJournalWatermark } from '../../src/journal/journal.service.ts'
import { JournalSequencer } from '../../src/journal/sequencer.ts'
import { resolveSigningKey } from '../../src/secrets/signing-key.ts'
import { openTestDatabase, STORAGE } from '../helpers/app.ts'

/**
 * Which transactions wait for a position, whatever wrote them: the sequencer alone on a store, the
 * rows written by plain SQL (any path that inserts a transaction, in any order of commits). On
 * PostgreSQL a writer that started before others and commits after they were positioned is
 * positioned too, and a round stopped by its batch goes on after the last row it took.
 */
describe(`the journal's waiting transactions, however written (${STORAGE})`, () => {
  let database: Database
  let dataDir: string
  let sequencer: JournalSequencer
  let wallet: number
  before(async () => {
    ;({ database, dataDir } = await openTestDatabase())
    const row = await database.db
      .insertInto('wallets')
      .values({ address: 'plain-writer', user_id: null, created_at: new Date().toISOString(), deleted_at: null })
      .returning('id')
      .executeTakeFirstOrThrow()
    wallet = Number(row.id)
    sequencer = new JournalSequencer({
      database,
      key: resolveSigningKey(undefined, dataDir),
      checkpointIntervalMs: 100,
      batch: 2,
      pollMs: 10,
    })
    sequencer.start()
  })
  after(async () => {
    await sequencer.stop()
    await database.close()
    fs.rmSync(dataDir, { recursive: true, force: true })
  })

  /** `count` transactions from the mint wallet, in one statement of `executor`; their ids. */
  const insert = async (executor: Database['db'], count: number): Promise<number[]> => {
    const { rows } = await sql<{ id: number }>`with recursive n(n) as (select 1 union all select n + 1 from n where n < ${count})
      insert into transactions (sending_wallet_id, receiving_wallet_id, memo, created_at, kind)
      select 1, ${wallet}, 'plain', ${new Date().toISOString()}, 'transfer' from n returning id`.execute(executor)
    return rows.map((row) => Number(row.id))
  }

  const positioned = async (ids: number[]): Promise<number[]> => {
    for (let tries = 0; ; tries++) {
      const rows = await database.db.selectFrom('journal_entries').select(['transaction_id', 'position']).execute()
      const byId = new Map(rows.map((row) => [Number(row.transaction_id), Number(row.position)]))
      if (ids.every((id) => byId.has(id))) return ids.map((id) => byId.get(id) as number)
      assert.ok(tries < 500, `not positioned within 5 s: ${ids.filter((id) => !byId.has(id)).join(', ')}`)
      await new Promise((resolve) => setTimeout(resolve, 10))
    }
  }

  it('positions every row of a statement, past the batch of a round, in id order', async () => {
    const ids = await insert(database.db, 7)
    const positions = await positioned(ids)
    assert.deepEqual(
      positions,
      positions.map((_, i) => positions[0] + i),
    )
  })

  it('on SQLite, positions ids with gaps between them in id order, past the batch of a round', { skip: STORAGE !== 'sqlite' }, async () => {
    // A round counts the ids after the last positioned one and lists them only when they have gaps.
    const [last] = await insert(database.db, 1)
    const ids = [last + 2, last + 3, last + 5, last + 9]
    for (const id of ids)
      await sql`insert into transactions (id, sending_wallet_id, receiving_wallet_id, memo, created_at, kind)
        values (${id}, 1, ${wallet}, 'gap', ${new Date().toISOString()}, 'transfer')`.execute(database.db)
    const positions = await positioned([last, ...ids])
    assert.deepEqual(
      positions,
      positions.map((_, i) => positions[0] + i),
    )
  })

  it(
    'on PostgreSQL, positions a writer that started before others and commits after they were positioned',
    { skip: STORAGE !== 'postgres' },
    async () => {
      const late = await database.db.transaction().execute(async (trx) => {
        const writer = (await sql<{ xid: string }>`select pg_current_xact_id()::text as xid`.execute(trx)).rows[0].xid
        await positioned(await insert(database.db, 3))
        const state = await database.db.selectFrom('journal_state').select('watermark_xid').executeTakeFirstOrThrow()
        assert.ok(Number(state.watermark_xid) <= Number(writer), 'the watermark waits for the running writer')
        return insert(trx, 2)
      })
      await positioned(late)
      // Idle again: the watermark moves past every positioned row, so a poll reads none of them again.
      for (let tries = 0; ; tries++) {
        const { rows } = await sql<{ behind: number }>`select count(*) as behind from transactions t, journal_state s
        where (t.journal_xid, t.id) > (s.watermark_xid::text::xid8, s.watermark_id)`.execute(database.db)
        if (Number(rows[0].behind) === 0) break
        assert.ok(tries < 500, `${rows[0].behind} rows stay behind the watermark`)
        await new Promise((resolve) => setTimeout(resolve, 10))
      }
    },
  )

  it(
    'on PostgreSQL, a full round ends its watermark at the last row it took, by writer id as a number',
    { skip: STORAGE !== 'postgres' },
    async () => {
      await sequencer.stop()
      const ids = await insert(database.db, 3)
      try {
        // Writer ids whose order as text is not their order as numbers (99 and 100, or 999 and 1000): all long committed.
        const { rows } = await sql<{ next: string }>`select pg_snapshot_xmin(pg_current_snapshot())::text as next`.execute(database.db)
        const low = 10 ** Math.floor(Math.log10(Number(rows[0].next) - 1)) - 1
        for (const [i, id] of ids.entries())
          await sql`update transactions set journal_xid = ${String(low + i)}::xid8 where id = ${id}`.execute(database.db)
        const round = await readRound(database.db, 2, new Map(), { xid: String(low - 1), id: 0 })
        assert.deepEqual(
          round?.waiting.map((waiting) => waiting.id),
          ids.slice(0, 2),
        )
        assert.deepEqual(round?.watermark, { xid: String(low + 1), id: ids[1] })
      } finally {
        // Given back a writer id above the watermark, they are positioned as any others.
        await sql`update transactions set journal_xid = pg_current_xact_id() where id = any(${ids}::bigint[])`.execute(database.db)
        sequencer.start()
      }
      await positioned(ids)
    },
  )

  it('tells progress while rounds come full in a row, at most once a period, and never for one full round', async () => {
    await sequencer.stop()
    const told: number[] = []
    const telling = new JournalSequencer({
      database,
      key: resolveSigningKey(undefined, dataDir),
      checkpointIntervalMs: 100,
      batch: 2,
      pollMs: 10,
      progressEveryMs: 60_000,
      onProgress: (_, size) => told.push(size),
    })
    telling.start()
    try {
      // One statement, so one round sees all three: a full round of two, then one. Load, not a backlog.
      await positioned(await insert(database.db, 3))
      assert.deepEqual(told, [])
      // Five full rounds in a row: a backlog, told once within the period.
      await positioned(await insert(database.db, 10))
      assert.equal(told.length, 1)
    } finally {
      await telling.stop()
      sequencer.start()
    }
  })

  it('starts the next round at the oldest running writer, or after the last row a full round took if that comes first', () => {
    assert.deepEqual(nextWatermark('100', undefined), { xid: '100', id: 0 })
    assert.deepEqual(nextWatermark('100', { xid: '90', id: 7 }), { xid: '90', id: 7 })
    assert.deepEqual(nextWatermark('100', { xid: '100', id: 7 }), { xid: '100', id: 0 })
    assert.deepEqual(nextWatermark('100', { xid: '120', id: 7 }), { xid: '100', id: 0 })
  })
})

/**
 * A PostgreSQL copy made by other means than `coffer restore` keeps the old cluster's writer ids: the
 * service refuses to start on it until they are reset as `docs/operations.md` says (its statements
 * are run here as written there), after which what waited and what comes are positioned.
 */
describe("a PostgreSQL copy holding another cluster's writer ids", { skip: STORAGE !== 'postgres' }, () => {
  it('refuses to start, and positions everything once the documented reset ran', async () => {
    const { database, dataDir } = await openTestDatabase()
    const sequencer = new JournalSequencer({ database, key: resolveSigningKey(undefined, dataDir), checkpointIntervalMs: 100, pollMs: 10 })
    try {
      await checkJournalWatermark(database.db)
      const now = new Date().toISOString()
      const wallet = await database.db
        .insertInto('wallets')
        .values({ address: 'copied', user_id: null, created_at: now, deleted_at: null })
        .returning('id')
        .executeTakeFirstOrThrow()
      const insert = () =>
        sql<{ id: number }>`insert into transactions (sending_wallet_id, receiving_wallet_id, memo, created_at, kind)
          values (1, ${wallet.id}, 'copied', ${now}, 'transfer') returning id`.execute(database.db)
      const copied = Number((await insert()).rows[0].id)
      // The old cluster was a million transactions ahead of this one.
      const ahead = sql`(pg_snapshot_xmax(pg_current_snapshot())::text::bigint + 1000000)`
      await sql`update transactions set journal_xid = ${ahead}::text::xid8`.execute(database.db)
      await sql`update journal_state set watermark_xid = ${ahead}`.execute(database.db)
      await assert.rejects(
        checkJournalWatermark(database.db),
        /watermark .* is past this PostgreSQL server's next one.*docs\/operations\.md/,
      )

      const operations = fs.readFileSync('docs/operations.md', 'utf8')
      const reset = /Copies by other means[\s\S]*?```sql\n([\s\S]*?)```/.exec(operations)?.[1]
      assert.ok(reset, 'docs/operations.md gives the reset')
      await database.db.transaction().execute(async (trx) => {
        for (const statement of reset.split(';').filter((text) => text.trim() !== '')) await sql.raw(statement).execute(trx)
      })
      await checkJournalWatermark(database.db)
      const fresh = Number((await insert()).rows[0].id)
      sequencer.start()
      for (let tries = 0; ; tries++) {
        const rows = await database.db.selectFrom('journal_entries').select('transaction_id').execute()
        const ids = new Set(rows.map((row) => Number(row.transaction_id)))
        if (ids.has(copied) && ids.has(fresh)) break
        assert.ok(tries < 500, 'the copied and the new transaction are positioned within 5 s')
        await new Promise((resolve) => setTimeout(resolve, 10))
      }
    } finally {
      await sequencer.stop()
      await database.close()
      fs.rmSync(dataDir, { recursive: true, force: true })
    }
  })
})
