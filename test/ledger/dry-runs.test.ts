import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import type { LightMyRequestResponse } from 'fastify'
import fc from 'fast-check'
import { buildTestApp, journalSettled, type TestApp } from '../helpers/app.ts'
import { createAsset, createUser, fundedUser, setWebhook, type TestUser } from '../helpers/factories.ts'
import type { Asset } from '../../src/ledger/ledger.types.ts'

/**
 * Dry runs (`?dry_run=true`, docs/dry-runs.md) on the four paying routes: the answer is what the
 * request would answer, nothing is left behind, refusals are the request's, and a dry run followed
 * by the request agrees with it (a property over random requests through capped keys, credit and
 * units that expire).
 */

type Headers = Record<string, string>
type Route = 'transfer' | 'batch' | 'hold' | 'refund'

const SCALE = Number(process.env.FC_RUNS ?? 0) > 0 ? Number(process.env.FC_RUNS) / 100 : 1
const SEQUENCE_RUNS = Math.round(6 * SCALE)

const urlOf = (route: Route, id?: number) =>
  ({
    transfer: '/wallet/transactions',
    batch: '/wallet/transactions/batch',
    hold: '/wallet/holds',
    refund: `/wallet/transactions/${id}/refund`,
  })[route]

/** What a dry run shows of a recorded answer: ids, creation time and journal place unknown. */
function unrecorded(route: Route, body: Record<string, unknown>): unknown {
  const transaction = (value: unknown) => ({ ...(value as object), id: null, created_at: null, position: null, hash: null })
  if (route === 'hold') return { ...body, id: null, created_at: null }
  if (route !== 'batch') return transaction(body)
  if ('transactions' in body) return { transactions: (body.transactions as unknown[]).map(transaction) }
  return {
    results: (body.results as { status: number; transaction?: unknown }[]).map((result) =>
      result.transaction === undefined ? result : { ...result, transaction: transaction(result.transaction) },
    ),
  }
}

/** An error answer without its request id, which is every request's own. */
function refusal(response: LightMyRequestResponse) {
  const { code, message, detail } = response.json()
  return { status: response.statusCode, code, message, detail }
}

