import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { sql } from 'kysely'
import type { Db, Executor } from '../../src/db/database.ts'
import { inTransaction } from '../../src/db/dialect.ts'
import { readWalletEvents } from '../../src/events/events.repository.ts'
import { allEvents } from '../helpers/events.ts'
import { createOutbox } from '../../src/events/outbox.ts'
import { GroupCommitter } from '../../src/ledger/group-committer.ts'
import { DEFAULT_MAX_BATCH } from '../../src/ledger/ledger.service.ts'
import { IdempotencyConflict, MAX_QUANTITY, MINT_WALLET_ID, type Asset, type Line } from '../../src/ledger/ledger.types.ts'
import { applyMoves, type Move, type Outcome } from '../../src/ledger/moves.ts'
import { buildTestApp, journalCovered, STORAGE, type TestApp } from '../helpers/app.ts'
import { createAsset, createUser, fundedUser, type TestUser } from '../helpers/factories.ts'

const outbox = createOutbox()

/**
 * The ledger's batch path (moves.ts, group-committer.ts) driven directly: a batch must end exactly
 * as the same transfers one after the other would, each passing or failing on its own.
 */
describe(`batched moves (${STORAGE})`, () => {
  let t: TestApp
  let db: Db
  let gold: Asset
  let silver: Asset

  before(async () => {
    t = await buildTestApp()
    db = t.database.db
    gold = await createAsset(t, { name: 'gold' })
    silver = await createAsset(t, { name: 'silver' })
  })
  after(async () => {
    await t.close()
  })

  async function holding(walletId: number, asset: Asset): Promise<number> {
    const row = await db
      .selectFrom('holdings')
      .select('quantity')
      .where('wallet_id', '=', walletId)
      .where('asset_id', '=', asset.id)
      .executeTakeFirst()
    return row === undefined ? 0 : Number(row.quantity)
  }

  const move = (from: TestUser, to: TestUser, lines: Line[], extra: Partial<Move> = {}): Move => ({
    from: from.walletId,
    to: to.walletId,
    lines,
    memo: '',
    kind: 'transfer',
    ...extra,
  })

  function apply(moves: Move[]): Promise<Outcome[]> {
    return db.transaction().execute(async (trx) => applyMoves(trx, moves, outbox))
  }

  function errorCode(outcome: Outcome): string | undefined {
    return outcome.ok ? undefined : (outcome.error as { code?: string }).code
  }

  it('applies the moves in order, each against the balances the earlier ones left', async () => {
    const [a, b, c] = [await fundedUser(t, [[gold, 10]]), await createUser(t.app), await createUser(t.app)]
    const outcomes = await apply([
      move(a, b, [{ asset: gold, quantity: 10 }]),
      move(b, c, [{ asset: gold, quantity: 7 }]),
      move(a, c, [{ asset: gold, quantity: 1 }]),
      move(c, a, [{ asset: gold, quantity: 7 }]),
    ])
    assert.deepEqual(outcomes.map(errorCode), [undefined, undefined, 'I002', undefined])
    assert.match(String((outcomes[2] as { error: Error }).error.message), /holds 0 of gold, 1 requested/)
    assert.deepEqual([await holding(a.walletId, gold), await holding(b.walletId, gold), await holding(c.walletId, gold)], [7, 3, 0])
    // Ids follow the order of the moves, and each committed move is one recorded transaction.
    const ids = outcomes.flatMap((outcome) => (outcome.ok && outcome.transaction ? [outcome.transaction.id] : []))
    assert.deepEqual(
      ids,
      [...ids].sort((x, y) => x - y),
    )
    const stored = await db
      .selectFrom('transactions')
      .select(['id', 'sending_wallet_id', 'receiving_wallet_id'])
      .where('id', 'in', ids)
      .orderBy('id')
      .execute()
    assert.deepEqual(
      stored.map((row) => [row.sending_wallet_id, row.receiving_wallet_id]),
      [
        [a.walletId, b.walletId],
        [b.walletId, c.walletId],
        [c.walletId, a.walletId],
      ],
    )
  })

  it('leaves a failing multi-asset move out entirely while the others commit', async () => {
    const [a, b] = [
      await fundedUser(t, [
        [gold, 5],
        [silver, 1],
      ]),
      await createUser(t.app),
    ]
    const outcomes = await apply([
      move(a, b, [
        { asset: gold, quantity: 5 },
        { asset: silver, quantity: 2 },
      ]),
      move(a, b, [{ asset: gold, quantity: 2 }]),
    ])
    assert.deepEqual(outcomes.map(errorCode), ['I002', undefined])
    assert.deepEqual(
      [
        await holding(a.walletId, gold),
        await holding(a.walletId, silver),
        await holding(b.walletId, gold),
        await holding(b.walletId, silver),
      ],
      [3, 1, 2, 0],
    )
  })

  it('refuses a move to a deleted wallet with W000 and an issuance past 2^53-1 outstanding with I003', async () => {
    const [a, b, c] = [await fundedUser(t, [[gold, 5]]), await createUser(t.app), await createUser(t.app)]
    await db.updateTable('wallets').set({ deleted_at: new Date().toISOString() }).where('id', '=', b.walletId).execute()
    const mint = { walletId: MINT_WALLET_ID } as TestUser
    const outcomes = await apply([
      move(a, b, [{ asset: gold, quantity: 1 }]),
      move(mint, c, [{ asset: gold, quantity: MAX_QUANTITY }]),
      move(a, c, [{ asset: gold, quantity: 1 }]),
    ])
    assert.deepEqual(outcomes.map(errorCode), ['W000', 'I003', undefined])
    assert.deepEqual([await holding(a.walletId, gold), await holding(c.walletId, gold)], [4, 1])
  })

  it('writes both events of each move (none for mint) and a delivery for wallets with a webhook', async () => {
    const [a, b] = [await fundedUser(t, [[gold, 5]]), await createUser(t.app)]
    const response = await t.app.inject({
      method: 'PUT',
      url: '/wallet/webhook',
      headers: b.auth,
      payload: { webhook: 'http://127.0.0.1:9/hook' },
    })
    assert.equal(response.statusCode, 200, response.body)
    const outcomes = await apply([
      move(a, b, [{ asset: gold, quantity: 2 }]),
      { from: MINT_WALLET_ID, to: a.walletId, lines: [{ asset: gold, quantity: 1 }], memo: 'issue', kind: 'issuance' },
    ])
    assert.deepEqual(outcomes.map(errorCode), [undefined, undefined])
    const ids = outcomes.map((outcome) => (outcome.ok ? (outcome.transaction?.id ?? 0) : 0))
    const events = (await allEvents(db)).filter((event) => ids.includes(JSON.parse(event.payload).data.id))
    assert.deepEqual(
      events.map((event) => [JSON.parse(event.payload).data.id, event.wallet_id, event.type]),
      [
        [ids[0], a.walletId, 'transaction.sent'],
        [ids[0], b.walletId, 'transaction.received'],
        [ids[1], a.walletId, 'transaction.received'],
      ],
    )
    // The payload as read back for the stream and webhooks: compact JSON, keys in the contract's order.
    const [received] = await readWalletEvents(db, b.walletId, events[1].id - 1, events[1].id, 10)
    const payload = received.payload
    assert.deepEqual(JSON.parse(payload).data, (outcomes[0] as { transaction: unknown }).transaction)
    assert.equal(payload, JSON.stringify(JSON.parse(payload)))
    assert.deepEqual(Object.keys(JSON.parse(payload)), ['type', 'id', 'created_at', 'data'])
    assert.match(JSON.parse(payload).id, /^evt_[0-9a-f]{32}$/)
    const deliveries = await db
      .selectFrom('webhook_deliveries')
      .select(['event_id', 'wallet_id', 'status'])
      .where('wallet_id', 'in', [a.walletId, b.walletId])
      .execute()
    assert.deepEqual(deliveries, [{ event_id: events[1].id, wallet_id: b.walletId, status: 'pending' }])
  })

  it('gives every event an id of its own, also past a refill of the random pool (409 events)', async () => {
    const [a, b] = [await fundedUser(t, [[gold, 300]]), await createUser(t.app)]
    const outcomes = await apply(Array.from({ length: 300 }, () => move(a, b, [{ asset: gold, quantity: 1 }])))
    assert.ok(outcomes.every((outcome) => outcome.ok))
    const events = (await allEvents(db)).filter(
      (event) => [a.walletId, b.walletId].includes(event.wallet_id) && event.type.startsWith('transaction.'),
    )
    const ids = events.map((event) => JSON.parse(event.payload).id)
    assert.equal(ids.length, 600 + 1)
    assert.equal(new Set(ids).size, ids.length)
    for (const id of ids) assert.match(id, /^evt_[0-9a-f]{32}$/)
  })

  it('rolls back a batch whose Idempotency-Key was stored meanwhile and names the move', async () => {
    const [a, b] = [await fundedUser(t, [[gold, 5]]), await createUser(t.app)]
    const now = new Date().toISOString()
    await db
      .insertInto('idempotency_keys')
      .values({ wallet_id: a.walletId, key: 'taken', request_hash: 'x', status_code: 201, response_body: '{}', created_at: now })
      .execute()
    await assert.rejects(
      apply([
        move(a, b, [{ asset: gold, quantity: 1 }], { idempotency: { key: 'fresh', requestHash: 'y' } }),
        move(a, b, [{ asset: gold, quantity: 1 }], { idempotency: { key: 'taken', requestHash: 'y' } }),
      ]),
      (error) => error instanceof IdempotencyConflict && error.indexes.join() === '1',
    )
    assert.equal(await holding(a.walletId, gold), 5)
    const keys = await db.selectFrom('idempotency_keys').select('key').where('wallet_id', '=', a.walletId).execute()
    assert.deepEqual(keys, [{ key: 'taken' }])
  })

  it('group-commits parallel transfers: each answered with its own outcome, and a database error fails only its own transfer', async () => {
    const [a, b] = [await fundedUser(t, [[gold, 20]]), await createUser(t.app)]
    const ghost: Asset = { id: 999_999, name: 'ghost', value: 1 }
    const { dialect } = t.database
    const committer = new GroupCommitter(db, outbox, { maxBatch: DEFAULT_MAX_BATCH[dialect], beginEarly: dialect === 'postgres' })
    const results = await Promise.allSettled([
      ...Array.from({ length: 25 }, () => committer.run(move(a, b, [{ asset: gold, quantity: 1 }]))),
      // An asset that does not exist: the holdings insert breaks its foreign key, so the batch runs its members one by one.
      committer.run(move(b, a, [{ asset: ghost, quantity: 0 }])),
    ])
    const fulfilled = results.filter((result) => result.status === 'fulfilled')
    const refused = results.slice(0, 25).filter((result) => result.status === 'rejected')
    assert.equal(fulfilled.length, 20)
    assert.ok(refused.every((result) => (result.reason as { code?: string }).code === 'I002'))
    assert.equal(results[25].status, 'rejected')
    assert.deepEqual([await holding(a.walletId, gold), await holding(b.walletId, gold)], [0, 20])
  })

  it('never runs a batch again when its COMMIT fails: it may have committed, so every member fails once', async () => {
    const [a, b] = [await fundedUser(t, [[gold, 20]]), await createUser(t.app)]
    let lost = false
    // The committer's database: the first transaction commits, then its reply is lost.
    const lostReply = new Proxy(db, {
      get(target, key) {
        if (key === 'transaction') {
          return () => ({
            execute: async (work: (trx: Executor) => Promise<unknown>) => {
              const result = await target.transaction().execute(work)
              if (lost) return result
              lost = true
              throw new Error('Connection terminated unexpectedly')
            },
          })
        }
        const value: unknown = Reflect.get(target, key)
        return typeof value === 'function' ? value.bind(target) : value
      },
    })
    const committer = new GroupCommitter(lostReply, outbox, { maxBatch: 64, beginEarly: false })
    const results = await Promise.allSettled(Array.from({ length: 3 }, () => committer.run(move(a, b, [{ asset: gold, quantity: 1 }]))))
    assert.deepEqual(
      results.map((result) => result.status),
      ['rejected', 'rejected', 'rejected'],
    )
    // Committed once, as the database says, and not once more by running the members again.
    assert.deepEqual([await holding(a.walletId, gold), await holding(b.walletId, gold)], [17, 3])
  })

  it(
    'a holding created while the batch waited for its turn: its running balances count on from it (PostgreSQL)',
    { skip: STORAGE !== 'postgres' && 'PostgreSQL only' },
    async () => {
      const [a, b] = [await fundedUser(t, [[gold, 100]]), await createUser(t.app)]
      // The first batch takes both wallets' turns and creates b's gold holding, and stays open.
      let release = () => {}
      const released = new Promise<void>((resolve) => (release = resolve))
      let created = () => {}
      const holdingCreated = new Promise<void>((resolve) => (created = resolve))
      const first = db.transaction().execute(async (trx) => {
        const outcomes = await applyMoves(trx, [move(a, b, [{ asset: gold, quantity: 40 }])], outbox)
        created()
        await released
        return outcomes
      })
      await Promise.race([holdingCreated, first])
      // The second batch's locking statement begins (its snapshot without the new holding) and waits for the turns.
      const second = inTransaction(db, (trx) => applyMoves(trx, [move(a, b, [{ asset: gold, quantity: 20 }])], outbox))
      for (;;) {
        const { rows } = await sql<{ waiting: number }>`
        select count(*)::int as waiting from pg_locks
        where locktype = 'advisory' and not granted and database = (select oid from pg_database where datname = current_database())`.execute(
          db,
        )
        if (rows[0].waiting > 0) break
        await new Promise((resolve) => setTimeout(resolve, 10))
      }
      release()
      assert.equal((await first)[0].ok, true)
      assert.equal((await second)[0].ok, true)
      assert.equal(await holding(b.walletId, gold), 60)
      const balances = await db
        .selectFrom('running_balances')
        .select('quantity')
        .where('wallet_id', '=', b.walletId)
        .where('asset_id', '=', gold.id)
        .orderBy('created_at')
        .orderBy('transaction_id')
        .execute()
      assert.deepEqual(
        balances.map((row) => Number(row.quantity)),
        [40, 60],
      )
    },
  )

  it(
    "begins the next batch's transaction while a batch runs (PostgreSQL), and leaves none open",
    { skip: STORAGE !== 'postgres' && 'PostgreSQL only' },
    async () => {
      const [a, b] = [await fundedUser(t, [[gold, 30]]), await createUser(t.app)]
      let begunEarly = 0
      // The committer's database, counting the transactions it begins early.
      const counted = new Proxy(db, {
        get(target, key) {
          if (key === 'startTransaction') return () => (begunEarly++, target.startTransaction())
          const value: unknown = Reflect.get(target, key)
          return typeof value === 'function' ? value.bind(target) : value
        },
      })
      const committer = new GroupCommitter(counted, outbox, { maxBatch: 64, beginEarly: true })
      const first = committer.run(move(a, b, [{ asset: gold, quantity: 1 }]))
      // Once the first batch is running, the next transfers wait for the next batch, whose transaction begins now.
      await new Promise((resolve) => setImmediate(resolve))
      const rest = Array.from({ length: 29 }, () => committer.run(move(a, b, [{ asset: gold, quantity: 1 }])))
      // Also a transfer over the balance (refused alone), and one whose database error rolls the early
      // transaction back (its batch then runs member by member).
      const refused = committer.run(move(a, b, [{ asset: gold, quantity: 5 }]))
      const broken = committer.run(move(b, a, [{ asset: { id: 999_999, name: 'ghost', value: 1 }, quantity: 0 }]))
      const results = await Promise.allSettled([first, ...rest, refused, broken])
      assert.deepEqual(
        results.map((result) => result.status),
        [...Array(30).fill('fulfilled'), 'rejected', 'rejected'],
      )
      assert.equal((results[30] as PromiseRejectedResult).reason.code, 'I002')
      assert.equal(begunEarly, 1)
      assert.deepEqual([await holding(a.walletId, gold), await holding(b.walletId, gold)], [0, 30])
      // The journal's sequencer positions and signs these in transactions of its own; once it has, it is idle.
      await journalCovered(db)
      const { rows } = await sql<{
        open: number
      }>`select count(*)::int as open from pg_stat_activity where datname = current_database() and state like 'idle in transaction%'`.execute(
        db,
      )
      assert.equal(rows[0].open, 0)
    },
  )
})
