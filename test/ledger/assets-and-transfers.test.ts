import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import type { Trx } from '../../src/db/database.ts'
import * as assets from '../../src/ledger/assets.repository.ts'
import { createOutbox } from '../../src/events/outbox.ts'
import { moveAssets } from '../../src/ledger/moves.ts'
import { verifyLedger } from '../../src/ledger/verify.ts'
import type { Asset, Transaction } from '../../src/ledger/ledger.types.ts'
import { buildTestApp, expectError, journalSettled, whileOpen, type TestApp } from '../helpers/app.ts'
import {
  assertSameTransaction,
  assertSameTransactions,
  createAsset,
  createUser,
  issue,
  sendTransaction,
  uniqueName,
  type TestUser,
} from '../helpers/factories.ts'

const outbox = createOutbox()

const MAX = Number.MAX_SAFE_INTEGER
const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/
const MINT_WALLET_ID = 1

let t: TestApp
before(async () => {
  t = await buildTestApp()
})
after(async () => {
  await t.close()
})

function issueRequest(walletId: number, assetId: number, quantity: unknown) {
  return t.app.inject({ method: 'POST', url: `/wallets/${walletId}/assets`, headers: t.admin, payload: { id: assetId, quantity } })
}

function burn(walletId: number, assetId: number, query = '') {
  return t.app.inject({ method: 'DELETE', url: `/wallets/${walletId}/assets/${assetId}${query}`, headers: t.admin })
}

function send(user: TestUser, payload: unknown, headers: Record<string, string> = {}) {
  return t.app.inject({ method: 'POST', url: '/wallet/transactions', headers: { ...user.auth, ...headers }, payload: payload as object })
}

async function holdingsOf(auth: Record<string, string>): Promise<{ asset: Asset; quantity: number }[]> {
  const response = await t.app.inject({ method: 'GET', url: '/wallet/assets', headers: auth })
  assert.equal(response.statusCode, 200, response.body)
  return response.json()
}

/** Quantity by asset name in the user's active wallet. */
async function balances(user: TestUser): Promise<Record<string, number>> {
  return Object.fromEntries((await holdingsOf(user.auth)).map((holding) => [holding.asset.name, holding.quantity]))
}

async function history(user: TestUser, query = ''): Promise<Transaction[]> {
  const response = await t.app.inject({ method: 'GET', url: `/wallet/transactions${query}`, headers: user.auth })
  assert.equal(response.statusCode, 200, response.body)
  return response.json()
}