describe('dry runs', () => {
  let t: TestApp
  let gold: Asset
  let tab: Asset
  let ticket: Asset

  before(async () => {
    t = await buildTestApp()
    gold = await createAsset(t, { name: 'gold' })
    tab = await createAsset(t, { name: 'tab' })
    ticket = await createAsset(t, { name: 'ticket' })
  })
  after(async () => {
    await t.close()
  })

  const post = (url: string, headers: Headers, payload: object, extra: Headers = {}) =>
    t.app.inject({ method: 'POST', url, headers: { ...headers, ...extra }, payload })
  const get = async (url: string, headers: Headers) => {
    const response = await t.app.inject({ method: 'GET', url, headers })
    assert.equal(response.statusCode, 200, response.body)
    return response.json()
  }
  const dry = (route: Route, headers: Headers, payload: object, id?: number, extra: Headers = {}) =>
    post(`${urlOf(route, id)}?dry_run=true`, headers, payload, extra)
  const real = (route: Route, headers: Headers, payload: object, id?: number, extra: Headers = {}) =>
    post(urlOf(route, id), headers, payload, extra)

  /** A wallet key of the user's wallet with these scopes and limits (limits by asset name). */
  async function keyOf(user: TestUser, options: { scopes?: string[]; limits?: object } = {}) {
    const response = await post('/wallet/sessions', user.auth, { name: 'bot', ...options })
    assert.equal(response.statusCode, 201, response.body)
    const key = response.json()
    return { id: key.id as number, auth: { authorization: `Bearer ${key.token}` } }
  }

  /** A user with gold, units of ticket that expire in a day, and credit of tab. */
  async function customer(): Promise<TestUser> {
    const user = await fundedUser(t, [[gold, 200]])
    const inADay = new Date(Date.now() + 86_400_000).toISOString()
    const issued = await post(`/wallets/${user.walletId}/assets`, t.admin, { id: ticket.id, quantity: 100, expires_at: inADay })
    assert.equal(issued.statusCode, 201, issued.body)
    const credit = await t.app.inject({
      method: 'PUT',
      url: `/wallets/${user.walletId}/credit`,
      headers: t.admin,
      payload: { asset_id: tab.id, limit: 50 },
    })
    assert.equal(credit.statusCode, 200, credit.body)
    return user
  }

  /** Everything a dry run must leave as it was. */
  async function traces(users: TestUser[], keyOwner: TestUser) {
    const db = t.database.db
    // Positions are given within a second of a commit: read once every committed transaction has one.
    await journalSettled(db)
    type Table = 'transactions' | 'holds' | 'events' | 'webhook_deliveries' | 'key_uses' | 'idempotency_keys' | 'journal_entries'
    const count = async (table: Table) =>
      Number(
        (
          await db
            .selectFrom(table)
            .select((eb) => eb.fn.countAll().as('n'))
            .executeTakeFirstOrThrow()
        ).n,
      )
    return {
      holdings: await Promise.all(users.map((user) => get('/wallet/assets', user.auth))),
      history: await Promise.all(users.map((user) => get('/wallet/transactions?limit=100', user.auth))),
      holds: await Promise.all(users.map((user) => get('/wallet/holds?limit=100', user.auth))),
      // A dry run is a use of the key (`last_used_at`), never counted against its caps (`used`).
      keys: (await get('/wallet/sessions', keyOwner.auth)).map(({ last_used_at: _, ...key }: { last_used_at: unknown }) => key),
      rows: {
        transactions: await count('transactions'),
        holds: await count('holds'),
        events: await count('events'),
        deliveries: await count('webhook_deliveries'),
        keyUses: await count('key_uses'),
        idempotencyKeys: await count('idempotency_keys'),
        positions: await count('journal_entries'),
      },
    }
  }

  it('answers each route with the body the request would answer and the holdings after it', async () => {
    const alice = await customer()
    const bob = await createUser(t.app)
    const send = { recipient: bob.username, assets: { gold: 5, ticket: 3, tab: 10 }, memo: 'lunch', metadata: { table: '4' } }
    const cases: [Route, object][] = [
      ['transfer', send],
      ['batch', { transfers: [send, { recipient: bob.username, assets: { gold: 7 } }] }],
      ['batch', { atomic: false, transfers: [send, { recipient: bob.username, assets: { gold: 1000 } }] }],
      ['hold', { ...send, expires_in: 3600 }],
    ]
    for (const [route, payload] of cases) {
      const before = Date.now()
      const preview = await dry(route, alice.auth, payload)
      const sent = Date.now()
      assert.equal(preview.statusCode, 200, preview.body)
      const answer = preview.json()
      assert.equal(answer.dry_run, true)
      const done = await real(route, alice.auth, payload)
      assert.ok(done.statusCode === 201 || done.statusCode === 200, done.body)
      if (route === 'hold') {
        // Counted from now: an hour after a moment while the dry run ran.
        const expires = Date.parse(answer.result.expires_at)
        assert.ok(expires >= before + 3_600_000 - 1000 && expires <= sent + 3_600_000 + 1000, answer.result.expires_at)
        assert.deepEqual({ ...answer.result, expires_at: null }, { ...(unrecorded(route, done.json()) as object), expires_at: null })
      } else assert.deepEqual(answer.result, unrecorded(route, done.json()))
      assert.deepEqual(answer.holdings_after, await get('/wallet/assets', alice.auth))
    }
    // The refund: by the wallet that received, back to the sender, its holdings after it.
    const received = await real('transfer', alice.auth, { recipient: bob.username, assets: { gold: 10 } })
    const id = received.json().id as number
    const preview = await dry('refund', bob.auth, { assets: { gold: 4 }, memo: 'sorry' }, id)
    assert.equal(preview.statusCode, 200, preview.body)
    assert.equal(preview.json().result.reverses, id)
    const done = await real('refund', bob.auth, { assets: { gold: 4 }, memo: 'sorry' }, id)
    assert.equal(done.statusCode, 201, done.body)
    assert.deepEqual(preview.json().result, unrecorded('refund', done.json()))
    assert.deepEqual(preview.json().holdings_after, await get('/wallet/assets', bob.auth))
  })

  it('leaves nothing behind: no row, event, delivery, key use or Idempotency-Key', async () => {
    const alice = await customer()
    const bob = await createUser(t.app)
    await setWebhook(t, bob, 'http://127.0.0.1:9/hooks')
    const key = await keyOf(alice, { limits: { per_day: { gold: 100 }, per_transfer: { gold: 50 } } })
    const monitor = await post('/wallet/monitors', alice.auth, { asset: 'gold', below: 150 })
    assert.equal(monitor.statusCode, 201, monitor.body)
    const received = await real('transfer', alice.auth, { recipient: bob.username, assets: { gold: 10 } })
    const id = received.json().id as number
    const before = await traces([alice, bob], alice)
    const send = { recipient: bob.username, assets: { gold: 40 } }
    const idempotent = { 'idempotency-key': 'first-use' }
    for (const [route, headers, payload, refunded] of [
      ['transfer', key.auth, send],
      ['batch', key.auth, { transfers: [send, { recipient: bob.username, assets: { gold: 10, ticket: 5 } }] }],
      ['batch', key.auth, { atomic: false, transfers: [send] }],
      ['hold', key.auth, send],
      ['refund', bob.auth, {}, id],
    ] as [Route, Headers, object, number?][]) {
      const preview = await dry(route, headers, payload, refunded, idempotent)
      assert.equal(preview.statusCode, 200, preview.body)
      assert.equal(preview.headers['idempotent-replayed'], undefined)
    }
    assert.deepEqual(await traces([alice, bob], alice), before)
    // The monitor (gold below 150, which the batch would cross) is not crossed; the key's `used` is as it was.
    assert.deepEqual((await get('/wallet/monitors', alice.auth))[0].state, 'normal')
    // The request afterwards with the key the dry runs carried is its first use.
    const first = await real('transfer', key.auth, send, undefined, idempotent)
    assert.equal(first.statusCode, 201, first.body)
    assert.equal(first.headers['idempotent-replayed'], undefined)
    const again = await real('transfer', key.auth, send, undefined, idempotent)
    assert.equal(again.headers['idempotent-replayed'], 'true')
    // A dry run never reads the key: one used for another request is no G003.
    const other = await dry('transfer', key.auth, { recipient: bob.username, assets: { gold: 1 } }, undefined, idempotent)
    assert.equal(other.statusCode, 200, other.body)
  })

  it('refuses exactly as the request would, and then the request still is refused the same way', async () => {
    const alice = await customer()
    const bob = await createUser(t.app)
    const carol = await createUser(t.app)
    const reader = await keyOf(alice, { scopes: ['read'] })
    const capped = await keyOf(alice, { limits: { per_transfer: { gold: 30 }, per_day: { gold: 50 }, recipients: [bob.walletId] } })
    const spent = await real('transfer', capped.auth, { recipient: bob.username, assets: { gold: 30 } })
    assert.equal(spent.statusCode, 201, spent.body)
    const received = await real('transfer', alice.auth, { recipient: bob.username, assets: { gold: 10 } })
    const id = received.json().id as number
    const to = (recipient: string, assets: Record<string, number>) => ({ recipient, assets })
    const cases: [string, Route, Headers, object, number?][] = [
      ['I002 beyond what is held', 'transfer', alice.auth, to(bob.username, { gold: 1000 })],
      ['I002 beyond the credit', 'transfer', alice.auth, to(bob.username, { tab: 51 })],
      ['I001 an unknown asset', 'transfer', alice.auth, to(bob.username, { lead: 1 })],
      ['U003 an unknown user', 'transfer', alice.auth, to('nobody-here', { gold: 1 })],
      ['W013 to itself', 'transfer', alice.auth, to(alice.username, { gold: 1 })],
      ['K000 a key without send', 'transfer', reader.auth, to(bob.username, { gold: 1 })],
      ['K000 a key without hold', 'hold', reader.auth, to(bob.username, { gold: 1 })],
      ['K002 a recipient the key may not pay', 'transfer', capped.auth, to(carol.username, { gold: 1 })],
      ['K001 per_transfer', 'transfer', capped.auth, to(bob.username, { gold: 31 })],
      ['K001 per_day', 'transfer', capped.auth, to(bob.username, { gold: 21 })],
      ['K001 per_day of a hold', 'hold', capped.auth, to(bob.username, { gold: 21 })],
      ['K001 per_day over a batch', 'batch', capped.auth, { transfers: [to(bob.username, { gold: 15 }), to(bob.username, { gold: 15 })] }],
      ['I002 in an atomic batch', 'batch', alice.auth, { transfers: [to(bob.username, { gold: 5 }), to(bob.username, { gold: 1000 })] }],
      ['I002 of expired-free units', 'transfer', alice.auth, to(bob.username, { ticket: 101 })],
      ['T000 a refund of nothing received', 'refund', alice.auth, {}, id],
      ['T001 a refund of more than received', 'refund', bob.auth, { assets: { gold: 11 } }, id],
      ['A001 a bad key', 'transfer', { authorization: 'Bearer cfw_not_a_key' }, to(bob.username, { gold: 1 })],
      ['G000 a bad body', 'transfer', alice.auth, { recipient: bob.username, assets: { gold: -1 } }],
    ]
    for (const [name, route, headers, payload, refunded] of cases) {
      const preview = await dry(route, headers, payload, refunded)
      const request = await real(route, headers, payload, refunded)
      assert.ok(request.statusCode >= 400, `${name}: ${request.body}`)
      assert.deepEqual(refusal(preview), refusal(request), name)
    }
    const bad = await post('/wallet/transactions?dry_run=yes', alice.auth, to(bob.username, { gold: 1 }))
    assert.equal(bad.statusCode, 400, bad.body)
    assert.equal(bad.json().code, 'G002')
  })

  it('agrees with the request that follows it: same verdict, same answer, same holdings (property)', async () => {
    const alice = await customer()
    const carol = await customer()
    const bob = await createUser(t.app)
    const dave = await createUser(t.app)
    const aliceKey = await keyOf(alice, {
      limits: { per_transfer: { gold: 40, ticket: 30 }, per_day: { gold: 150, tab: 40 }, recipients: [bob.walletId, carol.walletId] },
    })
    const carolKey = await keyOf(carol, { scopes: ['read', 'send'], limits: { per_day: { ticket: 60 } } })
    const payers: { user: TestUser; auth: Headers }[] = [
      { user: alice, auth: alice.auth },
      { user: alice, auth: aliceKey.auth },
      { user: carol, auth: carol.auth },
      { user: carol, auth: carolKey.auth },
    ]
    const recipients = [bob.username, dave.username, carol.username, alice.username]
    /** Transactions each wallet received, for refunds. */
    const received = new Map<number, number[]>()

    const line = fc.dictionary(fc.constantFrom('gold', 'tab', 'ticket'), fc.integer({ min: 1, max: 60 }), { minKeys: 1, maxKeys: 3 })
    const transfer = fc.record({ recipient: fc.constantFrom(...recipients), assets: line })
    const request = fc.oneof(
      fc.record({ route: fc.constant('transfer' as const), payer: fc.nat(3), body: transfer }),
      fc.record({
        route: fc.constant('batch' as const),
        payer: fc.nat(3),
        body: fc.record({ atomic: fc.boolean(), transfers: fc.array(transfer, { minLength: 1, maxLength: 4 }) }),
      }),
      fc.record({
        route: fc.constant('hold' as const),
        payer: fc.nat(3),
        body: fc.record({ recipient: fc.constantFrom(...recipients), assets: line, expires_in: fc.integer({ min: 60, max: 86_400 }) }),
      }),
      fc.record({
        route: fc.constant('refund' as const),
        payer: fc.nat(3),
        pick: fc.nat(),
        body: fc.option(fc.record({ assets: line }), { nil: undefined }),
      }),
    )

    const receivers = [bob, dave, carol, alice]
    await fc.assert(
      fc.asyncProperty(fc.array(request, { minLength: 4, maxLength: 10 }), async (requests) => {
        for (const step of requests) {
          let { user: payer, auth } = payers[step.payer]
          const payload: object = step.body ?? {}
          let id: number | undefined
          if (step.route === 'refund') {
            // The refunding wallet is the one that received; a refund through a capped key is alice's or carol's.
            const receiver = receivers[step.payer]
            payer = receiver
            auth = receiver === alice ? aliceKey.auth : receiver === carol ? carolKey.auth : receiver.auth
            const ids = received.get(receiver.walletId) ?? []
            id = ids.length === 0 ? 987_654 : ids[step.pick % ids.length]
          }
          const preview = await dry(step.route, auth, payload, id)
          const done = await real(step.route, auth, payload, id)
          const what = `${step.route} ${JSON.stringify(payload)}: ${preview.body} / ${done.body}`
          if (done.statusCode >= 400) {
            assert.deepEqual(refusal(preview), refusal(done), what)
            continue
          }
          assert.equal(preview.statusCode, 200, what)
          const answer = preview.json()
          const expected = unrecorded(step.route, done.json()) as Record<string, unknown>
          if (step.route === 'hold') assert.deepEqual({ ...answer.result, expires_at: null }, { ...expected, expires_at: null }, what)
          else assert.deepEqual(answer.result, expected, what)
          assert.deepEqual(answer.holdings_after, await get('/wallet/assets', payer.auth), what)
          const made = done.json()
          const transactions =
            step.route === 'batch'
              ? (made.transactions ?? made.results.flatMap((r: { transaction?: object }) => r.transaction ?? []))
              : step.route === 'hold'
                ? []
                : [made]
          for (const transaction of transactions as { id: number; receiving_wallet_id: number; kind: string }[])
            if (transaction.kind === 'transfer')
              received.set(transaction.receiving_wallet_id, [...(received.get(transaction.receiving_wallet_id) ?? []), transaction.id])
        }
      }),
      { numRuns: SEQUENCE_RUNS },
    )
  })
})
