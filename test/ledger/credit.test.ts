import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import type { LightMyRequestResponse } from 'fastify'
import { readWalletEvents } from '../../src/events/events.repository.ts'
import { verifyLedger } from '../../src/ledger/verify.ts'
import { buildPeerApp, buildTestApp, STORAGE, type TestApp } from '../helpers/app.ts'
import { createAsset, createUser, issue, type TestUser } from '../helpers/factories.ts'

/** Credit limits: a wallet's holding may go down to minus its limit, and never further. */

type Asset = { id: number; name: string }
type Holding = { asset: Asset; quantity: number; held: number; credit_limit: number; expiring: unknown[] }

describe('credit limits', () => {
  let t: TestApp
  let gold: Asset

  before(async () => {
    t = await buildTestApp()
    gold = await createAsset(t, { name: 'gold' })
  })
  after(async () => {
    await t.close()
  })

  const call = (method: string, url: string, headers: Record<string, string>, payload?: object) =>
    t.app.inject({ method: method as 'GET', url, headers, ...(payload === undefined ? {} : { payload }) })

  function expectCode(response: LightMyRequestResponse, status: number, code: string): Record<string, string> {
    assert.equal(response.statusCode, status, response.body)
    const body = response.json()
    assert.equal(body.code, code, response.body)
    return body
  }

  const setLimit = (walletId: number, limit: number, assetId = gold.id) =>
    call('PUT', `/wallets/${walletId}/credit`, t.admin, { asset_id: assetId, limit })
  const send = (from: TestUser, to: TestUser, quantity: number) =>
    call('POST', '/wallet/transactions', from.auth, { recipient: to.username, assets: { gold: quantity } })
  const holdings = async (user: TestUser, query = ''): Promise<Holding[]> => (await call('GET', `/wallet/assets${query}`, user.auth)).json()
  const goldOf = async (user: TestUser) => (await holdings(user)).find((holding) => holding.asset.id === gold.id)

  it('sets and removes a limit, answering what it set; bad input and unknown ids are refused', async () => {
    const alice = await createUser(t.app)
    const set = await setLimit(alice.walletId, 50)
    assert.equal(set.statusCode, 200, set.body)
    assert.deepEqual(set.json(), { wallet_id: alice.walletId, asset_id: gold.id, limit: 50 })
    // A holding of 0 with credit is listed, with its limit.
    assert.deepEqual(await goldOf(alice), {
      asset: { id: gold.id, name: 'gold', value: 1 },
      quantity: 0,
      held: 0,
      credit_limit: 50,
      expiring: [],
    })
    assert.equal((await setLimit(alice.walletId, 0)).statusCode, 200)
    assert.deepEqual(await holdings(alice), [])
    expectCode(await setLimit(987654321, 5), 404, 'W002')
    expectCode(await setLimit(alice.walletId, 5, 987654321), 404, 'W002')
    expectCode(await setLimit(1, 5), 404, 'W002')
    for (const body of [{ asset_id: gold.id, limit: -1 }, { asset_id: gold.id, limit: 1.5 }, { asset_id: gold.id }, { limit: 5 }])
      expectCode(await call('PUT', `/wallets/${alice.walletId}/credit`, t.admin, body), 400, 'G000')
    expectCode(await call('PUT', `/wallets/${alice.walletId}/credit`, alice.auth, { asset_id: gold.id, limit: 5 }), 403, 'A003')
  })

  it('lets a wallet spend down to minus its limit and no further, shown everywhere a holding is', async () => {
    const alice = await createUser(t.app)
    const bob = await createUser(t.app)
    await issue(t, alice.walletId, gold.id, 10)
    await setLimit(alice.walletId, 50)
    assert.equal((await send(alice, bob, 40)).statusCode, 201)
    const refused = expectCode(await send(alice, bob, 21), 400, 'I002')
    assert.match(refused.detail, /credit limit of 50/)
    assert.match(refused.detail, /20 can be spent/)
    assert.equal((await send(alice, bob, 20)).statusCode, 201)
    assert.deepEqual(await goldOf(alice), {
      asset: { id: gold.id, name: 'gold', value: 1 },
      quantity: -50,
      held: 0,
      credit_limit: 50,
      expiring: [],
    })
    // The operator's view of the wallet, the overview, balances in time and the statement.
    const admin = (await call('GET', `/admin/wallets/${alice.walletId}`, t.admin)).json()
    assert.deepEqual(
      admin.holdings.map((holding: Holding) => [holding.quantity, holding.credit_limit]),
      [[-50, 50]],
    )
    const overview = (await call('GET', '/admin/overview', t.admin)).json()
    const row = overview.assets.find((entry: { asset: Asset }) => entry.asset.id === gold.id)
    assert.ok(row.owed >= 50, JSON.stringify(row))
    const asOf = await holdings(alice, `?as_of=${encodeURIComponent(new Date().toISOString())}`)
    assert.deepEqual(
      asOf.map((holding) => [holding.quantity, holding.credit_limit]),
      [[-50, 50]],
    )
    const csv = (await call('GET', '/wallet/transactions?format=csv', alice.auth)).body
    assert.match(csv, /,-20,/)
    assert.equal((await verifyLedger(t.database.db)).ok, true)
  })

  it('counts credit for holds, batches and refunds; a burn takes only what the wallet owns', async () => {
    const alice = await createUser(t.app)
    const bob = await createUser(t.app)
    await issue(t, bob.walletId, gold.id, 100)
    await setLimit(alice.walletId, 30)
    const hold = await call('POST', '/wallet/holds', alice.auth, { recipient: bob.username, assets: { gold: 20 } })
    assert.equal(hold.statusCode, 201, hold.body)
    expectCode(await call('POST', '/wallet/holds', alice.auth, { recipient: bob.username, assets: { gold: 11 } }), 400, 'I002')
    const batch = await call('POST', '/wallet/transactions/batch', alice.auth, {
      transfers: [
        { recipient: bob.username, assets: { gold: 5 } },
        { recipient: bob.username, assets: { gold: 6 } },
      ],
    })
    assert.match(expectCode(batch, 400, 'I002').detail, /^transfers\[1\]: /)
    assert.equal((await call('POST', `/wallet/holds/${hold.json().id}/capture`, alice.auth)).statusCode, 201)
    assert.deepEqual([(await goldOf(alice))?.quantity, (await goldOf(alice))?.held], [-20, 0])
    // A refund of what alice received spends from credit too.
    const received = await send(bob, alice, 5)
    assert.equal((await call('POST', `/wallet/transactions/${received.json().id}/refund`, alice.auth, {})).statusCode, 201)
    assert.equal((await goldOf(alice))?.quantity, -20)
    // A burn: nothing owned is a 204 that changes nothing; a quantity is I002.
    assert.equal((await call('DELETE', `/wallets/${alice.walletId}/assets/${gold.id}`, t.admin)).statusCode, 204)
    expectCode(await call('DELETE', `/wallets/${alice.walletId}/assets/${gold.id}?quantity=1`, t.admin), 400, 'I002')
    assert.equal((await goldOf(alice))?.quantity, -20)
  })

  it('may be lowered below a debt: the wallet then spends nothing until it is back above the limit', async () => {
    const alice = await createUser(t.app)
    const bob = await createUser(t.app)
    await issue(t, bob.walletId, gold.id, 100)
    await setLimit(alice.walletId, 40)
    assert.equal((await send(alice, bob, 30)).statusCode, 201)
    assert.equal((await setLimit(alice.walletId, 10)).statusCode, 200)
    expectCode(await send(alice, bob, 1), 400, 'I002')
    assert.equal((await send(bob, alice, 25)).statusCode, 201)
    assert.equal((await send(alice, bob, 5)).statusCode, 201)
    expectCode(await send(alice, bob, 1), 400, 'I002')
    assert.equal((await verifyLedger(t.database.db)).ok, true)
  })

  it('is what balance monitors watch: a change of the limit crosses and restores like a move', async () => {
    const alice = await createUser(t.app)
    const bob = await createUser(t.app)
    await issue(t, alice.walletId, gold.id, 10)
    const watched = await call('POST', '/wallet/monitors', alice.auth, { asset: 'gold', below: 30 })
    assert.equal(watched.statusCode, 201, watched.body)
    assert.equal(watched.json().state, 'crossed')
    await setLimit(alice.walletId, 25) // 35 can be spent: restored
    assert.equal((await send(alice, bob, 10)).statusCode, 201) // 25: crossed
    await setLimit(alice.walletId, 40) // 40: restored
    await setLimit(alice.walletId, 40) // no change, no event
    const events = (await readWalletEvents(t.database.db, alice.walletId, 0, Number.MAX_SAFE_INTEGER, 1000))
      .filter((event) => event.type.startsWith('balance.'))
      .map((event) => JSON.parse(event.payload))
    assert.deepEqual(
      events.map((event) => [event.type, event.data.holding.quantity, event.data.holding.credit_limit]),
      [
        ['balance.restored', 10, 25],
        ['balance.crossed', 0, 25],
        ['balance.restored', 0, 40],
      ],
    )
  })

  it('does not mix with expiry: credit on an asset ever issued with an expiry, or an expiring issuance of an asset with credit, is C000', async () => {
    const alice = await createUser(t.app)
    const bob = await createUser(t.app)
    const expiresAt = new Date(Date.now() + 86_400_000).toISOString()
    const issueTo = (walletId: number, assetId: number, expiring: boolean) =>
      call('POST', `/wallets/${walletId}/assets`, t.admin, { id: assetId, quantity: 5, ...(expiring ? { expires_at: expiresAt } : {}) })
    // An asset once issued with an expiry takes no credit, even after those units are gone; 0 removes nothing and is fine.
    const points = await createAsset(t)
    assert.equal((await issueTo(alice.walletId, points.id, true)).statusCode, 201)
    expectCode(await setLimit(bob.walletId, 10, points.id), 409, 'C000')
    assert.equal((await setLimit(bob.walletId, 0, points.id)).statusCode, 200)
    // An asset with a credit limit anywhere takes no expiring issuance, on either route; plain issuance is fine.
    const tabs = await createAsset(t)
    assert.equal((await setLimit(bob.walletId, 10, tabs.id)).statusCode, 200)
    const before = await holdings(alice)
    expectCode(await issueTo(alice.walletId, tabs.id, true), 409, 'C000')
    expectCode(
      await call('POST', '/issuances', t.admin, {
        asset_id: tabs.id,
        entries: [{ wallet_id: alice.walletId, quantity: 5 }],
        expires_at: expiresAt,
      }),
      409,
      'C000',
    )
    assert.deepEqual(await holdings(alice), before, 'a refused issuance moves nothing')
    assert.equal((await issueTo(alice.walletId, tabs.id, false)).statusCode, 201)
    // A debt left after its limit was removed still counts as credit.
    assert.equal(
      (await call('POST', '/wallet/transactions', bob.auth, { recipient: alice.username, assets: { [tabs.name]: 4 } })).statusCode,
      201,
    )
    assert.equal((await setLimit(bob.walletId, 0, tabs.id)).statusCode, 200)
    expectCode(await issueTo(alice.walletId, tabs.id, true), 409, 'C000')
    // The refusals left the asset without an expiry: it still takes credit.
    assert.equal((await setLimit(alice.walletId, 3, tabs.id)).statusCode, 200)
  })

  it('refuses to delete a wallet that owes (C001), and deletes it once the debt is paid', async () => {
    const alice = await createUser(t.app)
    const bob = await createUser(t.app)
    await issue(t, bob.walletId, gold.id, 100)
    const created = await call('POST', '/user/wallets', alice.auth, {})
    assert.equal(created.statusCode, 201, created.body)
    const walletId = created.json().id as number
    assert.equal((await call('PUT', '/user/session/wallet', alice.auth, { wallet_id: walletId })).statusCode, 200)
    await setLimit(walletId, 10)
    assert.equal((await send(alice, bob, 7)).statusCode, 201)
    expectCode(await call('DELETE', '/wallet', alice.auth), 409, 'C001')
    const address = created.json().address as string
    assert.equal(
      (await call('POST', '/wallet/transactions', bob.auth, { recipient: address, type: 1, assets: { gold: 7 } })).statusCode,
      201,
    )
    assert.equal((await call('DELETE', '/wallet', alice.auth)).statusCode, 204)
  })

  it('is what coffer verify checks each transaction against: the limit in force when it committed', async () => {
    const alice = await createUser(t.app)
    const bob = await createUser(t.app)
    await setLimit(alice.walletId, 25)
    assert.equal((await send(alice, bob, 25)).statusCode, 201)
    assert.equal((await verifyLedger(t.database.db)).ok, true)
    // Rewrite history: the limit as if it had been 5 all along.
    const { db } = t.database
    const rows = await db.selectFrom('credit_limits').select(['id', 'credit_limit']).where('wallet_id', '=', alice.walletId).execute()
    await db.updateTable('credit_limits').set({ credit_limit: 5 }).where('id', '=', rows[0].id).execute()
    const report = await verifyLedger(db)
    assert.equal(report.ok, false)
    assert.ok(
      report.problems.some((problem) => problem.includes(`wallet ${alice.walletId}'s holding`) && problem.includes('credit limit of 5')),
      report.problems.join('\n'),
    )
    await db.updateTable('credit_limits').set({ credit_limit: 25 }).where('id', '=', rows[0].id).execute()
    assert.equal((await verifyLedger(db)).ok, true)
  })

  it('holds under concurrent transfers, on one instance and several: no holding ever below its limit', async () => {
    const payers = [await createUser(t.app), await createUser(t.app), await createUser(t.app)]
    const bob = await createUser(t.app)
    for (const payer of payers) await setLimit(payer.walletId, 60)
    const peers = STORAGE === 'postgres' ? [await buildPeerApp(t)] : []
    try {
      const apps = [t.app, ...peers.map((peer) => peer.app)]
      const requests = Array.from({ length: 60 }, (_, index) => ({ payer: payers[index % 3], quantity: 1 + (index % 7) }))
      const responses = await Promise.all(
        requests.map(({ payer, quantity }, index) =>
          apps[index % apps.length].inject({
            method: 'POST',
            url: index % 4 === 0 ? '/wallet/holds' : '/wallet/transactions',
            headers: payer.auth,
            payload: { recipient: bob.username, assets: { gold: quantity } },
          }),
        ),
      )
      for (const [index, response] of responses.entries()) {
        if (response.statusCode !== 201) assert.equal(response.json().code, 'I002', response.body)
        else assert.ok(requests[index].quantity > 0)
      }
      for (const payer of payers) {
        const holding = await goldOf(payer)
        assert.ok(holding !== undefined && holding.quantity - holding.held >= -60, JSON.stringify(holding))
        // What was refused did not fit what was left.
        const left = (holding?.quantity ?? 0) - (holding?.held ?? 0) + 60
        responses.forEach((response, index) => {
          if (response.statusCode !== 201 && requests[index].payer === payer) assert.ok(requests[index].quantity > left)
        })
      }
      const report = await verifyLedger(t.database.db)
      assert.deepEqual(report.problems, [])
    } finally {
      for (const peer of peers) await peer.close()
    }
  })
})