describe('admin: assets', () => {
  let user: TestUser
  before(async () => {
    user = await createUser(t.app)
  })

  it('creates an asset with 201 and lists it to the admin and to users', async () => {
    const response = await t.app.inject({ method: 'POST', url: '/assets', headers: t.admin, payload: { name: 'Ruby', value: 12.5 } })
    assert.equal(response.statusCode, 201, response.body)
    const ruby = response.json()
    assert.deepEqual(Object.keys(ruby).sort(), ['id', 'name', 'value'])
    assert.equal(ruby.name, 'Ruby')
    assert.equal(ruby.value, 12.5)
    for (const headers of [t.admin, user.auth]) {
      const listed = await t.app.inject({ method: 'GET', url: '/assets', headers })
      assert.equal(listed.statusCode, 200, listed.body)
      assert.ok((listed.json() as Asset[]).some((asset) => asset.id === ruby.id && asset.name === 'Ruby' && asset.value === 12.5))
    }
  })

  it('answers GET /assets without credentials with 401 A000, and the admin key sent bare with 401 A001', async () => {
    expectError(
      await t.app.inject({ method: 'GET', url: '/assets', headers: { authorization: t.admin.authorization.slice('Bearer '.length) } }),
      401,
      'A001',
    )
    expectError(await t.app.inject({ method: 'GET', url: '/assets' }), 401, 'A000')
  })

  it('refuses a name that exists in any case with 409 I004', async () => {
    const name = uniqueName('Topaz')
    await createAsset(t, { name })
    expectError(
      await t.app.inject({ method: 'POST', url: '/assets', headers: t.admin, payload: { name: name.toUpperCase(), value: 1 } }),
      409,
      'I004',
    )
    const listed = (await t.app.inject({ method: 'GET', url: '/assets', headers: t.admin })).json() as Asset[]
    assert.equal(listed.filter((asset) => asset.name.toLowerCase() === name.toLowerCase()).length, 1)
  })

  it('refuses bad names and values with 400 G000', async () => {
    const bad = [
      { name: 'has space', value: 1 },
      { name: '', value: 1 },
      { name: 'x'.repeat(33), value: 1 },
      { name: 'ünïcode', value: 1 },
      { name: 'dot.ted', value: 1 },
      { name: 'fine', value: -1 },
      { name: 'fine', value: '1' },
      { name: 'fine' },
      { value: 1 },
    ]
    for (const payload of bad) {
      expectError(await t.app.inject({ method: 'POST', url: '/assets', headers: t.admin, payload }), 400, 'G000')
    }
  })

  it('accepts names of 1 and 32 letters, digits, "_" and "-", and a value of 0', async () => {
    for (const name of ['q', 'A-b_9'.padEnd(32, 'z')]) {
      const response = await t.app.inject({ method: 'POST', url: '/assets', headers: t.admin, payload: { name, value: 0 } })
      assert.equal(response.statusCode, 201, response.body)
      assert.equal(response.json().value, 0)
    }
  })

  it('refuses every admin route to anyone without the admin key with 403 A003', async () => {
    const asset = await createAsset(t)
    const routes: [string, string, object?][] = [
      ['POST', '/assets', { name: uniqueName('asset'), value: 1 }],
      ['PUT', `/assets/${asset.id}/value`, { value: 2 }],
      ['PUT', `/assets/${asset.id}/name`, { name: uniqueName('asset') }],
      ['DELETE', `/assets/${asset.id}`],
      ['POST', `/wallets/${user.walletId}/assets`, { id: asset.id, quantity: 5 }],
      ['DELETE', `/wallets/${user.walletId}/assets/${asset.id}`],
    ]
    const adminKey = t.admin.authorization.slice('Bearer '.length)
    // The admin key counts only as `Authorization: Bearer <key>` (docs/decisions.md): bare or as a cookie, it is A003.
    const strangers: Record<string, string>[] = [
      {},
      user.auth,
      { authorization: 'Bearer cfa_not_the_admin_key_at_all_really' },
      { cookie: `${t.config.sessionCookieName}=${adminKey}` },
      { authorization: adminKey },
    ]
    for (const [method, url, payload] of routes) {
      for (const headers of strangers) {
        expectError(await t.app.inject({ method: method as 'GET', url, payload, headers }), 403, 'A003')
      }
    }
    const listed = (await t.app.inject({ method: 'GET', url: '/assets', headers: t.admin })).json() as Asset[]
    assert.deepEqual(
      listed.find((entry) => entry.id === asset.id),
      asset,
      'nothing changed',
    )
    assert.deepEqual(await balances(user), {})
  })

  it('renames an asset, and holders and history see the new name', async () => {
    const asset = await createAsset(t)
    await issue(t, user.walletId, asset.id, 3)
    const renamed = uniqueName('Renamed')
    const response = await t.app.inject({ method: 'PUT', url: `/assets/${asset.id}/name`, headers: t.admin, payload: { name: renamed } })
    assert.equal(response.statusCode, 200, response.body)
    assert.deepEqual(response.json(), { id: asset.id, name: renamed, value: asset.value })
    assert.equal((await balances(user))[renamed], 3)
    const [latest] = await history(user, '?limit=1')
    assert.equal(latest.assets[0].asset.name, renamed)
  })

  it('refuses renaming to a name another asset has with 409 I004, and lets an asset change its own case', async () => {
    const first = await createAsset(t)
    const second = await createAsset(t)
    expectError(
      await t.app.inject({
        method: 'PUT',
        url: `/assets/${second.id}/name`,
        headers: t.admin,
        payload: { name: first.name.toUpperCase() },
      }),
      409,
      'I004',
    )
    const own = await t.app.inject({
      method: 'PUT',
      url: `/assets/${first.id}/name`,
      headers: t.admin,
      payload: { name: first.name.toUpperCase() },
    })
    assert.equal(own.statusCode, 200, own.body)
  })

  it('revalues an asset, and holders see the new value', async () => {
    const asset = await createAsset(t)
    await issue(t, user.walletId, asset.id, 1)
    const response = await t.app.inject({ method: 'PUT', url: `/assets/${asset.id}/value`, headers: t.admin, payload: { value: 99.25 } })
    assert.equal(response.statusCode, 200, response.body)
    assert.deepEqual(response.json(), { ...asset, value: 99.25 })
    const holding = (await holdingsOf(user.auth)).find((entry) => entry.asset.id === asset.id)
    assert.equal(holding?.asset.value, 99.25)
    expectError(
      await t.app.inject({ method: 'PUT', url: `/assets/${asset.id}/value`, headers: t.admin, payload: { value: -0.5 } }),
      400,
      'G000',
    )
  })

  it('answers unknown asset ids with 404 I000 and malformed ones with 400 G001', async () => {
    expectError(await t.app.inject({ method: 'PUT', url: '/assets/987654/value', headers: t.admin, payload: { value: 1 } }), 404, 'I000')
    expectError(
      await t.app.inject({ method: 'PUT', url: '/assets/987654/name', headers: t.admin, payload: { name: uniqueName('asset') } }),
      404,
      'I000',
    )
    expectError(await t.app.inject({ method: 'DELETE', url: '/assets/987654', headers: t.admin }), 404, 'I000')
    expectError(await t.app.inject({ method: 'PUT', url: '/assets/abc/value', headers: t.admin, payload: { value: 1 } }), 400, 'G001')
    expectError(await t.app.inject({ method: 'DELETE', url: '/assets/0', headers: t.admin }), 400, 'G001')
  })

  it('refuses to delete a held asset with 409 I005, deletes it once burned, and frees the name', async () => {
    const name = uniqueName('Doomed')
    const asset = await createAsset(t, { name })
    await issue(t, user.walletId, asset.id, 4)
    expectError(await t.app.inject({ method: 'DELETE', url: `/assets/${asset.id}`, headers: t.admin }), 409, 'I005')
    assert.equal((await balances(user))[name], 4)
    assert.equal((await burn(user.walletId, asset.id)).statusCode, 204)
    const deleted = await t.app.inject({ method: 'DELETE', url: `/assets/${asset.id}`, headers: t.admin })
    assert.equal(deleted.statusCode, 204)
    assert.equal(deleted.body, '')
    const listed = (await t.app.inject({ method: 'GET', url: '/assets', headers: t.admin })).json() as Asset[]
    assert.ok(!listed.some((entry) => entry.id === asset.id), 'a deleted asset is not listed')
    expectError(await t.app.inject({ method: 'DELETE', url: `/assets/${asset.id}`, headers: t.admin }), 404, 'I000')
    expectError(
      await t.app.inject({ method: 'PUT', url: `/assets/${asset.id}/value`, headers: t.admin, payload: { value: 3 } }),
      404,
      'I000',
    )
    // History still names it, and the name can be used again by a new asset.
    const past = await history(user, `?limit=100`)
    assert.ok(past.some((transaction) => transaction.assets.some((line) => line.asset.id === asset.id && line.asset.name === name)))
    const again = await createAsset(t, { name })
    assert.notEqual(again.id, asset.id)
  })

  it("refuses an issuance that races the asset's deletion: a deleted asset is never held", async () => {
    const asset = await createAsset(t)
    // What DELETE /assets/{id} changes, not yet committed while the issuance arrives.
    const deletion = async (trx: Trx) => {
      assert.ok(await assets.lockAsset(trx, asset.id))
      assert.equal(await assets.isAssetHeld(trx, asset.id), false)
      await assets.markAssetDeleted(trx, asset.id)
    }
    expectError(await whileOpen(t.database.db, deletion, () => issueRequest(user.walletId, asset.id, 5)), 404, 'W002')
    assert.equal(await assets.isAssetHeld(t.database.db, asset.id), false)
    assert.equal((await verifyLedger(t.database.db)).ok, true)
  })

  it('deletes an asset that was never issued', async () => {
    const asset = await createAsset(t)
    assert.equal((await t.app.inject({ method: 'DELETE', url: `/assets/${asset.id}`, headers: t.admin })).statusCode, 204)
  })
})

