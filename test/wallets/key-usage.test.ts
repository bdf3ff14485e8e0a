import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import type { Db } from '../../src/db/database.ts'
import { migrateTo, migrateToLatest, MIGRATION_NAMES } from '../../src/db/migrate.ts'
import { createOutbox } from '../../src/events/outbox.ts'
import type { Asset } from '../../src/ledger/ledger.types.ts'
import { applyUnits, type Move, type Outcome } from '../../src/ledger/moves.ts'
import { pruneOnce } from '../../src/operations/retention.ts'
import { readKeyUsage } from '../../src/wallets/key-usage.ts'
import { buildTestApp, STORAGE, type TestApp } from '../helpers/app.ts'
import { createAsset, fundedUser, type TestUser } from '../helpers/factories.ts'

/**
 * What counts against a key's `per_day` cap (src/wallets/key-usage.ts): running totals of its uses
 * must give exactly the sum of what it moved over the last 24 hours, at the window's edge, across
 * clocks, in batches, beside holds, and over rows written before the totals existed.
 */
describe(`a key's daily usage (${STORAGE})`, () => {
  let t: TestApp
  let db: Db
  let gold: Asset
  let nextKey = 900_000
  const HOUR = 3600_000
  const t0 = Date.parse('2030-01-01T00:00:00.000Z')

  before(async () => {
    t = await buildTestApp()
    db = t.database.db
    gold = await createAsset(t, { name: 'gold' })
  })
  after(async () => {
    await t.close()
  })

  /**
   * A key id of its own for each test (`key_uses` rows are all that tie a use to its key), moving
   * between wallets of its own, whose transactions follow the test's clock.
   */
  const wallets = new Map<number, [TestUser, TestUser]>()
  async function newKey(): Promise<number> {
    wallets.set(++nextKey, [await fundedUser(t, [[gold, 1_000_000]]), await fundedUser(t, [[gold, 1]])])
    return nextKey
  }

  const move = (keyId: number, quantity: number, cap: number, [from, to] = wallets.get(keyId) ?? []): Move => ({
    from: from?.walletId ?? 0,
    to: to?.walletId ?? 0,
    lines: [{ asset: gold, quantity }],
    memo: '',
    kind: 'transfer',
    key: { keyId, perDay: new Map([[gold.id, cap]]) },
  })

  /** Units applied in one commit at the instant `at`: each unit's outcomes as `ok` or the error's code. */
  async function commit(at: number, units: Move[][], atomic = true): Promise<string[][]> {
    const outcomes = await db.transaction().execute((trx) =>
      applyUnits(
        trx,
        units.map((moves) => ({ moves, atomic })),
        createOutbox(),
        () => new Date(at).toISOString(),
      ),
    )
    return outcomes.map((unit) =>
      unit.map((outcome: Outcome) => (outcome.ok ? 'ok' : ((outcome.error as { code?: string } | undefined)?.code ?? '-'))),
    )
  }

  async function used(keyId: number, at: number): Promise<number> {
    return (await readKeyUsage(db, new Map([[keyId, [gold.id]]]), at)).get(keyId)?.get(gold.id)?.used ?? -1
  }

  it('counts a use until exactly 24 hours after it, and the cap frees at that instant', async () => {
    const key = await newKey()
    assert.deepEqual(await commit(t0, [[move(key, 30, 60)]]), [['ok']])
    assert.deepEqual(await commit(t0 + HOUR, [[move(key, 20, 60)]]), [['ok']])
    assert.deepEqual(await commit(t0 + 2 * HOUR, [[move(key, 10, 60)]]), [['ok']])
    assert.equal(await used(key, t0 + 2 * HOUR), 60)
    assert.equal(await used(key, t0 + 24 * HOUR - 1), 60)
    assert.deepEqual(await commit(t0 + 24 * HOUR - 1, [[move(key, 1, 60)]]), [['K001']])
    assert.equal(await used(key, t0 + 24 * HOUR), 30)
    assert.equal(await used(key, t0 + 25 * HOUR), 10)
    assert.equal(await used(key, t0 + 26 * HOUR), 0)
    assert.deepEqual(await commit(t0 + 24 * HOUR, [[move(key, 31, 60)]]), [['K001']])
    assert.deepEqual(await commit(t0 + 24 * HOUR, [[move(key, 30, 60)]]), [['ok']])
    assert.equal(await used(key, t0 + 24 * HOUR), 60)
    assert.equal(await used(key, t0 + 26 * HOUR), 30)
    assert.equal(await used(key, t0 + 48 * HOUR), 0)
    // Long after, the totals carry on: only the new use counts.
    assert.deepEqual(await commit(t0 + 100 * HOUR, [[move(key, 60, 60)]]), [['ok']])
    assert.equal(await used(key, t0 + 100 * HOUR), 60)
  })

  it('dates a use from a clock behind the last one no earlier than that one, so it is neither lost nor counted twice', async () => {
    const key = await newKey()
    assert.deepEqual(await commit(t0 + 5 * HOUR, [[move(key, 10, 100)]]), [['ok']])
    // Another instance's clock, an hour behind (between other wallets, whose history starts then).
    const behind: [TestUser, TestUser] = [await fundedUser(t, [[gold, 100]]), await fundedUser(t, [[gold, 1]])]
    assert.deepEqual(await commit(t0 + 4 * HOUR, [[move(key, 5, 100, behind)]]), [['ok']])
    assert.equal(await used(key, t0 + 4 * HOUR), 15)
    assert.equal(await used(key, t0 + 29 * HOUR - 1), 15)
    assert.equal(await used(key, t0 + 29 * HOUR), 0)
    assert.deepEqual(await commit(t0 + 6 * HOUR, [[move(key, 85, 100)]]), [['ok']])
    assert.deepEqual(await commit(t0 + 6 * HOUR, [[move(key, 1, 100)]]), [['K001']])
    assert.equal(await used(key, t0 + 29 * HOUR), 85)
  })

  it('counts every member of one key in one commit, each member seeing those before it', async () => {
    const key = await newKey()
    const other = await newKey()
    assert.deepEqual(await commit(t0, [[move(key, 5, 100)]]), [['ok']])
    // Units of a group commit: an atomic batch whose second member is past the cap leaves both
    // out ('-': not written), and the units after it see the first unit's use.
    assert.deepEqual(
      await commit(t0 + HOUR, [
        [move(key, 40, 100)],
        [move(other, 7, 10)],
        [move(key, 30, 100), move(key, 26, 100)],
        [move(key, 25, 100)],
        [move(key, 31, 100)],
      ]),
      [['ok'], ['ok'], ['-', 'K001'], ['ok'], ['K001']],
    )
    assert.equal(await used(key, t0 + HOUR), 70)
    assert.equal(await used(other, t0 + HOUR), 7)
    // A batch of members each on its own (`atomic: false`): a later member that still fits commits.
    assert.deepEqual(await commit(t0 + 2 * HOUR, [[move(key, 20, 100), move(key, 11, 100), move(key, 10, 100)]], false), [
      ['ok', 'K001', 'ok'],
    ])
    assert.equal(await used(key, t0 + 2 * HOUR), 100)
    assert.equal(await used(key, t0 + 24 * HOUR), 95)
    assert.equal(await used(key, t0 + 25 * HOUR), 30)
    assert.equal(await used(key, t0 + 26 * HOUR), 0)
    assert.equal(await used(other, t0 + 25 * HOUR), 0)
  })

  it('keeps exact totals past 2^53, where they wrap', async () => {
    const key = await newKey()
    // Uses whose totals came near 2^53 (long-gone uses before them summed that much).
    const use = (ms: number, quantity: number, running: number) =>
      db
        .insertInto('key_uses')
        .values({ key_id: key, asset_id: gold.id, quantity, created_at: new Date(t0 + ms).toISOString(), hold_id: null, running })
        .execute()
    await use(-25 * HOUR, 3, 2 ** 53 - 13)
    await use(0, 10, 2 ** 53 - 3)
    assert.equal(await used(key, t0), 10)
    assert.deepEqual(await commit(t0 + HOUR, [[move(key, 10, 100)]]), [['ok']])
    const [last] = await db.selectFrom('key_uses').select('running').where('key_id', '=', key).orderBy('id', 'desc').limit(1).execute()
    assert.equal(Number(last.running), 7)
    assert.equal(await used(key, t0 + HOUR), 20)
    assert.equal(await used(key, t0 + 24 * HOUR), 10)
    assert.equal(await used(key, t0 + 25 * HOUR), 0)
  })

  it("counts a hold while pending and for what it captured, beside the key's transfers, and nothing once voided or expired", async () => {
    const owner = await fundedUser(t, [[gold, 1000]])
    const created = await t.app.inject({
      method: 'POST',
      url: '/wallet/sessions',
      headers: owner.auth,
      payload: { limits: { per_day: { gold: 1000 } } },
    })
    assert.equal(created.statusCode, 201, created.body)
    const key = created.json() as { id: number; token: string }
    const auth = { authorization: `Bearer ${key.token}` }
    const send = async (url: string, payload: object, status = 201) => {
      const response = await t.app.inject({ method: 'POST', url, headers: auth, payload })
      assert.equal(response.statusCode, status, response.body)
      return response.json() as { id: number; expires_at: string }
    }
    const receiver = await fundedUser(t, [[gold, 1]])
    const gold_ = (quantity: number) => ({ recipient: receiver.username, assets: { gold: quantity } })
    const usedNow = () => used(key.id, Date.now())
    await send('/wallet/transactions', gold_(10))
    const voided = await send('/wallet/holds', { ...gold_(50), expires_in: 3600 })
    await send('/wallet/transactions', gold_(5))
    const captured = await send('/wallet/holds', { ...gold_(40), expires_in: 3600 })
    const expiring = await send('/wallet/holds', { ...gold_(100), expires_in: 60 })
    await send('/wallet/transactions', gold_(1))
    assert.equal(await usedNow(), 10 + 50 + 5 + 40 + 100 + 1)
    await send(`/wallet/holds/${voided.id}/void`, {}, 200)
    assert.equal(await usedNow(), 10 + 5 + 40 + 100 + 1)
    await send(`/wallet/holds/${captured.id}/capture`, { assets: { gold: 15 } })
    assert.equal(await usedNow(), 10 + 5 + 15 + 100 + 1)
    // Past the last hold's expiry, pending or not, it counts no more; the transfers still do.
    assert.equal(await used(key.id, Date.parse(expiring.expires_at)), 10 + 5 + 15 + 1)
    const shown = await t.app.inject({ method: 'GET', url: '/wallet/sessions', headers: owner.auth })
    assert.deepEqual((shown.json() as { id: number; used: object }[]).find((entry) => entry.id === key.id)?.used, {
      gold: 10 + 5 + 15 + 100 + 1,
    })
  })

  it('0027 gives the uses written before it their running totals, in time then id order, holds left out', async () => {
    const [a, b] = [await newKey(), await newKey()]
    const at = (ms: number) => new Date(t0 + ms).toISOString()
    // As the earlier release wrote them: a batch's members at one instant, a later id with an earlier
    // instant (another instance's clock), another asset and another key between, a hold's use.
    const rows = [
      { key_id: a, asset_id: gold.id, quantity: 7, created_at: at(0), hold_id: null },
      { key_id: a, asset_id: gold.id, quantity: 11, created_at: at(HOUR), hold_id: null },
      { key_id: b, asset_id: gold.id, quantity: 1000, created_at: at(HOUR), hold_id: null },
      { key_id: a, asset_id: gold.id, quantity: 13, created_at: at(HOUR), hold_id: null },
      { key_id: a, asset_id: gold.id + 1000, quantity: 500, created_at: at(HOUR), hold_id: null },
      { key_id: a, asset_id: gold.id, quantity: 17, created_at: at(3 * HOUR), hold_id: null },
      { key_id: a, asset_id: gold.id, quantity: 19, created_at: at(2 * HOUR), hold_id: null },
      { key_id: a, asset_id: gold.id, quantity: 999, created_at: at(2 * HOUR), hold_id: 987_654_321 },
      { key_id: a, asset_id: gold.id, quantity: 23, created_at: at(3 * HOUR), hold_id: null },
    ]
    const before = MIGRATION_NAMES[MIGRATION_NAMES.indexOf('0027_key_use_totals') - 1]
    await migrateTo(db, before)
    try {
      for (const row of rows) await db.insertInto('key_uses').values(row).execute()
    } finally {
      await migrateToLatest(db)
    }
    const stored = await db
      .selectFrom('key_uses')
      .select(['quantity', 'running'])
      .where('key_id', '=', a)
      .where('asset_id', '=', gold.id)
      .orderBy('id')
      .execute()
    assert.deepEqual(
      stored.map((row) => [Number(row.quantity), row.running === null ? null : Number(row.running)]),
      [
        [7, 7],
        [11, 18],
        [13, 31],
        [17, 67],
        [19, 50],
        [999, null],
        [23, 90],
      ],
    )
    // The window's sum at each instant, as summing the rows would give it.
    for (const [ms, expected] of [
      [23 * HOUR, 90],
      [24 * HOUR, 83],
      [25 * HOUR, 59],
      [26 * HOUR, 40],
      [27 * HOUR, 0],
    ] as const)
      assert.equal(await used(a, t0 + ms), expected, `at ${ms / HOUR} hours`)
    assert.equal(await used(b, t0 + 24 * HOUR), 1000)
    // A use after the upgrade extends the totals.
    assert.deepEqual(await commit(t0 + 4 * HOUR, [[move(a, 10, 200)]]), [['ok']])
    assert.equal(await used(a, t0 + 4 * HOUR), 100)
    assert.equal(await used(a, t0 + 26 * HOUR), 50)
  })

  it('keeps, when retention prunes old uses, what every window from then on reads', async () => {
    const key = await newKey()
    const start = t0 + 500 * HOUR
    for (let hour = 0; hour <= 66; hour += 6) assert.deepEqual(await commit(start + hour * HOUR, [[move(key, 1 + hour, 1_000)]]), [['ok']])
    const now = start + 80 * HOUR
    const instants = [now - HOUR, now, now + 5 * HOUR, now + 10 * HOUR]
    const before = await Promise.all(instants.map((at) => used(key, at)))
    assert.deepEqual(before, [128, 128, 67, 0])
    const report = await pruneOnce(t.database, { eventRetentionDays: 30, idempotencyRetentionHours: 24, sessionIdleDays: 0 }, now)
    assert.ok(report && report.keyUses >= 9, JSON.stringify(report))
    assert.deepEqual(await Promise.all(instants.map((at) => used(key, at))), before)
    // Of the uses older than 25 hours, only the newest without a hold stays, for each key and asset.
    const cutoff = new Date(now - 25 * HOUR).toISOString()
    const old = await db.selectFrom('key_uses').select(['key_id', 'asset_id', 'hold_id']).where('created_at', '<', cutoff).execute()
    assert.ok(old.every((row) => row.hold_id === null))
    assert.equal(new Set(old.map((row) => `${row.key_id}/${row.asset_id}`)).size, old.length)
    assert.ok(old.some((row) => Number(row.key_id) === key))
    // The cap still counts from the same totals: 128 of 200 used, so 72 more pass and the 73rd does not.
    assert.deepEqual(await commit(now, [[move(key, 73, 200)]]), [['K001']])
    assert.deepEqual(await commit(now, [[move(key, 72, 200)]]), [['ok']])
  })
})
