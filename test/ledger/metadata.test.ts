import assert from 'node:assert/strict'
import { before, describe, it } from 'node:test'
import { readEventsAfter } from '../../src/events/events.repository.ts'
import type { Transaction } from '../../src/ledger/ledger.types.ts'
import { expectError, journalSettled } from '../helpers/app.ts'
import { assertSameTransaction, createUser, fundedUser, issue, sendTransaction, type TestUser } from '../helpers/factories.ts'
import { ledgerApp } from '../helpers/ledger-fixture.ts'

/** Transaction kinds and metadata: what every Transaction carries, what requests may set, and the filters of history. */

const { t, gold, silver } = await ledgerApp()

function send(user: TestUser, payload: unknown, headers: Record<string, string> = {}) {
  return t.app.inject({ method: 'POST', url: '/wallet/transactions', headers: { ...user.auth, ...headers }, payload: payload as object })
}

async function list(url: string, headers: Record<string, string>): Promise<{ transactions: Transaction[]; link: string | undefined }> {
  const response = await t.app.inject({ method: 'GET', url, headers })
  assert.equal(response.statusCode, 200, response.body)
  return { transactions: response.json(), link: response.headers.link as string | undefined }
}

const ids = (transactions: Transaction[]) => transactions.map((transaction) => transaction.id)

/** The page the `Link` header points to, as a URL relative to the service. */
function nextUrl(link: string | undefined): string {
  const match = /^<([^>]+)>; rel="next"$/.exec(link ?? '')
  assert.ok(match, `a next link, got ${link}`)
  return match[1]
}