describe('admin: issuance and burning', () => {
  let holder: TestUser
  let gem: Asset
  before(async () => {
    holder = await createUser(t.app)
    gem = await createAsset(t, { name: uniqueName('gem'), value: 5 })
  })

  it('issues units from mint as a recorded Transaction with 201', async () => {
    const transaction = await issue(t, holder.walletId, gem.id, 40)
    assert.equal(transaction.sending_wallet_id, MINT_WALLET_ID)
    assert.equal(transaction.sending_wallet_address, 'mint')
    assert.equal(transaction.sending_username, undefined)
    assert.equal(transaction.receiving_wallet_id, holder.walletId)
    assert.equal(transaction.receiving_wallet_address, holder.address)
    assert.equal(transaction.receiving_username, holder.username)
    assert.deepEqual(transaction.assets, [{ quantity: 40, asset: gem }])
    assert.match(transaction.created_at, ISO_MS)
    assert.equal((await balances(holder))[gem.name], 40)
    const [latest] = await history(holder, '?limit=1')
    assertSameTransaction(latest, transaction)
  })

  it('answers an unknown wallet, the mint wallet and an unknown asset with 404 W002', async () => {
    expectError(await issueRequest(987654, gem.id, 1), 404, 'W002')
    expectError(await issueRequest(MINT_WALLET_ID, gem.id, 1), 404, 'W002')
    expectError(await issueRequest(holder.walletId, 987654, 1), 404, 'W002')
    expectError(await burn(987654, gem.id), 404, 'W002')
    expectError(await burn(MINT_WALLET_ID, gem.id), 404, 'W002')
    expectError(await burn(holder.walletId, 987654), 404, 'W002')
  })

  it('answers issuing a deleted asset with 404 W002', async () => {
    const gone = await createAsset(t)
    assert.equal((await t.app.inject({ method: 'DELETE', url: `/assets/${gone.id}`, headers: t.admin })).statusCode, 204)
    expectError(await issueRequest(holder.walletId, gone.id, 1), 404, 'W002')
  })

  it('refuses zero, negative, fractional, string and unsafe quantities with 400 G000', async () => {
    const before = await balances(holder)
    for (const quantity of [0, -1, 2.5, '5', MAX + 1, 1e300, null]) {
      expectError(await issueRequest(holder.walletId, gem.id, quantity), 400, 'G000')
    }
    assert.deepEqual(await balances(holder), before)
  })

  it('refuses an issuance that would pass 2^53-1 with 400 I003 and changes nothing', async () => {
    const huge = await createAsset(t, { name: uniqueName('huge') })
    const whale = await createUser(t.app)
    await issue(t, whale.walletId, huge.id, MAX)
    assert.equal((await balances(whale))[huge.name], MAX)
    expectError(await issueRequest(whale.walletId, huge.id, 1), 400, 'I003')
    expectError(await issueRequest(holder.walletId, huge.id, 1), 400, 'I003')
    assert.equal((await balances(whale))[huge.name], MAX)
    assert.equal((await balances(holder))[huge.name], undefined)
    // Burning it all makes room again.
    assert.equal((await burn(whale.walletId, huge.id)).statusCode, 204)
    await issue(t, holder.walletId, huge.id, 1)
  })

  it('burns a given quantity, then the rest, each as a Transaction to mint', async () => {
    const coal = await createAsset(t, { name: uniqueName('coal') })
    await issue(t, holder.walletId, coal.id, 10)
    const partial = await burn(holder.walletId, coal.id, '?quantity=3')
    assert.equal(partial.statusCode, 204, partial.body)
    assert.equal(partial.body, '')
    assert.equal((await balances(holder))[coal.name], 7)
    const [burned] = await history(holder, '?limit=1')
    assert.equal(burned.sending_wallet_id, holder.walletId)
    assert.equal(burned.receiving_wallet_address, 'mint')
    assert.deepEqual(burned.assets, [{ quantity: 3, asset: coal }])
    assert.equal((await burn(holder.walletId, coal.id)).statusCode, 204)
    assert.equal((await balances(holder))[coal.name], undefined, 'a burned-out holding is no longer listed')
    const [rest] = await history(holder, '?limit=1')
    assert.deepEqual(rest.assets, [{ quantity: 7, asset: coal }])
  })

  it('refuses to burn more than is held with 400 I002 and burns nothing', async () => {
    const tin = await createAsset(t, { name: uniqueName('tin') })
    await issue(t, holder.walletId, tin.id, 2)
    expectError(await burn(holder.walletId, tin.id, '?quantity=3'), 400, 'I002')
    assert.equal((await balances(holder))[tin.name], 2)
  })

  it('answers a bad burn quantity with 400 G002', async () => {
    for (const query of ['?quantity=0', '?quantity=-1', '?quantity=abc', '?quantity=1.5', '?quantity=99999999999999999']) {
      expectError(await burn(holder.walletId, gem.id, query), 400, 'G002')
    }
  })

  it('burns nothing, records nothing, when nothing is held', async () => {
    const unused = await createAsset(t)
    // Compared once the journal has positioned what came before: positions are not what this changes.
    await journalSettled(t.database.db)
    const before = await history(holder, '?limit=100')
    assert.equal((await burn(holder.walletId, unused.id)).statusCode, 204)
    assert.deepEqual(await history(holder, '?limit=100'), before)
  })
})

