import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { sql } from 'kysely'
import pg from 'pg'
import type { Asset, Transaction } from '../../src/ledger/ledger.types.ts'
import { buildTestApp, expectError, runExpiryJobs, STORAGE, type TestApp } from '../helpers/app.ts'
import { createAsset, createUser, issue, readHoldings, transfer, type Holding, type TestUser } from '../helpers/factories.ts'

const HOUR = 3_600_000
const DAY = 24 * HOUR

/** Expiring units through the HTTP API, with the ledger's clock moved instead of waiting. */
describe(`expiring units (${STORAGE})`, () => {
  let t: TestApp
  let offset = 0
  const clock = () => new Date(Date.now() + offset).toISOString()
  const at = (ms: number) => new Date(Date.now() + offset + ms).toISOString()

  before(async () => {
    // The expiry job stays off: reads and spends must not count expired units without it.
    t = await buildTestApp({ HOLD_EXPIRY_INTERVAL_MS: '0' }, { clock })
  })
  after(async () => t.close())

  const issueExpiring = (walletId: number, asset: Asset, quantity: number, expiresAt?: string) =>
    issue(t, walletId, asset.id, quantity, expiresAt)
  const holdings = (user: TestUser, query = '') => readHoldings(t, user, query)

  async function holdingOf(user: TestUser, asset: Asset) {
    return (await holdings(user)).find((holding) => holding.asset.id === asset.id)
  }

  async function history(user: TestUser, kind: string): Promise<Transaction[]> {
    const response = await t.app.inject({ method: 'GET', url: `/wallet/transactions?kind=${kind}&limit=100`, headers: user.auth })
    assert.equal(response.statusCode, 200, response.body)
    return response.json()
  }

  /** A holding of `quantity` in all, nothing held, without credit, with these units by expiry. */
  const free = (asset: Asset, quantity: number, expiring: Holding['expiring']): Holding => ({
    asset,
    quantity,
    held: 0,
    credit_limit: 0,
    expiring,
  })
  const runExpiry = () => runExpiryJobs(t, clock)

  it('refuses an expires_at less than a minute or more than 10 years ahead, or not a time, with G000', async () => {
    const asset = await createAsset(t)
    const user = await createUser(t.app)
    for (const expiresAt of [at(30_000), at(11 * 365 * DAY), 'next tuesday', at(-HOUR)]) {
      const response = await t.app.inject({
        method: 'POST',
        url: `/wallets/${user.walletId}/assets`,
        headers: t.admin,
        payload: { id: asset.id, quantity: 5, expires_at: expiresAt },
      })
      expectError(response, 400, 'G000')
    }
    const many = await t.app.inject({
      method: 'POST',
      url: '/issuances',
      headers: t.admin,
      payload: { asset_id: asset.id, entries: [{ wallet_id: user.walletId, quantity: 5 }], expires_at: at(10) },
    })
    expectError(many, 400, 'G000')
    assert.deepEqual(await holdings(user), [])
  })

  it('lists units by expiry, soonest first, and spends the soonest first, units that never expire last', async () => {
    const points = await createAsset(t)
    const alice = await createUser(t.app)
    const bob = await createUser(t.app)
    const soon = at(2 * DAY)
    const later = at(20 * DAY)
    await issueExpiring(alice.walletId, points, 10, later)
    await issueExpiring(alice.walletId, points, 5)
    await issueExpiring(alice.walletId, points, 3, soon)
    assert.deepEqual(
      await holdingOf(alice, points),
      free(points, 18, [
        { quantity: 3, expires_at: soon },
        { quantity: 10, expires_at: later },
      ]),
    )
    await transfer(t, alice, bob.username, { [points.name]: 5 })
    assert.deepEqual((await holdingOf(alice, points))?.expiring, [{ quantity: 8, expires_at: later }])
    assert.deepEqual(
      await holdingOf(bob, points),
      free(points, 5, [
        { quantity: 3, expires_at: soon },
        { quantity: 2, expires_at: later },
      ]),
    )
    // A refund gives back units with their expiry: the refunding wallet spends its soonest.
    const sent = await transfer(t, alice, bob.username, { [points.name]: 10 })
    const refund = await t.app.inject({
      method: 'POST',
      url: `/wallet/transactions/${sent.id}/refund`,
      headers: bob.auth,
      payload: { assets: { [points.name]: 4 } },
    })
    assert.equal(refund.statusCode, 201, refund.body)
    assert.deepEqual((await holdingOf(bob, points))?.expiring, [{ quantity: 9, expires_at: later }])
    assert.deepEqual(
      await holdingOf(alice, points),
      free(points, 7, [
        { quantity: 3, expires_at: soon },
        { quantity: 1, expires_at: later },
      ]),
    )
  })

  it('stops counting units at their expiry before anything is written, then returns them to mint once', async () => {
    const points = await createAsset(t)
    const alice = await createUser(t.app)
    const bob = await createUser(t.app)
    const expiresAt = at(HOUR)
    await issueExpiring(alice.walletId, points, 10, expiresAt)
    await issueExpiring(alice.walletId, points, 4)
    await transfer(t, alice, bob.username, { [points.name]: 3 })
    const before = new Date(Date.parse(expiresAt) - 1000).toISOString()
    offset += HOUR + 1000
    // Read and spend see the expiry at once.
    assert.deepEqual(await holdingOf(alice, points), { asset: points, quantity: 4, held: 0, credit_limit: 0, expiring: [] })
    assert.equal(await holdingOf(bob, points), undefined)
    const refused = await t.app.inject({
      method: 'POST',
      url: '/wallet/transactions',
      headers: alice.auth,
      payload: { recipient: bob.username, assets: { [points.name]: 5 } },
    })
    expectError(refused, 400, 'I002')
    // Balances in time: before the instant the units count, after it they do not.
    assert.equal((await holdings(alice, `?as_of=${encodeURIComponent(before)}`)).find((h) => h.asset.id === points.id)?.quantity, 11)
    assert.equal((await holdings(alice, `?as_of=${encodeURIComponent(clock())}`)).find((h) => h.asset.id === points.id)?.quantity, 4)
    const overview = await t.app.inject({ method: 'GET', url: '/admin/overview', headers: t.admin })
    assert.equal(overview.json().assets.find((a: { asset: Asset }) => a.asset.id === points.id).circulating, 4)

    await runExpiry()
    await runExpiry()
    const [expired] = await history(alice, 'expiry')
    assert.equal((await history(alice, 'expiry')).length, 1)
    assert.equal(expired.kind, 'expiry')
    assert.equal(expired.receiving_wallet_address, 'mint')
    assert.deepEqual(
      expired.assets.map((line) => line.quantity),
      [7],
    )
    assert.equal((await history(bob, 'expiry')).length, 1)
    assert.deepEqual(await holdingOf(alice, points), { asset: points, quantity: 4, held: 0, credit_limit: 0, expiring: [] })
    await transfer(t, alice, bob.username, { [points.name]: 4 })
  })

  it('keeps reserved units while their hold is pending, moves them with a capture, and expires them when it is voided', async () => {
    const points = await createAsset(t)
    const alice = await createUser(t.app)
    const bob = await createUser(t.app)
    const expiresAt = at(HOUR)
    await issueExpiring(alice.walletId, points, 10, expiresAt)
    const place = async (quantity: number) => {
      const response = await t.app.inject({
        method: 'POST',
        url: '/wallet/holds',
        headers: alice.auth,
        payload: { recipient: bob.username, assets: { [points.name]: quantity }, expires_in: 86_400 },
      })
      assert.equal(response.statusCode, 201, response.body)
      return response.json().id as number
    }
    const captured = await place(4)
    const voided = await place(3)
    offset += 2 * HOUR
    // The 3 free units expired; the 7 reserved did not.
    assert.deepEqual(await holdingOf(alice, points), { ...free(points, 7, [{ quantity: 7, expires_at: expiresAt }]), held: 7 })
    await runExpiry()
    assert.deepEqual(await holdingOf(alice, points), { ...free(points, 7, [{ quantity: 7, expires_at: expiresAt }]), held: 7 })
    const capture = await t.app.inject({ method: 'POST', url: `/wallet/holds/${captured}/capture`, headers: alice.auth })
    assert.equal(capture.statusCode, 201, capture.body)
    // Captured units move with their expiry, which has passed: they expire at once in bob's wallet.
    assert.equal(await holdingOf(bob, points), undefined)
    const voiding = await t.app.inject({ method: 'POST', url: `/wallet/holds/${voided}/void`, headers: bob.auth })
    assert.equal(voiding.statusCode, 200, voiding.body)
    assert.equal(await holdingOf(alice, points), undefined)
    await runExpiry()
    assert.equal((await history(bob, 'expiry')).length, 1)
    assert.equal((await history(alice, 'expiry')).length, 2)
  })

  it('sweeps a deleted wallet with the expiry of its units, and a reversed burn brings units back with theirs', async () => {
    const points = await createAsset(t)
    const alice = await createUser(t.app)
    const expiresAt = at(5 * DAY)
    const created = await t.app.inject({
      method: 'POST',
      url: '/user/wallets',
      headers: alice.auth,
      payload: {
        address: `exp${'abcdefghij'[Date.now() % 10]}${Math.random()
          .toString(36)
          .replace(/[^a-z]/g, '')
          .slice(0, 12)}`,
      },
    })
    assert.equal(created.statusCode, 201, created.body)
    const other = created.json()
    await issueExpiring(other.id, points, 6, expiresAt)
    const active = await t.app.inject({ method: 'PUT', url: '/user/session/wallet', headers: alice.auth, payload: { wallet_id: other.id } })
    assert.equal(active.statusCode, 200, active.body)
    const deleted = await t.app.inject({ method: 'DELETE', url: '/wallet', headers: alice.auth })
    assert.equal(deleted.statusCode, 204, deleted.body)
    assert.deepEqual((await holdingOf(alice, points))?.expiring, [{ quantity: 6, expires_at: expiresAt }])

    const burn = await t.app.inject({
      method: 'DELETE',
      url: `/wallets/${alice.walletId}/assets/${points.id}?quantity=4`,
      headers: t.admin,
    })
    assert.equal(burn.statusCode, 204, burn.body)
    const [burned] = await history(alice, 'burn')
    const reversal = await t.app.inject({
      method: 'POST',
      url: `/transactions/${burned.id}/reversal`,
      headers: t.admin,
      payload: { assets: { [points.name]: 3 } },
    })
    assert.equal(reversal.statusCode, 201, reversal.body)
    assert.deepEqual((await holdingOf(alice, points))?.expiring, [{ quantity: 5, expires_at: expiresAt }])
    offset += 6 * DAY
    const late = await t.app.inject({ method: 'POST', url: `/transactions/${burned.id}/reversal`, headers: t.admin, payload: {} })
    expectError(late, 409, 'T001')
    await runExpiry()
  })

  it('counts what expires within 30 days on the overview', async () => {
    const points = await createAsset(t)
    const alice = await createUser(t.app)
    await issueExpiring(alice.walletId, points, 10, at(10 * DAY))
    await issueExpiring(alice.walletId, points, 20, at(40 * DAY))
    await issueExpiring(alice.walletId, points, 5)
    const overview = await t.app.inject({ method: 'GET', url: '/admin/overview', headers: t.admin })
    const row = overview.json().assets.find((a: { asset: Asset }) => a.asset.id === points.id)
    assert.deepEqual({ circulating: row.circulating, expiring_30d: row.expiring_30d }, { circulating: 35, expiring_30d: 10 })
    offset += 50 * DAY
    await runExpiry()
  })
})