describe('transaction kinds and metadata', () => {
  it('gives every Transaction its kind and metadata ({} when none), in answers, history, events and the journal', async () => {
    const [alice, bob] = [await createUser(t.app), await createUser(t.app)]
    const issuedResponse = await t.app.inject({
      method: 'POST',
      url: `/wallets/${alice.walletId}/assets`,
      headers: t.admin,
      payload: { id: gold.id, quantity: 10, metadata: { batch: 'q3' } },
    })
    assert.equal(issuedResponse.statusCode, 201, issuedResponse.body)
    const issued = issuedResponse.json() as Transaction
    assert.equal(issued.kind, 'issuance')
    assert.deepEqual(issued.metadata, { batch: 'q3' })
    const plain = await sendTransaction(t, alice, { recipient: bob.username, assets: { [gold.name]: 1 } })
    assert.equal(plain.kind, 'transfer')
    assert.deepEqual(plain.metadata, {})
    assert.ok(!('reverses' in plain) && !('hold_id' in plain))
    const tagged = await sendTransaction(t, alice, {
      recipient: bob.username,
      assets: { [gold.name]: 2 },
      metadata: { order: 'A-17', 'x.y_z-1': '' },
    })
    assert.deepEqual(tagged.metadata, { order: 'A-17', 'x.y_z-1': '' })
    assert.equal(
      (await t.app.inject({ method: 'DELETE', url: `/wallets/${alice.walletId}/assets/${gold.id}?quantity=1`, headers: t.admin }))
        .statusCode,
      204,
    )

    // Read once the journal has positioned them, so that both reads below see the same positions.
    await journalSettled(t.database.db)
    const history = (await list('/wallet/transactions', alice.auth)).transactions
    assert.deepEqual(
      history.map((transaction) => transaction.kind),
      ['burn', 'transfer', 'transfer', 'issuance'],
    )
    assertSameTransaction(history[1], tagged)
    assertSameTransaction(history[3], issued)
    const journal = (await list(`/admin/transactions?wallet=${alice.walletId}`, t.admin)).transactions
    assert.deepEqual(journal, history)
    const events = (await readEventsAfter(t.database.db, 0, 10_000)).rows.filter((event) => event.wallet_id === bob.walletId)
    assert.deepEqual(
      events.map((event) => JSON.parse(event.payload).data),
      [plain, tagged],
    )
  })

  it("records a deleted wallet's sweep as kind sweep", async () => {
    const owner = await createUser(t.app)
    const created = await t.app.inject({ method: 'POST', url: '/user/wallets', headers: owner.auth, payload: {} })
    const spare = created.json() as { id: number }
    await issue(t, spare.id, gold.id, 3)
    assert.equal(
      (await t.app.inject({ method: 'PUT', url: '/user/session/wallet', headers: owner.auth, payload: { wallet_id: spare.id } }))
        .statusCode,
      200,
    )
    assert.equal((await t.app.inject({ method: 'DELETE', url: '/wallet', headers: owner.auth })).statusCode, 204)
    const [sweep] = (await list('/wallet/transactions', owner.auth)).transactions
    assert.equal(sweep.kind, 'sweep')
    assert.equal(sweep.sending_wallet_id, spare.id)
  })

  it('refuses metadata over the limits or not strings with 400 G000, and moves nothing', async () => {
    const [alice, bob] = [await fundedUser(t, [[gold, 5]]), await createUser(t.app)]
    const tooMany = Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`k${i}`, 'v']))
    const bad: unknown[] = [
      tooMany,
      { ['k'.repeat(41)]: 'v' },
      { '': 'v' },
      { 'a/b': 'v' },
      { 'a b': 'v' },
      { key: 'v'.repeat(501) },
      { key: 5 },
      { key: null },
      { key: ['v'] },
      { key: { nested: 'v' } },
      'text',
      ['v'],
      null,
    ]
    for (const metadata of bad) {
      expectError(await send(alice, { recipient: bob.username, assets: { [gold.name]: 1 }, metadata }), 400, 'G000')
      expectError(
        await t.app.inject({
          method: 'POST',
          url: `/wallets/${alice.walletId}/assets`,
          headers: t.admin,
          payload: { id: gold.id, quantity: 1, metadata },
        }),
        400,
        'G000',
      )
    }
    // The limits themselves are accepted.
    const most = Object.fromEntries(
      Array.from({ length: 20 }, (_, i) => [`${'k'.repeat(38)}${String(i).padStart(2, '0')}`, 'é'.repeat(500)]),
    )
    const accepted = await sendTransaction(t, alice, { recipient: bob.username, assets: { [gold.name]: 1 }, metadata: most })
    assert.deepEqual(accepted.metadata, most)
    const holdings = (await t.app.inject({ method: 'GET', url: '/wallet/assets', headers: alice.auth })).json() as { quantity: number }[]
    assert.equal(holdings[0].quantity, 4)
    assert.equal((await list('/wallet/transactions', alice.auth)).transactions.length, 2)
  })

  it('counts metadata as part of the request an Idempotency-Key names', async () => {
    const [alice, bob] = [await fundedUser(t, [[gold, 5]]), await createUser(t.app)]
    const headers = { 'idempotency-key': 'meta-1' }
    const first = await send(alice, { recipient: bob.username, assets: { [gold.name]: 1 }, metadata: { a: '1', b: '2' } }, headers)
    assert.equal(first.statusCode, 201, first.body)
    // The same entries in another order are the same request.
    const again = await send(alice, { recipient: bob.username, assets: { [gold.name]: 1 }, metadata: { b: '2', a: '1' } }, headers)
    assert.equal(again.headers['idempotent-replayed'], 'true')
    assert.deepEqual(again.json(), first.json())
    expectError(
      await send(alice, { recipient: bob.username, assets: { [gold.name]: 1 }, metadata: { a: '1', b: '3' } }, headers),
      409,
      'G003',
    )
    expectError(await send(alice, { recipient: bob.username, assets: { [gold.name]: 1 } }, headers), 409, 'G003')
    // No metadata and {} alike.
    const bare = await send(alice, { recipient: bob.username, assets: { [gold.name]: 1 } }, { 'idempotency-key': 'meta-2' })
    assert.equal(bare.statusCode, 201)
    const empty = await send(alice, { recipient: bob.username, assets: { [gold.name]: 1 }, metadata: {} }, { 'idempotency-key': 'meta-2' })
    assert.equal(empty.headers['idempotent-replayed'], 'true')
  })
})