describe('POST /wallet/transactions', () => {
  let alice: TestUser
  let bob: TestUser
  let gold: Asset
  let silver: Asset
  before(async () => {
    alice = await createUser(t.app)
    bob = await createUser(t.app)
    gold = await createAsset(t, { name: uniqueName('gold'), value: 60 })
    silver = await createAsset(t, { name: uniqueName('silver'), value: 0.75 })
    await issue(t, alice.walletId, gold.id, 1000)
    await issue(t, alice.walletId, silver.id, 1000)
  })

  it('sends to a username by default and answers 201 with the Transaction', async () => {
    const before = await balances(bob)
    const response = await send(alice, { recipient: bob.username, memo: 'rent', assets: { [gold.name]: 5, [silver.name]: 2 } })
    assert.equal(response.statusCode, 201, response.body)
    const transaction: Transaction = response.json()
    assert.ok(Number.isSafeInteger(transaction.id) && transaction.id > 0)
    assert.equal(transaction.sending_wallet_id, alice.walletId)
    assert.equal(transaction.receiving_wallet_id, bob.walletId)
    assert.equal(transaction.sending_wallet_address, alice.address)
    assert.equal(transaction.receiving_wallet_address, bob.address)
    assert.equal(transaction.sending_username, alice.username)
    assert.equal(transaction.receiving_username, bob.username)
    assert.equal(transaction.memo, 'rent')
    assert.match(transaction.created_at, ISO_MS)
    assert.deepEqual(
      [...transaction.assets].sort((a, b) => a.asset.id - b.asset.id),
      [
        { quantity: 5, asset: gold },
        { quantity: 2, asset: silver },
      ],
    )
    const after = await balances(bob)
    assert.equal(after[gold.name], (before[gold.name] ?? 0) + 5)
    assert.equal(after[silver.name], (before[silver.name] ?? 0) + 2)
    // Both sides see the same record.
    assertSameTransaction((await history(bob, '?limit=1'))[0], transaction)
    assertSameTransaction((await history(alice, '?limit=1'))[0], transaction)
  })

  it('finds the username whatever its case, with type 0 explicit', async () => {
    const transaction = await sendTransaction(t, alice, { recipient: bob.username.toUpperCase(), type: 0, assets: { [gold.name]: 1 } })
    assert.equal(transaction.receiving_wallet_id, bob.walletId)
  })

  it('records an empty memo when none is given', async () => {
    assert.equal((await sendTransaction(t, alice, { recipient: bob.username, assets: { [gold.name]: 1 } })).memo, '')
  })

  it('sends to a wallet address with type 1', async () => {
    const transaction = await sendTransaction(t, alice, { recipient: bob.address, type: 1, assets: { [gold.name]: 1 } })
    assert.equal(transaction.receiving_wallet_id, bob.walletId)
  })

  it('sends to a wallet id given as a string or an integer with type 2', async () => {
    assert.equal(
      (await sendTransaction(t, alice, { recipient: String(bob.walletId), type: 2, assets: { [gold.name]: 1 } })).receiving_wallet_id,
      bob.walletId,
    )
    assert.equal(
      (await sendTransaction(t, alice, { recipient: bob.walletId, type: 2, assets: { [gold.name]: 1 } })).receiving_wallet_id,
      bob.walletId,
    )
  })

  it('sends to a wallet that is not primary, without a receiving username', async () => {
    const created = await t.app.inject({ method: 'POST', url: '/user/wallets', headers: bob.auth, payload: {} })
    const savings = created.json()
    const transaction = await sendTransaction(t, alice, { recipient: savings.address, type: 1, assets: { [gold.name]: 2 } })
    assert.equal(transaction.receiving_wallet_id, savings.id)
    assert.equal(transaction.receiving_username, undefined)
    assert.equal(transaction.sending_username, alice.username)
  })

  it('sends from the active wallet of the session', async () => {
    const carol = await createUser(t.app)
    const side = (await t.app.inject({ method: 'POST', url: '/user/wallets', headers: carol.auth, payload: {} })).json()
    await issue(t, side.id, gold.id, 10)
    const switched = await t.app.inject({
      method: 'PUT',
      url: '/user/session/wallet',
      headers: carol.auth,
      payload: { wallet_id: side.id },
    })
    assert.equal(switched.statusCode, 200)
    const transaction = await sendTransaction(t, carol, { recipient: carol.address, type: 1, assets: { [gold.name]: 4 } })
    assert.equal(transaction.sending_wallet_id, side.id)
    assert.equal(transaction.sending_username, undefined)
    assert.equal(transaction.receiving_username, carol.username)
    assert.equal((await balances(carol))[gold.name], 6)
  })

  it('accepts a memo of 64 characters and refuses 65 with 400 G000', async () => {
    assert.equal(
      (await sendTransaction(t, alice, { recipient: bob.username, memo: 'm'.repeat(64), assets: { [gold.name]: 1 } })).memo,
      'm'.repeat(64),
    )
    const before = await balances(alice)
    expectError(await send(alice, { recipient: bob.username, memo: 'm'.repeat(65), assets: { [gold.name]: 1 } }), 400, 'G000')
    assert.deepEqual(await balances(alice), before)
  })

  it('moves 64 assets in one Transaction and refuses a map of 65 with 400 G000', async () => {
    const rich = await createUser(t.app)
    const many: Asset[] = []
    for (let i = 0; i < 65; i++) many.push(await createAsset(t, { name: uniqueName('bulk') }))
    for (const asset of many) await issue(t, rich.walletId, asset.id, 2)
    const sixtyFive = Object.fromEntries(many.map((asset) => [asset.name, 1]))
    expectError(await send(rich, { recipient: bob.username, assets: sixtyFive }), 400, 'G000')
    const sixtyFour = Object.fromEntries(many.slice(0, 64).map((asset) => [asset.name, 1]))
    const transaction = await sendTransaction(t, rich, { recipient: bob.username, assets: sixtyFour })
    assert.equal(transaction.assets.length, 64)
    const left = await balances(rich)
    assert.equal(
      Object.values(left).reduce((sum, quantity) => sum + quantity, 0),
      64 * 1 + 2,
    )
  })

  it('refuses an empty asset map with 400 G000', async () => {
    expectError(await send(alice, { recipient: bob.username, assets: {} }), 400, 'G000')
  })

  const badQuantities: [string, unknown][] = [
    ['zero', 0],
    ['negative', -5],
    ['fractional', 1.5],
    ['string', '5'],
    ['unsafe', MAX + 1],
    ['huge', 1e300],
    ['null', null],
    ['object', { amount: 1 }],
  ]
  for (const [why, quantity] of badQuantities) {
    it(`refuses a ${why} quantity with 400 G000 and moves nothing`, async () => {
      const before = await balances(alice)
      expectError(await send(alice, { recipient: bob.username, assets: { [gold.name]: 1, [silver.name]: quantity } }), 400, 'G000')
      assert.deepEqual(await balances(alice), before)
    })
  }

  it('refuses malformed bodies with 400 G000', async () => {
    const bodies = [
      { assets: { [gold.name]: 1 } },
      { recipient: bob.username },
      { recipient: '', assets: { [gold.name]: 1 } },
      { recipient: bob.username, type: 3, assets: { [gold.name]: 1 } },
      { recipient: bob.username, type: '1', assets: { [gold.name]: 1 } },
      { recipient: bob.username, memo: 5, assets: { [gold.name]: 1 } },
      { recipient: bob.username, assets: [1, 2] },
      { recipient: [bob.username], assets: { [gold.name]: 1 } },
      { recipient: 'x'.repeat(65), assets: { [gold.name]: 1 } },
      // A quantity of the wrong type is G000 under any key, not only under a well-formed asset name.
      { recipient: bob.username, assets: { '': '1' } },
      { recipient: bob.username, assets: { 'not an asset!': {} } },
      { recipient: 1, assets: { [gold.name]: 1, 'x y': 1.5 } },
    ]
    for (const body of bodies) expectError(await send(alice, body), 400, 'G000')
    expectError(await send(alice, { recipient: 'notanid', type: 2, assets: { [gold.name]: 1 } }), 400, 'G000')
  })

  it("numbers a wallet's transactions in commit order: a transfer waits for a move of its wallet that drew a lower id", async () => {
    const issued: { id?: number } = {}
    // An issuance to bob in progress: its id drawn, not committed for 300 ms.
    const issuance = async (trx: Trx) => {
      issued.id = (
        await moveAssets(
          trx,
          { from: MINT_WALLET_ID, to: bob.walletId, lines: [{ asset: silver, quantity: 1 }], memo: 'issue', kind: 'issuance' },
          outbox,
        )
      ).id
    }
    const { response, lowerCommitted } = await whileOpen(t.database.db, issuance, async () => {
      const answer = await send(alice, { recipient: bob.username, assets: { [gold.name]: 1 } })
      // Once answered, every lower id of bob's must be committed: a client reading bob's history
      // `after` this transfer would otherwise never see the issuance.
      const row = await t.database.db
        .selectFrom('transactions')
        .select('id')
        .where('id', '=', issued.id ?? 0)
        .executeTakeFirst()
      return { response: answer, lowerCommitted: row !== undefined }
    })
    assert.equal(response.statusCode, 201, response.body)
    assert.ok(response.json().id > (issued.id ?? Infinity))
    assert.ok(lowerCommitted, 'the transfer was answered before the issuance with a lower id committed')
  })

  it('refuses a number as a username or an address with 400 G000: only a wallet id may be one', async () => {
    for (const type of [0, 1]) expectError(await send(alice, { recipient: bob.walletId, type, assets: { [gold.name]: 1 } }), 400, 'G000')
  })

  it('refuses a map with an invalid asset name alongside a valid one and moves nothing', async () => {
    const before = await balances(alice)
    const response = await send(alice, { recipient: bob.username, assets: { [gold.name]: 1, 'not an asset!': 1 } })
    assert.equal(response.statusCode, 400, response.body)
    assert.ok(['G000', 'I001'].includes(response.json().code), response.body)
    assert.deepEqual(await balances(alice), before)
  })

  it('refuses an unknown asset with 400 I001 and moves nothing', async () => {
    const before = await balances(alice)
    expectError(await send(alice, { recipient: bob.username, assets: { [gold.name]: 1, nosuchasset: 1 } }), 400, 'I001')
    assert.deepEqual(await balances(alice), before)
  })

  it('refuses an overdraft with 400 I002', async () => {
    const poor = await createUser(t.app)
    await issue(t, poor.walletId, gold.id, 3)
    const response = await send(poor, { recipient: bob.username, assets: { [gold.name]: 4 } })
    expectError(response, 400, 'I002')
    assert.match(response.json().detail, /3/)
    assert.deepEqual(await balances(poor), { [gold.name]: 3 })
  })

  it('refuses a transfer when one of several assets is short with 400 I002 and moves none of them', async () => {
    const sender = await createUser(t.app)
    const receiver = await createUser(t.app)
    await issue(t, sender.walletId, gold.id, 50)
    await issue(t, sender.walletId, silver.id, 1)
    // The short asset sorts after and before the sufficient one, so a partial move would show.
    expectError(await send(sender, { recipient: receiver.username, assets: { [gold.name]: 50, [silver.name]: 2 } }), 400, 'I002')
    expectError(await send(sender, { recipient: receiver.username, assets: { [silver.name]: 2, [gold.name]: 10 } }), 400, 'I002')
    assert.deepEqual(await balances(sender), { [gold.name]: 50, [silver.name]: 1 })
    assert.deepEqual(await balances(receiver), {})
    assert.deepEqual(await history(receiver), [])
    assert.equal((await history(sender)).length, 2, 'only the two issuances')
  })

  it('refuses a sum of quantities past 2^53-1 with 400 I003', async () => {
    const before = await balances(alice)
    expectError(await send(alice, { recipient: bob.username, assets: { [gold.name]: MAX, [gold.name.toUpperCase()]: 1 } }), 400, 'I003')
    assert.deepEqual(await balances(alice), before)
  })

  it('answers an unknown username with 404 U003', async () => {
    expectError(await send(alice, { recipient: 'nosuchuser', assets: { [gold.name]: 1 } }), 404, 'U003')
    expectError(await send(alice, { recipient: 'not a name', type: 0, assets: { [gold.name]: 1 } }), 404, 'U003')
  })

  it('answers an unknown address or wallet id, or the mint wallet, with 404 W000', async () => {
    const bodies = [
      { recipient: 'nosuchaddress', type: 1 },
      { recipient: 'mint', type: 1 },
      { recipient: 'BadAddress', type: 1 },
      { recipient: 987654, type: 2 },
      { recipient: '987654', type: 2 },
      { recipient: MINT_WALLET_ID, type: 2 },
    ]
    const before = await balances(alice)
    for (const body of bodies) expectError(await send(alice, { ...body, assets: { [gold.name]: 1 } }), 404, 'W000')
    assert.deepEqual(await balances(alice), before)
  })

  it('refuses sending to the same wallet with 400 W013, however it is named', async () => {
    const before = await balances(alice)
    for (const body of [{ recipient: alice.username }, { recipient: alice.address, type: 1 }, { recipient: alice.walletId, type: 2 }]) {
      expectError(await send(alice, { ...body, assets: { [gold.name]: 1 } }), 400, 'W013')
    }
    assert.deepEqual(await balances(alice), before)
  })

  it('answers a deleted wallet as recipient with 404 W000, and the admin cannot issue to it (W002)', async () => {
    const owner = await createUser(t.app)
    const spare = (await t.app.inject({ method: 'POST', url: '/user/wallets', headers: owner.auth, payload: {} })).json()
    await issue(t, spare.id, gold.id, 1)
    assert.equal(
      (await t.app.inject({ method: 'PUT', url: '/user/session/wallet', headers: owner.auth, payload: { wallet_id: spare.id } }))
        .statusCode,
      200,
    )
    const deleted = await t.app.inject({ method: 'DELETE', url: '/wallet', headers: owner.auth })
    assert.equal(deleted.statusCode, 204, deleted.body)
    const before = await balances(alice)
    expectError(await send(alice, { recipient: spare.address, type: 1, assets: { [gold.name]: 1 } }), 404, 'W000')
    expectError(await send(alice, { recipient: spare.id, type: 2, assets: { [gold.name]: 1 } }), 404, 'W000')
    assert.deepEqual(await balances(alice), before)
    expectError(await issueRequest(spare.id, gold.id, 1), 404, 'W002')
    expectError(await burn(spare.id, gold.id), 404, 'W002')
  })

  it('needs credentials: 401 A000 without, A001 with the admin key', async () => {
    const body = { recipient: bob.username, assets: { [gold.name]: 1 } }
    expectError(await t.app.inject({ method: 'POST', url: '/wallet/transactions', payload: body }), 401, 'A000')
    expectError(await t.app.inject({ method: 'POST', url: '/wallet/transactions', headers: t.admin, payload: body }), 401, 'A001')
  })
})