describe('two first expiring issuances of one asset at once (PostgreSQL)', { skip: STORAGE !== 'postgres' && 'PostgreSQL only' }, () => {
  it('both commit without a deadlock while each waits for the asset row', async () => {
    const t = await buildTestApp()
    const url = t.config.databaseUrl as string
    const points = await createAsset(t)
    const [alice, bob] = [await createUser(t.app), await createUser(t.app)]
    const issue = (walletId: number) =>
      t.app.inject({
        method: 'POST',
        url: '/issuances',
        headers: t.admin,
        payload: {
          asset_id: points.id,
          entries: [{ wallet_id: walletId, quantity: 5 }],
          expires_at: new Date(Date.now() + DAY).toISOString(),
        },
      })
    // A share of the asset's row held here makes both issuances reach it before either may write it.
    const holder = await t.database.db.startTransaction().execute()
    let responses: Awaited<ReturnType<typeof issue>>[]
    try {
      await sql`select id from assets where id = ${points.id} for share`.execute(holder)
      const issued = Promise.all([issue(alice.walletId), issue(bob.walletId)])
      for (let waiting = 0; waiting < 2;) {
        await new Promise((resolve) => setTimeout(resolve, 20))
        const { rows } = await sql<{ waiting: number }>`
          select count(*)::int as waiting from pg_stat_activity
          where datname = current_database() and wait_event_type = 'Lock'`.execute(t.database.db)
        waiting = rows[0].waiting
      }
      await holder.commit().execute()
      responses = await issued
    } catch (error) {
      await holder.rollback().execute()
      throw error
    }
    for (const response of responses) assert.equal(response.statusCode, 201, response.body)
    await t.close()
    // A backend counts the deadlocks it broke in the database's statistics when it exits.
    const client = new pg.Client({ connectionString: url })
    await client.connect()
    try {
      for (;;) {
        const { rows } = await client.query<{ others: number }>(
          'select count(*)::int as others from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()',
        )
        if (rows[0].others === 0) break
        await new Promise((resolve) => setTimeout(resolve, 20))
      }
      await client.query('select pg_stat_clear_snapshot()')
      const { rows } = await client.query<{ deadlocks: string }>(
        'select deadlocks from pg_stat_database where datname = current_database()',
      )
      assert.equal(Number(rows[0].deadlocks), 0)
    } finally {
      await client.end()
    }
  })
})