describe('GET /wallet/transactions and GET /admin/transactions: kind= and metadata[KEY]=VALUE', () => {
  let alice: TestUser
  let bob: TestUser
  let carol: TestUser
  const made: Record<string, Transaction> = {}

  before(async () => {
    ;[alice, bob, carol] = [
      await fundedUser(t, [
        [gold, 100],
        [silver, 100],
      ]),
      await createUser(t.app),
      await createUser(t.app),
    ]
    made.a1 = await sendTransaction(t, alice, {
      recipient: bob.username,
      assets: { [gold.name]: 1 },
      metadata: { order: 'A', channel: 'web' },
    })
    made.a2 = await sendTransaction(t, alice, {
      recipient: carol.username,
      assets: { [silver.name]: 1 },
      metadata: { order: 'A', channel: 'shop' },
    })
    made.b1 = await sendTransaction(t, alice, {
      recipient: bob.username,
      assets: { [gold.name]: 1 },
      metadata: { order: 'B', channel: 'web' },
    })
    made.back = await sendTransaction(t, bob, {
      recipient: alice.username,
      assets: { [gold.name]: 1 },
      metadata: { order: 'A', channel: 'web' },
    })
    made.plain = await sendTransaction(t, alice, { recipient: bob.username, assets: { [gold.name]: 1 } })
    made.issued = await issue(t, alice.walletId, gold.id, 5)
    made.a3 = await sendTransaction(t, alice, {
      recipient: bob.username,
      assets: { [gold.name]: 1, [silver.name]: 1 },
      metadata: { order: 'A', channel: 'web' },
    })
  })

  it('filters by kind', async () => {
    assert.deepEqual(ids((await list('/wallet/transactions?kind=issuance', alice.auth)).transactions).slice(0, 1), [made.issued.id])
    const transfers = (await list('/wallet/transactions?kind=transfer&limit=100', alice.auth)).transactions
    assert.ok(transfers.every((transaction) => transaction.kind === 'transfer'))
    assert.deepEqual(
      ids(transfers),
      [made.a3, made.plain, made.back, made.b1, made.a2, made.a1].map((x) => x.id),
    )
    assert.deepEqual((await list('/wallet/transactions?kind=reversal', alice.auth)).transactions, [])
    const journal = (await list('/admin/transactions?kind=issuance&limit=100', t.admin)).transactions
    assert.ok(journal.length >= 3 && journal.every((transaction) => transaction.kind === 'issuance'))
    assert.equal(journal[0].id, made.issued.id)
  })

  it('filters by metadata, every entry matching exactly, on either side of the wallet', async () => {
    const orderA = (await list('/wallet/transactions?metadata[order]=A', alice.auth)).transactions
    assert.deepEqual(
      ids(orderA),
      [made.a3, made.back, made.a2, made.a1].map((x) => x.id),
    )
    const both = (await list('/wallet/transactions?metadata[order]=A&metadata[channel]=web', alice.auth)).transactions
    assert.deepEqual(
      ids(both),
      [made.a3, made.back, made.a1].map((x) => x.id),
    )
    assert.deepEqual((await list('/wallet/transactions?metadata[order]=a', alice.auth)).transactions, [])
    assert.deepEqual((await list('/wallet/transactions?metadata[order]=A&metadata[channel]=none', alice.auth)).transactions, [])
    // Bob sees only his side of them; carol hers.
    assert.deepEqual(
      ids((await list('/wallet/transactions?metadata[order]=A', bob.auth)).transactions),
      [made.a3, made.back, made.a1].map((x) => x.id),
    )
    assert.deepEqual(ids((await list('/wallet/transactions?metadata[channel]=shop', carol.auth)).transactions), [made.a2.id])
    // The journal.
    assert.deepEqual(
      ids((await list('/admin/transactions?metadata[order]=A&metadata[channel]=web', t.admin)).transactions),
      [made.a3, made.back, made.a1].map((x) => x.id),
    )
    assert.deepEqual(ids((await list(`/admin/transactions?metadata[order]=A&wallet=${carol.walletId}`, t.admin)).transactions), [
      made.a2.id,
    ])
  })

  it('combines the filters with direction, asset, kind, time and the cursors', async () => {
    const q = '/wallet/transactions?metadata[order]=A'
    assert.deepEqual(ids((await list(`${q}&direction=received`, alice.auth)).transactions), [made.back.id])
    assert.deepEqual(
      ids((await list(`${q}&direction=sent`, alice.auth)).transactions),
      [made.a3, made.a2, made.a1].map((x) => x.id),
    )
    assert.deepEqual(
      ids((await list(`${q}&asset=${silver.name}`, alice.auth)).transactions),
      [made.a3, made.a2].map((x) => x.id),
    )
    assert.deepEqual(ids((await list(`${q}&kind=transfer`, alice.auth)).transactions).length, 4)
    assert.deepEqual((await list(`${q}&kind=issuance`, alice.auth)).transactions, [])
    assert.deepEqual(ids((await list(`${q}&before=${made.back.id}&after=${made.a1.id}`, alice.auth)).transactions), [made.a2.id])
    assert.deepEqual(ids((await list(`${q}&since=${encodeURIComponent(made.a3.created_at)}`, alice.auth)).transactions), [made.a3.id])
    const issuances = (await list('/wallet/transactions?kind=issuance&limit=100', alice.auth)).transactions
    const ofSilver = issuances.filter((transaction) => transaction.assets[0].asset.id === silver.id)
    assert.equal(ofSilver.length, 1)
    assert.deepEqual((await list(`/wallet/transactions?kind=issuance&asset=${silver.name}`, alice.auth)).transactions, ofSilver)
    assert.deepEqual(ids((await list(`/wallet/transactions?kind=issuance&direction=sent`, alice.auth)).transactions), [])
  })

  it('pages a filtered list with the Link header, which keeps every filter', async () => {
    const first = await list('/wallet/transactions?metadata[order]=A&metadata[channel]=web&kind=transfer&limit=2', alice.auth)
    assert.deepEqual(
      ids(first.transactions),
      [made.a3, made.back].map((x) => x.id),
    )
    const url = nextUrl(first.link)
    assert.match(url, /metadata%5Border%5D=A/)
    assert.match(url, /metadata%5Bchannel%5D=web/)
    assert.match(url, /kind=transfer/)
    const second = await list(url, alice.auth)
    assert.deepEqual(ids(second.transactions), [made.a1.id])
    assert.equal(second.link, undefined)
    const offset = await list('/wallet/transactions?metadata[order]=A&offset=1&limit=2', alice.auth)
    assert.deepEqual(
      ids(offset.transactions),
      [made.back, made.a2].map((x) => x.id),
    )

    const journal = await list('/admin/transactions?kind=issuance&limit=1', t.admin)
    const journalNext = nextUrl(journal.link)
    assert.match(journalNext, /^\/admin\/transactions\?.*kind=issuance/)
    const journalMeta = await list(`/admin/transactions?metadata[order]=A&limit=3`, t.admin)
    assert.deepEqual(
      ids(journalMeta.transactions),
      [made.a3, made.back, made.a2].map((x) => x.id),
    )
    assert.deepEqual(ids((await list(nextUrl(journalMeta.link), t.admin)).transactions), [made.a1.id])
  })

  it('refuses an unknown kind, more than 5 metadata filters, and metadata filters no metadata can match with 400 G002', async () => {
    for (const url of ['/wallet/transactions', '/admin/transactions']) {
      const headers = url.startsWith('/admin') ? t.admin : alice.auth
      const six = Array.from({ length: 6 }, (_, i) => `metadata[k${i}]=v`).join('&')
      for (const query of [
        'kind=gift',
        'kind=',
        'kind=TRANSFER',
        six,
        `metadata[${'k'.repeat(41)}]=v`,
        'metadata[a%2Fb]=v',
        'metadata[]=v',
        'metadata=v',
        `metadata[k]=${'v'.repeat(501)}`,
        'metadata[k]=1&metadata[k]=2',
      ]) {
        expectError(await t.app.inject({ method: 'GET', url: `${url}?${query}`, headers }), 400, 'G002')
      }
      const five = Array.from({ length: 5 }, (_, i) => `metadata[k${i}]=v`).join('&')
      assert.deepEqual((await list(`${url}?${five}`, headers)).transactions, [])
    }
  })
})