describe('wallet keys on the wallet routes', () => {
  let owner: TestUser
  let friend: TestUser
  let dust: Asset
  let side: { id: number; address: string }
  let key: Record<string, string>

  before(async () => {
    owner = await createUser(t.app)
    friend = await createUser(t.app)
    dust = await createAsset(t, { name: uniqueName('dust') })
    side = (await t.app.inject({ method: 'POST', url: '/user/wallets', headers: owner.auth, payload: {} })).json()
    await issue(t, side.id, dust.id, 50)
    await issue(t, owner.walletId, dust.id, 5)
    // The key is made while the side wallet is active, then the session goes back to the primary one.
    await t.app.inject({ method: 'PUT', url: '/user/session/wallet', headers: owner.auth, payload: { wallet_id: side.id } })
    const created = await t.app.inject({ method: 'POST', url: '/wallet/sessions', headers: owner.auth, payload: { name: 'shop' } })
    assert.equal(created.statusCode, 201, created.body)
    key = { authorization: `Bearer ${created.json().token}` }
    await t.app.inject({ method: 'PUT', url: '/user/session/wallet', headers: owner.auth, payload: { wallet_id: owner.walletId } })
  })

  it('reads and sends from the key’s own wallet, whatever the user’s active wallet', async () => {
    assert.deepEqual(await holdingsOf(key), [{ asset: dust, quantity: 50, held: 0, credit_limit: 0, expiring: [] }])
    const response = await t.app.inject({
      method: 'POST',
      url: '/wallet/transactions',
      headers: key,
      payload: { recipient: friend.username, assets: { [dust.name]: 8 } },
    })
    assert.equal(response.statusCode, 201, response.body)
    assert.equal(response.json().sending_wallet_id, side.id)
    assert.deepEqual(await holdingsOf(key), [{ asset: dust, quantity: 42, held: 0, credit_limit: 0, expiring: [] }])
    assert.deepEqual(await balances(owner), { [dust.name]: 5 }, 'the primary wallet is untouched')
    const listed = await t.app.inject({ method: 'GET', url: '/wallet/transactions?limit=1', headers: key })
    assert.equal(listed.json()[0].id, response.json().id)
  })

  it('lists the assets with a wallet key', async () => {
    const response = await t.app.inject({ method: 'GET', url: '/assets', headers: key })
    assert.equal(response.statusCode, 200)
    assert.ok((response.json() as Asset[]).some((asset) => asset.id === dust.id))
  })

  it('refuses a wallet key sent as the session cookie with 401 A001', async () => {
    const cookie = `${t.config.sessionCookieName}=${key.authorization.slice(7)}`
    expectError(await t.app.inject({ method: 'GET', url: '/wallet/assets', headers: { cookie } }), 401, 'A001')
  })

  it('refuses a wallet key on user routes and admin routes', async () => {
    const before = await holdingsOf(key)
    expectError(await t.app.inject({ method: 'GET', url: '/user/session', headers: key }), 401, 'A001')
    expectError(
      await t.app.inject({ method: 'POST', url: `/wallets/${side.id}/assets`, headers: key, payload: { id: dust.id, quantity: 1 } }),
      403,
      'A003',
    )
    assert.deepEqual(await holdingsOf(key), before)
  })
})

