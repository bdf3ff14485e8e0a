import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import type { LightMyRequestResponse } from 'fastify'
import { readWalletEvents } from '../../src/events/events.repository.ts'
import { createOutbox } from '../../src/events/outbox.ts'
import { createLedger, type Ledger } from '../../src/ledger/ledger.service.ts'
import { verifyLedger } from '../../src/ledger/verify.ts'
import type { Asset, Hold, Transaction } from '../../src/ledger/ledger.types.ts'
import { buildTestApp, expectError, journalSettled, STORAGE, type TestApp } from '../helpers/app.ts'
import { createAsset, createUser, fundedUser, issue, uniqueName, type TestUser } from '../helpers/factories.ts'

const outbox = createOutbox()

/** Holds (two-phase transfers) through the HTTP API, on either storage. */
describe(`holds (${STORAGE})`, () => {
  let t: TestApp
  let gold: Asset
  let silver: Asset
  /** The ledger of another instance on the same storage: it runs the expiry job by hand. */
  let ledger: Ledger

  before(async () => {
    // The expiry job stays off here: reads must see expiry without it; a test runs it by hand.
    t = await buildTestApp({ HOLD_EXPIRY_INTERVAL_MS: '0' })
    ledger = createLedger({ database: t.database, events: outbox })
    gold = await createAsset(t, { name: uniqueName('gold') })
    silver = await createAsset(t, { name: uniqueName('silver') })
  })
  after(async () => {
    await ledger.close()
    await t.close()
  })

  function post(user: TestUser, url: string, payload?: unknown, headers: Record<string, string> = {}) {
    return t.app.inject({
      method: 'POST',
      url,
      headers: { ...user.auth, ...headers },
      ...(payload === undefined ? {} : { payload: payload as object }),
    })
  }

  function get(user: TestUser, url: string) {
    return t.app.inject({ method: 'GET', url, headers: user.auth })
  }

  async function createHold(from: TestUser, body: Record<string, unknown>, headers: Record<string, string> = {}): Promise<Hold> {
    const response = await post(from, '/wallet/holds', body, headers)
    assert.equal(response.statusCode, 201, response.body)
    return response.json()
  }

  async function capture(from: TestUser, holdId: number, body?: unknown): Promise<Transaction> {
    const response = await post(from, `/wallet/holds/${holdId}/capture`, body)
    assert.equal(response.statusCode, 201, response.body)
    return response.json()
  }

  async function readHold(user: TestUser, holdId: number): Promise<Hold> {
    const response = await get(user, `/wallet/holds/${holdId}`)
    assert.equal(response.statusCode, 200, response.body)
    return response.json()
  }

  /** [quantity, held] by asset name. */
  async function holdings(user: TestUser): Promise<Record<string, [number, number]>> {
    const response = await get(user, '/wallet/assets')
    assert.equal(response.statusCode, 200, response.body)
    return Object.fromEntries(
      (response.json() as { asset: Asset; quantity: number; held: number }[]).map((h) => [h.asset.name, [h.quantity, h.held]]),
    )
  }

  /**
   * What a client can see of a wallet: its holdings, its holds and its history, once the journal
   * has positioned every committed transaction (positions come within a second of a commit).
   */
  async function snapshot(...users: TestUser[]): Promise<string> {
    await journalSettled(t.database.db)
    const seen = []
    for (const user of users)
      seen.push(
        await holdings(user),
        (await get(user, '/wallet/holds?limit=100')).json(),
        (await get(user, '/wallet/transactions?limit=100')).json(),
      )
    return JSON.stringify(seen)
  }

  /** Moves a hold's expiry into the past, as if its time had come (the route's minimum is a minute). */
  async function expireNow(holdId: number, ago = 1_000): Promise<string> {
    const expiresAt = new Date(Date.now() - ago).toISOString()
    await t.database.db.updateTable('holds').set({ expires_at: expiresAt }).where('id', '=', holdId).execute()
    return expiresAt
  }

  async function eventsOf(user: TestUser) {
    return (await readWalletEvents(t.database.db, user.walletId, 0, Number.MAX_SAFE_INTEGER, 1000)).map((event) => ({
      type: event.type,
      payload: JSON.parse(event.payload),
    }))
  }

  describe('POST /wallet/holds', () => {
    it('reserves the assets in the sender and answers 201 with the pending Hold', async () => {
      const [alice, bob] = [
        await fundedUser(t, [
          [gold, 100],
          [silver, 10],
        ]),
        await createUser(t.app),
      ]
      const before = Date.now()
      const hold = await createHold(alice, {
        recipient: bob.username,
        memo: 'escrow',
        metadata: { order: 'A-1' },
        assets: { [gold.name]: 30, [silver.name]: 10 },
        expires_in: 3600,
      })
      assert.equal(hold.status, 'pending')
      assert.equal(hold.sending_wallet_id, alice.walletId)
      assert.equal(hold.receiving_wallet_id, bob.walletId)
      assert.equal(hold.sending_wallet_address, alice.address)
      assert.equal(hold.receiving_wallet_address, bob.address)
      assert.equal(hold.sending_username, alice.username)
      assert.equal(hold.receiving_username, bob.username)
      assert.equal(hold.memo, 'escrow')
      assert.deepEqual(hold.metadata, { order: 'A-1' })
      assert.deepEqual(
        hold.assets.map((line) => [line.asset.name, line.quantity]),
        [
          [gold.name, 30],
          [silver.name, 10],
        ],
      )
      assert.equal(Date.parse(hold.expires_at) - Date.parse(hold.created_at), 3_600_000)
      assert.ok(Date.parse(hold.created_at) >= before - 5)
      assert.equal(hold.settled_at, null)
      assert.equal(hold.transaction_id, null)
      // Still all the sender's, but reserved; nothing reached the recipient; held holdings are listed even with nothing free.
      assert.deepEqual(await holdings(alice), { [gold.name]: [100, 30], [silver.name]: [10, 10] })
      assert.deepEqual(await holdings(bob), {})
      assert.deepEqual(await readHold(bob, hold.id), hold)
    })

    it('expires after a week by default, and is idempotent with a key', async () => {
      const [alice, bob] = [await fundedUser(t, [[gold, 10]]), await createUser(t.app)]
      const body = { recipient: bob.username, assets: { [gold.name]: 4 } }
      const first = await post(alice, '/wallet/holds', body, { 'idempotency-key': 'hold-1' })
      assert.equal(first.statusCode, 201, first.body)
      const hold: Hold = first.json()
      assert.equal(Date.parse(hold.expires_at) - Date.parse(hold.created_at), 604_800_000)
      assert.deepEqual(hold.metadata, {})
      assert.equal(hold.memo, '')
      const again = await post(alice, '/wallet/holds', body, { 'idempotency-key': 'hold-1' })
      assert.equal(again.statusCode, 201)
      assert.equal(again.headers['idempotent-replayed'], 'true')
      assert.deepEqual(again.json(), hold)
      expectError(await post(alice, '/wallet/holds', { ...body, expires_in: 600 }, { 'idempotency-key': 'hold-1' }), 409, 'G003')
      // A transfer under the same key is a different request too.
      expectError(await post(alice, '/wallet/transactions', body, { 'idempotency-key': 'hold-1' }), 409, 'G003')
      assert.deepEqual(await holdings(alice), { [gold.name]: [10, 4] })
    })

    it('refuses what a transfer refuses, and out-of-range expiries or metadata, changing nothing', async () => {
      const [alice, bob] = [await fundedUser(t, [[gold, 10]]), await createUser(t.app)]
      await createHold(alice, { recipient: bob.username, assets: { [gold.name]: 6 } })
      const seen = await snapshot(alice, bob)
      const valid = { recipient: bob.username, assets: { [gold.name]: 1 } }
      for (const expires_in of [59, 2_592_001, 0, -60, 1.5, '600', null])
        expectError(await post(alice, '/wallet/holds', { ...valid, expires_in }), 400, 'G000')
      for (const metadata of [
        { k: 1 },
        { 'bad key': 'v' },
        { k: 'x'.repeat(501) },
        Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`k${i}`, 'v'])),
        'text',
        ['a'],
      ]) {
        expectError(await post(alice, '/wallet/holds', { ...valid, metadata }), 400, 'G000')
      }
      expectError(await post(alice, '/wallet/holds', { ...valid, assets: {} }), 400, 'G000')
      expectError(await post(alice, '/wallet/holds', { ...valid, assets: { [gold.name]: 0 } }), 400, 'G000')
      expectError(await post(alice, '/wallet/holds', { ...valid, recipient: uniqueName('nobody') }), 404, 'U003')
      expectError(await post(alice, '/wallet/holds', { ...valid, recipient: 'zzzzzzzz', type: 1 }), 404, 'W000')
      expectError(await post(alice, '/wallet/holds', { ...valid, recipient: alice.username }), 400, 'W013')
      expectError(await post(alice, '/wallet/holds', { ...valid, assets: { nosuchasset: 1 } }), 400, 'I001')
      // 6 of 10 are held: 4 are free, for a hold as for a transfer.
      const overdraft = await post(alice, '/wallet/holds', { ...valid, assets: { [gold.name]: 5 } })
      expectError(overdraft, 400, 'I002')
      assert.match(overdraft.json().detail, /6 held/)
      expectError(await post(alice, '/wallet/transactions', { ...valid, assets: { [gold.name]: 5 } }), 400, 'I002')
      assert.equal(await snapshot(alice, bob), seen)
    })
  })

  describe('spending what is free', () => {
    it('lets transfers, holds and burns take only quantity − held', async () => {
      const [alice, bob] = [await fundedUser(t, [[gold, 10]]), await createUser(t.app)]
      await createHold(alice, { recipient: bob.username, assets: { [gold.name]: 7 } })
      const refused = await post(alice, '/wallet/transactions', { recipient: bob.username, assets: { [gold.name]: 4 } })
      expectError(refused, 400, 'I002')
      assert.match(refused.json().detail, /held/)
      assert.equal((await post(alice, '/wallet/transactions', { recipient: bob.username, assets: { [gold.name]: 3 } })).statusCode, 201)
      assert.deepEqual(await holdings(alice), { [gold.name]: [7, 7] })
      // A burn of more than is free is refused; a burn without a quantity burns what is free: nothing here.
      expectError(
        await t.app.inject({ method: 'DELETE', url: `/wallets/${alice.walletId}/assets/${gold.id}?quantity=1`, headers: t.admin }),
        400,
        'I002',
      )
      const seen = await snapshot(alice)
      const none = await t.app.inject({ method: 'DELETE', url: `/wallets/${alice.walletId}/assets/${gold.id}`, headers: t.admin })
      assert.equal(none.statusCode, 204)
      assert.equal(await snapshot(alice), seen)
      await issue(t, alice.walletId, gold.id, 5)
      const burned = await t.app.inject({ method: 'DELETE', url: `/wallets/${alice.walletId}/assets/${gold.id}`, headers: t.admin })
      assert.equal(burned.statusCode, 204)
      assert.deepEqual(await holdings(alice), { [gold.name]: [7, 7] })
    })

    it("shows held in the operator's view of a wallet", async () => {
      const [alice, bob] = [await fundedUser(t, [[gold, 10]]), await createUser(t.app)]
      await createHold(alice, { recipient: bob.username, assets: { [gold.name]: 2 } })
      const response = await t.app.inject({ method: 'GET', url: `/admin/wallets/${alice.walletId}`, headers: t.admin })
      assert.equal(response.statusCode, 200, response.body)
      assert.deepEqual(
        response.json().holdings.map((h: { asset: Asset; quantity: number; held: number }) => [h.asset.name, h.quantity, h.held]),
        [[gold.name, 10, 2]],
      )
    })
  })

  describe('POST /wallet/holds/{id}/capture', () => {
    it("captures everything without a body: one Transaction to the recipient with the hold's memo", async () => {
      const [alice, bob] = [await fundedUser(t, [[gold, 10]]), await createUser(t.app)]
      const hold = await createHold(alice, { recipient: bob.username, memo: 'deal', metadata: { ref: '7' }, assets: { [gold.name]: 6 } })
      const transaction = await capture(alice, hold.id)
      assert.equal(transaction.kind, 'capture')
      assert.equal(transaction.hold_id, hold.id)
      assert.deepEqual(transaction.metadata, { ref: '7' })
      assert.equal(transaction.sending_wallet_id, alice.walletId)
      assert.equal(transaction.receiving_wallet_id, bob.walletId)
      assert.equal(transaction.memo, 'deal')
      assert.deepEqual(
        transaction.assets.map((line) => [line.asset.name, line.quantity]),
        [[gold.name, 6]],
      )
      assert.deepEqual(await holdings(alice), { [gold.name]: [4, 0] })
      assert.deepEqual(await holdings(bob), { [gold.name]: [6, 0] })
      const settled = await readHold(alice, hold.id)
      assert.equal(settled.status, 'captured')
      assert.equal(settled.transaction_id, transaction.id)
      assert.ok(settled.settled_at !== null && settled.settled_at >= hold.created_at)
      const history = (await get(bob, '/wallet/transactions')).json() as Transaction[]
      assert.equal(history[0].id, transaction.id)
      const captures = (await get(alice, '/wallet/transactions?kind=capture&metadata[ref]=7')).json() as Transaction[]
      assert.deepEqual(
        captures.map((t) => t.id),
        [transaction.id],
      )
    })

    it('captures part and releases the rest', async () => {
      const [alice, bob] = [
        await fundedUser(t, [
          [gold, 10],
          [silver, 5],
        ]),
        await createUser(t.app),
      ]
      const hold = await createHold(alice, { recipient: bob.username, assets: { [gold.name]: 8, [silver.name]: 5 } })
      const transaction = await capture(alice, hold.id, { assets: { [gold.name.toUpperCase()]: 3 } })
      assert.deepEqual(
        transaction.assets.map((line) => [line.asset.name, line.quantity]),
        [[gold.name, 3]],
      )
      assert.deepEqual(await holdings(alice), { [gold.name]: [7, 0], [silver.name]: [5, 0] })
      assert.deepEqual(await holdings(bob), { [gold.name]: [3, 0] })
      // The hold still shows what it reserved.
      assert.deepEqual(
        (await readHold(alice, hold.id)).assets.map((line) => line.quantity),
        [8, 5],
      )
    })

    it('answers H000 to anyone but the sender, H002 for more than held or an asset it lacks, H001 once settled; nothing changes', async () => {
      const [alice, bob, carol] = [
        await fundedUser(t, [
          [gold, 10],
          [silver, 10],
        ]),
        await createUser(t.app),
        await createUser(t.app),
      ]
      const hold = await createHold(alice, { recipient: bob.username, assets: { [gold.name]: 5 } })
      const seen = await snapshot(alice, bob)
      expectError(await post(bob, `/wallet/holds/${hold.id}/capture`), 404, 'H000')
      expectError(await post(carol, `/wallet/holds/${hold.id}/capture`), 404, 'H000')
      expectError(await post(alice, '/wallet/holds/999999999/capture'), 404, 'H000')
      expectError(await post(alice, '/wallet/holds/abc/capture'), 400, 'G001')
      const over = await post(alice, `/wallet/holds/${hold.id}/capture`, { assets: { [gold.name]: 6 } })
      expectError(over, 400, 'H002')
      expectError(await post(alice, `/wallet/holds/${hold.id}/capture`, { assets: { [silver.name]: 1 } }), 400, 'H002')
      expectError(await post(alice, `/wallet/holds/${hold.id}/capture`, { assets: { nosuchasset: 1 } }), 400, 'H002')
      for (const assets of [{}, { [gold.name]: 0 }, { [gold.name]: -1 }, { [gold.name]: 1.5 }, { [gold.name]: '1' }, []]) {
        expectError(await post(alice, `/wallet/holds/${hold.id}/capture`, { assets }), 400, 'G000')
      }
      assert.equal(await snapshot(alice, bob), seen)
      await capture(alice, hold.id, { assets: { [gold.name]: 1 } })
      const after = await snapshot(alice, bob)
      expectError(await post(alice, `/wallet/holds/${hold.id}/capture`), 409, 'H001')
      expectError(await post(alice, `/wallet/holds/${hold.id}/void`), 409, 'H001')
      expectError(await post(bob, `/wallet/holds/${hold.id}/void`), 409, 'H001')
      assert.equal(await snapshot(alice, bob), after)
    })

    it('answers a repeated capture with an Idempotency-Key from the first response', async () => {
      const [alice, bob] = [await fundedUser(t, [[gold, 10]]), await createUser(t.app)]
      const hold = await createHold(alice, { recipient: bob.username, assets: { [gold.name]: 5 } })
      const first = await post(alice, `/wallet/holds/${hold.id}/capture`, { assets: { [gold.name]: 2 } }, { 'idempotency-key': 'cap' })
      assert.equal(first.statusCode, 201, first.body)
      const again = await post(alice, `/wallet/holds/${hold.id}/capture`, { assets: { [gold.name]: 2 } }, { 'idempotency-key': 'cap' })
      assert.equal(again.statusCode, 201)
      assert.equal(again.headers['idempotent-replayed'], 'true')
      assert.deepEqual(again.json(), first.json())
      expectError(await post(alice, `/wallet/holds/${hold.id}/capture`, undefined, { 'idempotency-key': 'cap' }), 409, 'G003')
      assert.deepEqual(await holdings(bob), { [gold.name]: [2, 0] })
    })
  })

  describe('POST /wallet/holds/{id}/void', () => {
    it('lets either side void: 200 with the voided Hold, everything free again', async () => {
      const [alice, bob, carol] = [await fundedUser(t, [[gold, 10]]), await createUser(t.app), await createUser(t.app)]
      const first = await createHold(alice, { recipient: bob.username, assets: { [gold.name]: 4 } })
      const second = await createHold(alice, { recipient: bob.username, assets: { [gold.name]: 5 } })
      expectError(await post(carol, `/wallet/holds/${first.id}/void`), 404, 'H000')
      const bySender = await post(alice, `/wallet/holds/${first.id}/void`)
      assert.equal(bySender.statusCode, 200, bySender.body)
      assert.equal(bySender.json().status, 'voided')
      assert.equal(bySender.json().transaction_id, null)
      assert.notEqual(bySender.json().settled_at, null)
      const byReceiver = await post(bob, `/wallet/holds/${second.id}/void`)
      assert.equal(byReceiver.statusCode, 200, byReceiver.body)
      assert.deepEqual(await holdings(alice), { [gold.name]: [10, 0] })
      expectError(await post(bob, `/wallet/holds/${second.id}/void`), 409, 'H001')
      expectError(await post(alice, `/wallet/holds/${second.id}/capture`), 409, 'H001')
    })
  })

  describe('GET /wallet/holds', () => {
    it("lists the holds of either side, newest first, filtered and paged with a Link header; others' holds are H000", async () => {
      const [alice, bob, carol] = [await fundedUser(t, [[gold, 100]]), await fundedUser(t, [[gold, 100]]), await createUser(t.app)]
      const a1 = await createHold(alice, { recipient: bob.username, assets: { [gold.name]: 1 } })
      const b1 = await createHold(bob, { recipient: alice.username, assets: { [gold.name]: 2 } })
      const a2 = await createHold(alice, { recipient: carol.username, assets: { [gold.name]: 3 } })
      await post(alice, `/wallet/holds/${a2.id}/void`)
      const ids = (query: string) =>
        get(alice, `/wallet/holds${query}`).then((response) => (response.json() as Hold[]).map((hold) => hold.id))
      assert.deepEqual(await ids(''), [a2.id, b1.id, a1.id])
      assert.deepEqual(await ids('?direction=sent'), [a2.id, a1.id])
      assert.deepEqual(await ids('?direction=received'), [b1.id])
      assert.deepEqual(await ids('?status=voided'), [a2.id])
      assert.deepEqual(await ids('?status=pending'), [b1.id, a1.id])
      assert.deepEqual(await ids(`?after=${a1.id}`), [a2.id, b1.id])
      const page = await get(alice, '/wallet/holds?limit=2&status=pending')
      assert.deepEqual(
        (page.json() as Hold[]).map((hold) => hold.id),
        [b1.id, a1.id],
      )
      assert.equal(page.headers.link, undefined)
      const first = await get(alice, '/wallet/holds?limit=1&direction=sent')
      assert.equal(first.headers.link, `</wallet/holds?before=${a2.id}&limit=1&direction=sent>; rel="next"`)
      assert.deepEqual(await ids(`?before=${a2.id}&limit=1&direction=sent`), [a1.id])
      expectError(await get(carol, `/wallet/holds/${b1.id}`), 404, 'H000')
      expectError(await get(alice, '/wallet/holds/999999999'), 404, 'H000')
      for (const query of ['?limit=0', '?limit=101', '?status=open', '?direction=up', '?before=0', '?after=x'])
        expectError(await get(alice, `/wallet/holds${query}`), 400, 'G002')
    })
  })

  describe('expiry', () => {
    it('is seen by every read at expires_at, before the expiry job writes it, and the job then writes it once', async () => {
      const [alice, bob] = [await fundedUser(t, [[gold, 10]]), await createUser(t.app)]
      const hold = await createHold(alice, { recipient: bob.username, assets: { [gold.name]: 10 } })
      const expiresAt = await expireNow(hold.id)
      const seen = await readHold(bob, hold.id)
      assert.equal(seen.status, 'expired')
      assert.equal(seen.settled_at, expiresAt)
      assert.deepEqual(await holdings(alice), { [gold.name]: [10, 0] })
      assert.deepEqual(
        ((await get(alice, '/wallet/holds?status=expired')).json() as Hold[]).map((h) => h.id),
        [hold.id],
      )
      assert.deepEqual((await get(alice, '/wallet/holds?status=pending')).json(), [])
      expectError(await post(alice, `/wallet/holds/${hold.id}/capture`), 409, 'H001')
      expectError(await post(bob, `/wallet/holds/${hold.id}/void`), 409, 'H001')
      // What it held is free again: a transfer may spend it.
      assert.equal((await post(alice, '/wallet/transactions', { recipient: bob.username, assets: { [gold.name]: 1 } })).statusCode, 201)
      // Another hold of what is free, while the expired one is still stored as pending.
      await createHold(alice, { recipient: bob.username, assets: { [gold.name]: 9 } })
      assert.deepEqual(await holdings(alice), { [gold.name]: [9, 9] })
      assert.deepEqual((await verifyLedger(t.database.db)).problems, [])
      // The job writes it: the same answer, and hold.expired to both sides.
      assert.ok((await ledger.holds.expireDue(100)) >= 1)
      assert.deepEqual(await readHold(alice, hold.id), seen)
      assert.equal(await ledger.holds.expireDue(100), 0)
      for (const user of [alice, bob]) {
        const expired = (await eventsOf(user)).filter((event) => event.type === 'hold.expired')
        assert.deepEqual(
          expired.map((event) => event.payload.data),
          [seen],
        )
        assert.equal(expired[0].payload.created_at, expiresAt)
      }
      assert.deepEqual(await holdings(alice), { [gold.name]: [9, 9] })
    })
  })

  describe('events', () => {
    it("sends hold.created, hold.captured and the capture's transaction events to both sides, with the Hold as data", async () => {
      const [alice, bob] = [await fundedUser(t, [[gold, 10]]), await createUser(t.app)]
      const hold = await createHold(alice, { recipient: bob.username, assets: { [gold.name]: 5 } })
      const transaction = await capture(alice, hold.id, { assets: { [gold.name]: 2 } })
      const settled = await readHold(alice, hold.id)
      const other = await createHold(alice, { recipient: bob.username, assets: { [gold.name]: 1 } })
      const voided = (await post(bob, `/wallet/holds/${other.id}/void`)).json()
      for (const [user, side] of [
        [alice, 'sent'],
        [bob, 'received'],
      ] as const) {
        const events = (await eventsOf(user))
          .filter((event) => event.type !== 'transaction.received' || user === bob)
          .filter((event) => !(user === alice && event.type === 'transaction.received'))
        const relevant = events.filter((event) => event.type.startsWith('hold.') || event.payload.data.id === transaction.id)
        assert.deepEqual(
          relevant.map((event) => event.type),
          ['hold.created', `transaction.${side}`, 'hold.captured', 'hold.created', 'hold.voided'],
        )
        assert.deepEqual(relevant[0].payload.data, hold)
        assert.deepEqual(relevant[1].payload.data, transaction)
        assert.deepEqual(relevant[2].payload.data, settled)
        assert.deepEqual(relevant[4].payload.data, voided)
      }
    })
  })

  describe('wallet deletion', () => {
    it("voids the wallet's pending holds, both directions, before sweeping everything it owns", async () => {
      const owner = await fundedUser(t, [[gold, 10]])
      const other = await fundedUser(t, [[gold, 10]])
      const created = await post(owner, '/user/wallets', {})
      assert.equal(created.statusCode, 201, created.body)
      const side = created.json()
      await issue(t, side.id, gold.id, 8)
      assert.equal(
        (await t.app.inject({ method: 'PUT', url: '/user/session/wallet', headers: owner.auth, payload: { wallet_id: side.id } }))
          .statusCode,
        200,
      )
      const sent = await createHold(owner, { recipient: other.username, assets: { [gold.name]: 8 } })
      const received = await createHold(other, { recipient: side.address, type: 1, assets: { [gold.name]: 3 } })
      const deleted = await t.app.inject({ method: 'DELETE', url: '/wallet', headers: owner.auth })
      assert.equal(deleted.statusCode, 204, deleted.body)
      assert.equal((await readHold(other, sent.id)).status, 'voided')
      assert.equal((await readHold(other, received.id)).status, 'voided')
      assert.deepEqual(await holdings(owner), { [gold.name]: [18, 0] })
      assert.deepEqual(await holdings(other), { [gold.name]: [10, 0] })
      const types = (await eventsOf(other)).map((event) => event.type)
      assert.deepEqual(
        types.filter((type) => type.startsWith('hold.')),
        ['hold.created', 'hold.created', 'hold.voided', 'hold.voided'],
      )
    })
  })

  describe('coffer verify', () => {
    it('finds a held column that disagrees with the holds', async () => {
      const [alice, bob] = [await fundedUser(t, [[gold, 10]]), await createUser(t.app)]
      await createHold(alice, { recipient: bob.username, assets: { [gold.name]: 4 } })
      const row = () => t.database.db.updateTable('holdings').where('wallet_id', '=', alice.walletId).where('asset_id', '=', gold.id)
      await row()
        .set((eb) => ({ held: eb('held', '+', 1) }))
        .execute()
      const report = await verifyLedger(t.database.db)
      await row()
        .set((eb) => ({ held: eb('held', '-', 1) }))
        .execute()
      assert.ok(
        report.problems.some((problem) =>
          problem.includes(`wallet ${alice.walletId} has 5 of asset ${gold.id} held, its unsettled holds reserve 4`),
        ),
        report.problems.join('\n'),
      )
    })
  })

  describe('coffer verify of captures', () => {
    it('finds a capture whose hold says otherwise, and a hold that says it was captured by nothing', async () => {
      const [alice, bob] = [await fundedUser(t, [[gold, 10]]), await createUser(t.app)]
      const hold = await createHold(alice, { recipient: bob.username, assets: { [gold.name]: 4 } })
      const transaction = await capture(alice, hold.id, { assets: { [gold.name]: 3 } })
      const setHold = (changes: { status: string; transaction_id: number | null }) =>
        t.database.db.updateTable('holds').set(changes).where('id', '=', hold.id).execute()
      await setHold({ status: 'voided', transaction_id: null })
      const voided = await verifyLedger(t.database.db)
      await setHold({ status: 'captured', transaction_id: null })
      const nameless = await verifyLedger(t.database.db)
      await setHold({ status: 'captured', transaction_id: transaction.id })
      assert.ok(
        voided.problems.includes(`transaction ${transaction.id} is a capture of a hold it did not capture`),
        voided.problems.join('\n'),
      )
      assert.ok(nameless.problems.includes(`hold ${hold.id} (captured) names no transaction`), nameless.problems.join('\n'))
      assert.deepEqual((await verifyLedger(t.database.db)).problems, [])
    })
  })

  // In parallel: on PostgreSQL these race on rows and locks; SQLite serializes them (a sanity check there).
  describe('races', () => {
    it('lets exactly one of many captures and voids racing on one hold win; the others answer H001', async () => {
      for (let round = 0; round < 3; round++) {
        const [alice, bob] = [await fundedUser(t, [[gold, 100]]), await createUser(t.app)]
        const hold = await createHold(alice, { recipient: bob.username, assets: { [gold.name]: 60 } })
        const responses = await Promise.all(
          Array.from({ length: 16 }, (_, i) =>
            i % 4 === 0
              ? post(bob, `/wallet/holds/${hold.id}/void`)
              : i % 4 === 1
                ? post(alice, `/wallet/holds/${hold.id}/void`)
                : post(alice, `/wallet/holds/${hold.id}/capture`, i % 2 ? { assets: { [gold.name]: 10 } } : undefined),
          ),
        )
        const won = responses.filter((response) => response.statusCode === 200 || response.statusCode === 201)
        assert.equal(won.length, 1, responses.map((response) => response.body).join('\n'))
        for (const response of responses) if (response !== won[0]) expectError(response, 409, 'H001')
        const settled = await readHold(alice, hold.id)
        const moved = won[0].statusCode === 201 ? (won[0].json() as Transaction).assets[0].quantity : 0
        assert.equal(settled.status, won[0].statusCode === 201 ? 'captured' : 'voided')
        assert.deepEqual(await holdings(alice), { [gold.name]: [100 - moved, 0] })
        assert.deepEqual(await holdings(bob), moved > 0 ? { [gold.name]: [moved, 0] } : {})
        // One capture at most, and only if the hold says it was captured.
        const captures = (await get(bob, '/wallet/transactions?kind=capture')).json() as Transaction[]
        assert.equal(captures.length, moved > 0 ? 1 : 0)
      }
    })

    it('checks holds and transfers of one wallet racing against what is free: the sums add up exactly', async () => {
      const [alice, bob, carol] = [await fundedUser(t, [[gold, 100]]), await createUser(t.app), await createUser(t.app)]
      const responses: LightMyRequestResponse[] = await Promise.all(
        Array.from({ length: 40 }, (_, i) =>
          post(alice, i % 2 === 0 ? '/wallet/holds' : '/wallet/transactions', {
            recipient: i % 3 === 0 ? bob.username : carol.username,
            assets: { [gold.name]: 7 },
          }),
        ),
      )
      let held = 0
      let sent = 0
      for (const [i, response] of responses.entries()) {
        if (response.statusCode === 201) {
          if (i % 2 === 0) held += 7
          else sent += 7
        } else {
          expectError(response, 400, 'I002')
        }
      }
      // 100 free: 14 requests of 7 fit (98), whichever kind they were; every refusal came after.
      assert.equal(held + sent, 98)
      assert.deepEqual(await holdings(alice), { [gold.name]: [100 - sent, held] })
      const received = Object.values(await holdings(bob)).concat(Object.values(await holdings(carol)))
      assert.equal(
        received.reduce((sum, [quantity]) => sum + quantity, 0),
        sent,
      )
    })

    it('keeps what a hold reserves of a holding that a transfer in the same batch creates', async () => {
      let together = 0
      for (let round = 0; round < 8; round++) {
        const [alice, bob, carol] = [await fundedUser(t, [[gold, 10]]), await createUser(t.app), await createUser(t.app)]
        // Sent together, the two are committed in one batch: carol's first gold, and a hold on half of it.
        const [sent, held] = await Promise.all([
          post(alice, '/wallet/transactions', { recipient: carol.username, assets: { [gold.name]: 10 } }),
          post(carol, '/wallet/holds', { recipient: bob.username, assets: { [gold.name]: 5 } }),
        ])
        assert.equal(sent.statusCode, 201, sent.body)
        // The hold may have been checked before the transfer: carol then had nothing to reserve.
        if (held.statusCode !== 201) {
          expectError(held, 400, 'I002')
          continue
        }
        together += 1
        assert.deepEqual(await holdings(carol), { [gold.name]: [10, 5] })
        // What the hold reserves is not spent again.
        expectError(await post(carol, '/wallet/transactions', { recipient: bob.username, assets: { [gold.name]: 6 } }), 400, 'I002')
        await capture(carol, (held.json() as Hold).id)
        assert.deepEqual(await holdings(carol), { [gold.name]: [5, 0] })
      }
      assert.ok(together > 0, 'no hold was ever placed beside the transfer that funded it')
      assert.deepEqual((await verifyLedger(t.database.db)).problems, [])
    })

    it('gives an expiry racing a capture one outcome, never both', async () => {
      for (let round = 0; round < 6; round++) {
        const [alice, bob] = [await fundedUser(t, [[gold, 10]]), await createUser(t.app)]
        const hold = await createHold(alice, { recipient: bob.username, assets: { [gold.name]: 10 } })
        // The hold expires within a few milliseconds, while the capture and the expiry job run.
        await t.database.db
          .updateTable('holds')
          .set({ expires_at: new Date(Date.now() + round * 3).toISOString() })
          .where('id', '=', hold.id)
          .execute()
        const [captured] = await Promise.all([
          post(alice, `/wallet/holds/${hold.id}/capture`),
          ledger.holds.expireDue(100),
          ledger.holds.expireDue(100),
        ])
        await new Promise((resolve) => setTimeout(resolve, 20))
        await ledger.holds.expireDue(100)
        const settled = await readHold(alice, hold.id)
        if (captured.statusCode === 201) {
          assert.equal(settled.status, 'captured')
          assert.deepEqual(await holdings(bob), { [gold.name]: [10, 0] })
        } else {
          expectError(captured, 409, 'H001')
          assert.equal(settled.status, 'expired')
          assert.deepEqual(await holdings(alice), { [gold.name]: [10, 0] })
          assert.deepEqual(await holdings(bob), {})
        }
        const types = (await eventsOf(bob)).map((event) => event.type).filter((type) => type.startsWith('hold.'))
        assert.deepEqual(types, ['hold.created', settled.status === 'captured' ? 'hold.captured' : 'hold.expired'])
      }
      assert.deepEqual((await verifyLedger(t.database.db)).problems, [])
    })
  })
})