describe('Idempotency-Key', () => {
  let payer: TestUser
  let payee: TestUser
  let coin: Asset
  before(async () => {
    payer = await createUser(t.app)
    payee = await createUser(t.app)
    coin = await createAsset(t, { name: uniqueName('coin') })
    await issue(t, payer.walletId, coin.id, 100)
  })

  it('replays the first response with Idempotent-Replayed: true and moves nothing more', async () => {
    const body = { recipient: payee.username, memo: 'once', assets: { [coin.name]: 7 } }
    const first = await send(payer, body, { 'idempotency-key': 'order-1' })
    assert.equal(first.statusCode, 201, first.body)
    assert.equal(first.headers['idempotent-replayed'], undefined)
    const second = await send(payer, body, { 'idempotency-key': 'order-1' })
    assert.equal(second.statusCode, 201)
    assert.equal(second.headers['idempotent-replayed'], 'true')
    assert.equal(second.body, first.body)
    // The same request with its fields in another order is still the same request.
    const reordered = await send(
      payer,
      { assets: { [coin.name]: 7 }, memo: 'once', recipient: payee.username },
      { 'idempotency-key': 'order-1' },
    )
    assert.equal(reordered.headers['idempotent-replayed'], 'true')
    assert.deepEqual(reordered.json(), first.json())
    assert.equal((await balances(payer))[coin.name], 93)
    assert.equal((await balances(payee))[coin.name], 7)
    assert.equal((await history(payee)).length, 1)
  })

  it('replays concurrent retries without moving twice', async () => {
    const before = (await balances(payer))[coin.name]
    const body = { recipient: payee.username, assets: { [coin.name]: 1 } }
    const responses = await Promise.all(Array.from({ length: 5 }, () => send(payer, body, { 'idempotency-key': 'burst-1' })))
    const created = responses.filter((response) => response.statusCode === 201)
    assert.ok(created.length >= 1)
    for (const response of responses) assert.ok(response.statusCode === 201 || response.json().code === 'G004', response.body)
    for (const response of created) assert.equal(response.json().id, created[0].json().id)
    assert.equal((await balances(payer))[coin.name], before - 1)
  })

  it('answers the same key with a different request with 409 G003 and moves nothing', async () => {
    const first = await send(payer, { recipient: payee.username, assets: { [coin.name]: 2 } }, { 'idempotency-key': 'order-2' })
    assert.equal(first.statusCode, 201)
    const before = await balances(payer)
    expectError(await send(payer, { recipient: payee.username, assets: { [coin.name]: 3 } }, { 'idempotency-key': 'order-2' }), 409, 'G003')
    expectError(
      await send(payer, { recipient: payee.username, memo: 'changed', assets: { [coin.name]: 2 } }, { 'idempotency-key': 'order-2' }),
      409,
      'G003',
    )
    assert.deepEqual(await balances(payer), before)
  })

  it('replays a retry written differently that asks for the same transfer', async () => {
    const first = await send(payer, { recipient: payee.walletId, type: 2, assets: { [coin.name]: 2 } }, { 'idempotency-key': 'order-3' })
    assert.equal(first.statusCode, 201, first.body)
    const before = await balances(payer)
    const retries = [
      // Unknown fields are ignored (as everywhere), a missing memo is the empty one, a wallet id may
      // be a string, asset names are case-insensitive and one asset named twice adds up.
      { recipient: payee.walletId, type: 2, assets: { [coin.name]: 2 }, note: 'ignored' },
      { recipient: String(payee.walletId), type: 2, memo: '', assets: { [coin.name.toUpperCase()]: 2 } },
      { recipient: payee.walletId, type: 2, assets: { [coin.name]: 1, [coin.name.toUpperCase()]: 1 } },
    ]
    for (const retry of retries) {
      const response = await send(payer, retry, { 'idempotency-key': 'order-3' })
      assert.equal(response.headers['idempotent-replayed'], 'true', `${JSON.stringify(retry)}: ${response.body}`)
      assert.equal(response.body, first.body)
    }
    // The same wallet named another way is another request: the key is not stretched to it.
    expectError(await send(payer, { recipient: payee.username, assets: { [coin.name]: 2 } }, { 'idempotency-key': 'order-3' }), 409, 'G003')
    assert.deepEqual(await balances(payer), before)
  })

  it('scopes keys to the wallet: another wallet may use the same key', async () => {
    await issue(t, payee.walletId, coin.id, 5)
    const response = await send(payee, { recipient: payer.username, assets: { [coin.name]: 1 } }, { 'idempotency-key': 'order-1' })
    assert.equal(response.statusCode, 201, response.body)
    assert.equal(response.headers['idempotent-replayed'], undefined)
  })

  it('refuses a key that is empty, too long or not printable with 400 G000', async () => {
    const body = { recipient: payee.username, assets: { [coin.name]: 1 } }
    for (const key of ['k'.repeat(256), 'has\ttab', '']) {
      const response = await send(payer, body, { 'idempotency-key': key })
      expectError(response, 400, 'G000')
    }
    const ok = await send(payer, body, { 'idempotency-key': 'k'.repeat(255) })
    assert.equal(ok.statusCode, 201, ok.body)
  })
})

describe('GET /wallet/assets', () => {
  it('lists only non-zero holdings, ordered by asset name', async () => {
    const user = await createUser(t.app)
    const other = await createUser(t.app)
    const suffix = uniqueName('')
    const names = [`delta${suffix}`, `alpha${suffix}`, `charlie${suffix}`, `bravo${suffix}`]
    const created: Asset[] = []
    for (const name of names) created.push(await createAsset(t, { name, value: 2 }))
    for (const asset of created) await issue(t, user.walletId, asset.id, 3)
    await sendTransaction(t, user, { recipient: other.username, assets: { [`charlie${suffix}`]: 3 } })
    const holdings = await holdingsOf(user.auth)
    assert.deepEqual(
      holdings.map((holding) => holding.asset.name),
      [`alpha${suffix}`, `bravo${suffix}`, `delta${suffix}`],
    )
    for (const holding of holdings) {
      assert.equal(holding.quantity, 3)
      assert.deepEqual(Object.keys(holding.asset).sort(), ['id', 'name', 'value'])
    }
  })

  it('orders names case-insensitively, the same way on every storage', async () => {
    const user = await createUser(t.app)
    const names = ['beta', 'Alpha', 'Charlie', 'delta', 'a_b', 'a-b', 'ab'].map((name) => `${name}${uniqueName('')}`)
    for (const name of names) await issue(t, user.walletId, (await createAsset(t, { name })).id, 1)
    const listed = (await holdingsOf(user.auth)).map((holding) => holding.asset.name.replace(/\d+x\d+$/, ''))
    assert.deepEqual(listed, ['a-b', 'a_b', 'ab', 'Alpha', 'beta', 'Charlie', 'delta'])
  })

  it('lists the lines of a transaction in that same order, in the response and in the history', async () => {
    const user = await createUser(t.app)
    const other = await createUser(t.app)
    const names = ['Zinc', 'apple', 'Mango'].map((name) => `${name}${uniqueName('')}`)
    for (const name of names) await issue(t, user.walletId, (await createAsset(t, { name })).id, 1)
    const sent = await sendTransaction(t, user, { recipient: other.username, assets: Object.fromEntries(names.map((name) => [name, 1])) })
    assert.deepEqual(
      sent.assets.map((line) => line.asset.name.replace(/\d+x\d+$/, '')),
      ['apple', 'Mango', 'Zinc'],
    )
    assertSameTransaction((await history(other))[0], sent)
    assert.deepEqual(
      (await holdingsOf(other.auth)).map((holding) => holding.asset.name),
      sent.assets.map((line) => line.asset.name),
    )
  })

  it('lists nothing for a new wallet', async () => {
    const user = await createUser(t.app)
    assert.deepEqual(await holdingsOf(user.auth), [])
  })
})

describe('GET /wallet/transactions', () => {
  let me: TestUser
  let peer: TestUser
  let stone: Asset
  let pearl: Asset
  /** Every transaction of `me`, newest first, as the server reported them when they were made. */
  let all: Transaction[]

  before(async () => {
    me = await createUser(t.app)
    peer = await createUser(t.app)
    stone = await createAsset(t, { name: uniqueName('stone') })
    pearl = await createAsset(t, { name: uniqueName('pearl') })
    const made: Transaction[] = []
    made.push(await issue(t, me.walletId, stone.id, 1000))
    await issue(t, peer.walletId, stone.id, 1000)
    made.push(await issue(t, me.walletId, pearl.id, 100))
    // Traffic that does not involve `me` must never show up.
    const stranger = await createUser(t.app)
    await sendTransaction(t, peer, { recipient: stranger.username, assets: { [stone.name]: 1 } })
    for (let i = 1; i <= 22; i++) {
      if (i % 3 === 0) made.push(await sendTransaction(t, peer, { recipient: me.username, memo: `in ${i}`, assets: { [stone.name]: i } }))
      else if (i % 5 === 0)
        made.push(
          await sendTransaction(t, me, { recipient: peer.username, memo: `pearl ${i}`, assets: { [pearl.name]: 1, [stone.name]: 1 } }),
        )
      else made.push(await sendTransaction(t, me, { recipient: peer.username, memo: `out ${i}`, assets: { [stone.name]: 1 } }))
    }
    all = made.reverse()
  })

  const ids = (list: Transaction[]) => list.map((transaction) => transaction.id)

  it('lists the 10 newest by default, newest first, identical to what was returned when made', async () => {
    const page = await history(me)
    assert.equal(page.length, 10)
    assertSameTransactions(page, all.slice(0, 10))
  })

  it('points to the next page with a Link rel="next" header, and following it reaches every transaction once', async () => {
    let url: string | undefined = '/wallet/transactions?limit=7'
    const seen: Transaction[] = []
    let pages = 0
    while (url) {
      const response: Awaited<ReturnType<typeof t.app.inject>> = await t.app.inject({ method: 'GET', url, headers: me.auth })
      assert.equal(response.statusCode, 200, response.body)
      seen.push(...response.json())
      pages += 1
      const link = response.headers.link as string | undefined
      if (link) {
        const match = /^<([^>]+)>; rel="next"$/.exec(link)
        assert.ok(match, `Link header: ${link}`)
        assert.match(match[1], /before=\d+/)
        assert.match(match[1], /limit=7/)
        url = match[1]
      } else {
        url = undefined
      }
      assert.ok(pages < 20, 'paging ends')
    }
    assert.equal(pages, Math.ceil(all.length / 7))
    assert.deepEqual(ids(seen), ids(all))
  })

  it('sends no Link header on the last page', async () => {
    const response = await t.app.inject({ method: 'GET', url: `/wallet/transactions?limit=100`, headers: me.auth })
    assert.equal(response.json().length, all.length)
    assert.equal(response.headers.link, undefined)
    const exact = await t.app.inject({ method: 'GET', url: `/wallet/transactions?limit=5&offset=${all.length - 5}`, headers: me.auth })
    assert.equal(exact.json().length, 5)
    assert.equal(exact.headers.link, undefined)
  })

  it('pages with limit and offset', async () => {
    assert.deepEqual(ids(await history(me, '?limit=5&offset=5')), ids(all.slice(5, 10)))
    assert.deepEqual(ids(await history(me, '?limit=3&offset=0')), ids(all.slice(0, 3)))
    assert.deepEqual(await history(me, `?offset=${all.length}`), [])
  })

  it('pages with before and after cursors', async () => {
    const pivot = all[8].id
    assert.deepEqual(ids(await history(me, `?before=${pivot}&limit=100`)), ids(all.filter((transaction) => transaction.id < pivot)))
    assert.deepEqual(ids(await history(me, `?after=${pivot}&limit=100`)), ids(all.filter((transaction) => transaction.id > pivot)))
    const low = all[15].id
    assert.deepEqual(
      ids(await history(me, `?after=${low}&before=${pivot}&limit=100`)),
      ids(all.filter((transaction) => transaction.id > low && transaction.id < pivot)),
    )
    assert.deepEqual(
      ids(await history(me, `?before=${pivot}&limit=2`)),
      ids(all.filter((transaction) => transaction.id < pivot).slice(0, 2)),
    )
  })

  it('filters by asset name', async () => {
    const withPearl = await history(me, `?asset=${pearl.name}&limit=100`)
    assert.deepEqual(ids(withPearl), ids(all.filter((transaction) => transaction.assets.some((line) => line.asset.id === pearl.id))))
    assert.ok(withPearl.length >= 2)
    assert.deepEqual(await history(me, '?asset=nosuchasset'), [])
  })

  it('filters by direction', async () => {
    const sent = await history(me, '?direction=sent&limit=100')
    const received = await history(me, '?direction=received&limit=100')
    assert.deepEqual(ids(sent), ids(all.filter((transaction) => transaction.sending_wallet_id === me.walletId)))
    assert.deepEqual(ids(received), ids(all.filter((transaction) => transaction.receiving_wallet_id === me.walletId)))
    assert.equal(sent.length + received.length, all.length)
    assert.ok(sent.length > 0 && received.length > 0)
  })

  it('combines filters, and the Link header keeps them', async () => {
    const response = await t.app.inject({
      method: 'GET',
      url: `/wallet/transactions?direction=sent&asset=${stone.name}&limit=3`,
      headers: me.auth,
    })
    const expected = all.filter(
      (transaction) => transaction.sending_wallet_id === me.walletId && transaction.assets.some((line) => line.asset.id === stone.id),
    )
    assert.deepEqual(ids(response.json()), ids(expected.slice(0, 3)))
    const link = String(response.headers.link)
    assert.match(link, /direction=sent/)
    assert.match(link, new RegExp(`asset=${stone.name}`))
    // The cursor first, as the contract writes it; nothing that is not a filter is carried on.
    const withUnknown = await t.app.inject({ method: 'GET', url: `/wallet/transactions?limit=3&offset=1&colour=blue`, headers: me.auth })
    assert.equal(withUnknown.headers.link, `</wallet/transactions?before=${ids(withUnknown.json())[2]}&limit=3>; rel="next"`)
    const next = await t.app.inject({ method: 'GET', url: /^<([^>]+)>/.exec(link)![1], headers: me.auth })
    assert.deepEqual(ids(next.json()), ids(expected.slice(3, 6)))
  })

  it('filters by since and until timestamps', async () => {
    const middle = all[10].created_at
    const since = await history(me, `?since=${encodeURIComponent(middle)}&limit=100`)
    assert.deepEqual(ids(since), ids(all.filter((transaction) => transaction.created_at >= middle)))
    const until = await history(me, `?until=${encodeURIComponent(middle)}&limit=100`)
    assert.deepEqual(ids(until), ids(all.filter((transaction) => transaction.created_at <= middle)))
    assert.deepEqual(await history(me, `?since=${encodeURIComponent('2100-01-01T00:00:00.000Z')}`), [])
    assert.equal((await history(me, `?until=${encodeURIComponent('2000-01-01T00:00:00Z')}`)).length, 0)
    // A timestamp with an offset means the same instant.
    const shifted = new Date(Date.parse(middle)).toISOString().replace('Z', '+00:00')
    assert.deepEqual(ids(await history(me, `?since=${encodeURIComponent(shifted)}&limit=100`)), ids(since))
    // One whose instant falls after year 9999 is still later than everything, not before it.
    const last = encodeURIComponent('9999-12-31T23:59:59-01:00')
    assert.deepEqual(ids(await history(me, `?until=${last}&limit=100`)), ids(all))
    assert.deepEqual(await history(me, `?since=${last}`), [])
  })

  it('answers a leap second, which no stored time can be, with 400 G002', async () => {
    for (const bound of ['since', 'until']) {
      expectError(
        await t.app.inject({ method: 'GET', url: `/wallet/transactions?${bound}=2026-06-30T23:59:60Z`, headers: me.auth }),
        400,
        'G002',
      )
    }
  })

  it('lists only the wallet’s own transactions', async () => {
    const lonely = await createUser(t.app)
    assert.deepEqual(await history(lonely), [])
  })

  const badQueries = [
    'limit=1000',
    'limit=101',
    'limit=0',
    'limit=abc',
    'limit=2.5',
    'limit=2.0',
    'limit=0x2',
    'limit=1e1',
    'limit=%202',
    'before=0x10',
    'offset=+1',
    'offset=-1',
    'offset=10001',
    'offset=x',
    'before=0',
    'before=abc',
    'after=-3',
    'direction=sideways',
    'since=yesterday',
    'until=2026-13-45',
  ]
  for (const query of badQueries) {
    it(`answers ?${query} with 400 G002`, async () => {
      expectError(await t.app.inject({ method: 'GET', url: `/wallet/transactions?${query}`, headers: me.auth }), 400, 'G002')
    })
  }
})
