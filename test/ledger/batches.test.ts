import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import { createOutbox } from '../../src/events/outbox.ts'
import { transactionEvents } from '../helpers/events.ts'
import { GroupCommitter } from '../../src/ledger/group-committer.ts'
import { DEFAULT_MAX_BATCH } from '../../src/ledger/ledger.service.ts'
import { MAX_QUANTITY, MINT_WALLET_ID, type Transaction } from '../../src/ledger/ledger.types.ts'
import { buildPeerApp, expectError, STORAGE } from '../helpers/app.ts'
import { assertSameTransactions, createAsset, createUser, fundedUser, issue, type TestUser } from '../helpers/factories.ts'
import { assertRefusedUnchanged, ledgerApp, ledgerState } from '../helpers/ledger-fixture.ts'

const outbox = createOutbox()

/**
 * Batches: POST /wallet/transactions/batch (atomic or not, one Idempotency-Key for the whole
 * batch) and POST /issuances (the operator's issuance to many wallets, atomic).
 */

const { t, gold, silver } = await ledgerApp()

function sendBatch(from: TestUser, payload: unknown, headers: Record<string, string> = {}): Promise<LightMyRequestResponse> {
  return t.app.inject({
    method: 'POST',
    url: '/wallet/transactions/batch',
    headers: { ...from.auth, ...headers },
    payload: payload as object,
  })
}

function issueMany(payload: unknown): Promise<LightMyRequestResponse> {
  return t.app.inject({ method: 'POST', url: '/issuances', headers: t.admin, payload: payload as object })
}

async function balances(user: TestUser): Promise<Record<string, number>> {
  const response = await t.app.inject({ method: 'GET', url: '/wallet/assets', headers: user.auth })
  assert.equal(response.statusCode, 200, response.body)
  return Object.fromEntries(
    (response.json() as { asset: { name: string }; quantity: number }[]).map((holding) => [holding.asset.name, holding.quantity]),
  )
}

/** Asserts that `request` is refused with this status, code and detail prefix and changes nothing at all. */
function refusedUnchanged(request: () => Promise<LightMyRequestResponse>, status: number, code: string, detail?: RegExp): Promise<void> {
  return assertRefusedUnchanged(t, request, status, code, detail)
}

const eventsOf = (transactionIds: number[]) => transactionEvents(t.database.db, transactionIds)

describe(`POST /wallet/transactions/batch, atomic (${STORAGE})`, () => {
  it('commits every transfer and answers 201 with the transactions in request order, each with its events', async () => {
    const payer = await fundedUser(t, [
      [gold, 20],
      [silver, 5],
    ])
    const [bob, carol, dave] = [await createUser(t.app), await createUser(t.app), await createUser(t.app)]
    const response = await sendBatch(payer, {
      transfers: [
        { recipient: bob.username, memo: 'one', assets: { [gold.name]: 5 } },
        { recipient: carol.address, type: 1, assets: { [gold.name]: 3, [silver.name]: 2 } },
        {
          recipient: String(dave.walletId),
          type: 2,
          memo: 'three',
          assets: { [silver.name]: 3 },
          metadata: { order: 'A-17', 'line.no': '3' },
        },
      ],
    })
    assert.equal(response.statusCode, 201, response.body)
    const { transactions } = response.json() as { transactions: Transaction[] }
    assert.deepEqual(
      transactions.map((tx) => [tx.kind, tx.metadata]),
      [
        ['transfer', {}],
        ['transfer', {}],
        ['transfer', { order: 'A-17', 'line.no': '3' }],
      ],
    )
    assert.deepEqual(
      transactions.map((tx) => [tx.sending_wallet_id, tx.receiving_wallet_id, tx.memo]),
      [
        [payer.walletId, bob.walletId, 'one'],
        [payer.walletId, carol.walletId, ''],
        [payer.walletId, dave.walletId, 'three'],
      ],
    )
    assert.deepEqual(
      transactions[1].assets.map((line) => [line.asset.name, line.quantity]).sort(),
      [
        [gold.name, 3],
        [silver.name, 2],
      ].sort(),
    )
    const ids = transactions.map((tx) => tx.id)
    assert.deepEqual(
      ids,
      [...ids].sort((a, b) => a - b),
    )
    assert.deepEqual(await balances(payer), { [gold.name]: 12 })
    assert.deepEqual(
      [await balances(bob), await balances(carol), await balances(dave)],
      [{ [gold.name]: 5 }, { [gold.name]: 3, [silver.name]: 2 }, { [silver.name]: 3 }],
    )
    assert.deepEqual(await eventsOf(ids), [
      [ids[0], payer.walletId, 'transaction.sent'],
      [ids[0], bob.walletId, 'transaction.received'],
      [ids[1], payer.walletId, 'transaction.sent'],
      [ids[1], carol.walletId, 'transaction.received'],
      [ids[2], payer.walletId, 'transaction.sent'],
      [ids[2], dave.walletId, 'transaction.received'],
    ])
    // Each transaction is recorded as a single transfer's would be: the history answers the same objects.
    const history = await t.app.inject({ method: 'GET', url: '/wallet/transactions', headers: payer.auth })
    assertSameTransactions((history.json() as Transaction[]).filter((tx) => ids.includes(tx.id)).reverse(), transactions)
  })

  it('checks each transfer against what the earlier ones of the batch left', async () => {
    const payer = await fundedUser(t, [[gold, 10]])
    const bob = await createUser(t.app)
    const response = await sendBatch(payer, {
      atomic: true,
      transfers: [
        { recipient: bob.username, assets: { [gold.name]: 6 } },
        { recipient: bob.username, assets: { [gold.name]: 4 } },
      ],
    })
    assert.equal(response.statusCode, 201, response.body)
    assert.deepEqual(await balances(payer), {})
    assert.deepEqual(await balances(bob), { [gold.name]: 10 })
  })

  it('moves nothing and records no transaction or event when the last transfer overdraws: I002 naming transfers[2]', async () => {
    const payer = await fundedUser(t, [[gold, 10]])
    const [bob, carol] = [await createUser(t.app), await createUser(t.app)]
    await refusedUnchanged(
      () =>
        sendBatch(payer, {
          transfers: [
            { recipient: bob.username, assets: { [gold.name]: 4 } },
            { recipient: carol.username, assets: { [gold.name]: 4 } },
            { recipient: bob.username, assets: { [gold.name]: 3 } },
          ],
        }),
      400,
      'I002',
      /^transfers\[2\]: wallet holds 2 of /,
    )
    assert.deepEqual(await balances(payer), { [gold.name]: 10 })
  })

  it('answers the first transfer that fails to resolve, in the order of a single transfer, with its detail prefixed', async () => {
    const payer = await fundedUser(t, [[gold, 10]])
    const bob = await createUser(t.app)
    const ok = { recipient: bob.username, assets: { [gold.name]: 1 } }
    await refusedUnchanged(
      () => sendBatch(payer, { transfers: [ok, { recipient: 'nobodyatall', assets: { [gold.name]: 1 } }] }),
      404,
      'U003',
      /^transfers\[1\]: no user "nobodyatall"/,
    )
    await refusedUnchanged(
      () => sendBatch(payer, { transfers: [ok, ok, { recipient: 'zzzznotthere', type: 1, assets: { [gold.name]: 1 } }] }),
      404,
      'W000',
      /^transfers\[2\]: /,
    )
    await refusedUnchanged(
      () => sendBatch(payer, { transfers: [{ recipient: payer.username, assets: { [gold.name]: 1 } }, ok] }),
      400,
      'W013',
      /^transfers\[0\]: /,
    )
    await refusedUnchanged(
      () => sendBatch(payer, { transfers: [ok, { recipient: bob.username, assets: { nosuchcoin: 1 } }] }),
      400,
      'I001',
      /^transfers\[1\]: no asset named "nosuchcoin"/,
    )
    await refusedUnchanged(
      () => sendBatch(payer, { transfers: [ok, { recipient: 'abc', type: 2, assets: { [gold.name]: 1 } }] }),
      400,
      'G000',
      /^transfers\[1\]: recipient must be a wallet id/,
    )
    // Two bad transfers: the first in request order; a resolving error before any balance check.
    await refusedUnchanged(
      () =>
        sendBatch(payer, {
          transfers: [
            { recipient: bob.username, assets: { [gold.name]: 99 } },
            { recipient: 'ghostuser', assets: { [gold.name]: 1 } },
            { recipient: bob.username, assets: { nosuch: 1 } },
          ],
        }),
      404,
      'U003',
      /^transfers\[1\]: /,
    )
    await refusedUnchanged(
      () => sendBatch(payer, { transfers: [ok, { recipient: 1, type: 2, assets: { [gold.name]: 1 } }] }),
      404,
      'W000',
      /^transfers\[1\]: /,
    )
    await refusedUnchanged(
      () =>
        sendBatch(payer, {
          transfers: [ok, { recipient: bob.username, assets: { [gold.name]: MAX_QUANTITY, [gold.name.toUpperCase()]: 1 } }],
        }),
      400,
      'I003',
      /^transfers\[1\]: /,
    )
    assert.deepEqual(await balances(payer), { [gold.name]: 10 })
  })

  it('refuses a malformed body with G000 and changes nothing: 0 or 101 transfers, a bad transfer (named), a bad atomic flag', async () => {
    const payer = await fundedUser(t, [[gold, 200]])
    const bob = await createUser(t.app)
    const ok = { recipient: bob.username, assets: { [gold.name]: 1 } }
    await refusedUnchanged(() => sendBatch(payer, { transfers: [] }), 400, 'G000', /transfers/)
    await refusedUnchanged(() => sendBatch(payer, { transfers: Array(101).fill(ok) }), 400, 'G000', /transfers/)
    await refusedUnchanged(() => sendBatch(payer, {}), 400, 'G000', /transfers is required/)
    await refusedUnchanged(() => sendBatch(payer, { transfers: ok }), 400, 'G000')
    await refusedUnchanged(() => sendBatch(payer, { transfers: [ok], atomic: 'yes' }), 400, 'G000', /atomic/)
    for (const atomic of [true, false]) {
      await refusedUnchanged(
        () => sendBatch(payer, { atomic, transfers: [ok, ok, { recipient: bob.username, assets: { [gold.name]: 0 } }] }),
        400,
        'G000',
        /^transfers\[2\]: assets\./,
      )
      await refusedUnchanged(
        () => sendBatch(payer, { atomic, transfers: [ok, { assets: { [gold.name]: 1 } }] }),
        400,
        'G000',
        /^transfers\[1\]: recipient is required/,
      )
      await refusedUnchanged(
        () => sendBatch(payer, { atomic, transfers: [ok, { recipient: bob.username, memo: 'x'.repeat(65), assets: { [gold.name]: 1 } }] }),
        400,
        'G000',
        /^transfers\[1\]: memo /,
      )
      await refusedUnchanged(() => sendBatch(payer, { atomic, transfers: [ok, 'not a transfer'] }), 400, 'G000', /^transfers\[1\]: /)
      await refusedUnchanged(
        () => sendBatch(payer, { atomic, transfers: [ok, { ...ok, metadata: { note: 5 } }] }),
        400,
        'G000',
        /^transfers\[1\]: metadata/,
      )
      await refusedUnchanged(
        () =>
          sendBatch(payer, {
            atomic,
            transfers: [{ ...ok, metadata: Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`k${i}`, 'v'])) }],
          }),
        400,
        'G000',
        /^transfers\[0\]: metadata/,
      )
    }
    // 100 is the most, and allowed.
    const full = await sendBatch(payer, { transfers: Array(100).fill(ok) })
    assert.equal(full.statusCode, 201, full.body)
    assert.equal(full.json().transactions.length, 100)
    assert.deepEqual(await balances(payer), { [gold.name]: 100 })
  })
})

describe(`POST /wallet/transactions/batch, not atomic (${STORAGE})`, () => {
  it('commits each transfer that can and answers 200 with every outcome in request order', async () => {
    const payer = await fundedUser(t, [[gold, 10]])
    const [bob, carol] = [await createUser(t.app), await createUser(t.app)]
    const response = await sendBatch(payer, {
      atomic: false,
      transfers: [
        { recipient: bob.username, assets: { [gold.name]: 4 } },
        { recipient: 'ghostuser', assets: { [gold.name]: 1 } },
        { recipient: carol.username, assets: { [gold.name]: 7 } },
        { recipient: carol.username, assets: { [gold.name]: 6 } },
        { recipient: payer.username, assets: { [gold.name]: 1 } },
        { recipient: bob.username, assets: { nosuchcoin: 1 } },
      ],
    })
    assert.equal(response.statusCode, 200, response.body)
    const { results } = response.json() as {
      results: { status: number; transaction?: Transaction; error?: { code: string; message: string; detail: string } }[]
    }
    assert.deepEqual(
      results.map((result) => [result.status, result.error?.code]),
      [
        [201, undefined],
        [404, 'U003'],
        [400, 'I002'],
        [201, undefined],
        [400, 'W013'],
        [400, 'I001'],
      ],
    )
    assert.deepEqual(results[2].error, {
      code: 'I002',
      message: 'Insufficient Quantity',
      detail: `wallet holds 6 of ${gold.name}, 7 requested`,
    })
    for (const result of results.filter((result) => result.error)) assert.equal(typeof result.error?.detail, 'string')
    assert.deepEqual(
      [results[0].transaction?.receiving_wallet_id, results[3].transaction?.receiving_wallet_id],
      [bob.walletId, carol.walletId],
    )
    assert.deepEqual([await balances(payer), await balances(bob), await balances(carol)], [{}, { [gold.name]: 4 }, { [gold.name]: 6 }])
    const ids = [results[0].transaction?.id ?? 0, results[3].transaction?.id ?? 0]
    assert.equal((await eventsOf(ids)).length, 4)
  })

  it('answers 200 with every error and moves nothing when no transfer can commit', async () => {
    const payer = await fundedUser(t, [[gold, 1]])
    const bob = await createUser(t.app)
    const before = await ledgerState(t.database.db)
    const response = await sendBatch(payer, {
      atomic: false,
      transfers: [
        { recipient: bob.username, assets: { [gold.name]: 2 } },
        { recipient: 'ghostuser', assets: { [gold.name]: 1 } },
      ],
    })
    assert.equal(response.statusCode, 200, response.body)
    assert.deepEqual(
      response.json().results.map((result: { status: number; error: { code: string } }) => [result.status, result.error.code]),
      [
        [400, 'I002'],
        [404, 'U003'],
      ],
    )
    assert.deepEqual(await ledgerState(t.database.db), before)
  })
})

describe(`POST /wallet/transactions/batch with an Idempotency-Key (${STORAGE})`, () => {
  it('answers a retry of the whole batch with the first response and moves nothing more', async () => {
    const payer = await fundedUser(t, [[gold, 10]])
    const [bob, carol] = [await createUser(t.app), await createUser(t.app)]
    const body = {
      transfers: [
        { recipient: bob.username, assets: { [gold.name]: 2 } },
        { recipient: carol.username, memo: 'm', assets: { [gold.name]: 3 } },
      ],
    }
    const first = await sendBatch(payer, body, { 'idempotency-key': 'batch-1' })
    assert.equal(first.statusCode, 201, first.body)
    assert.equal(first.headers['idempotent-replayed'], undefined)
    const before = await ledgerState(t.database.db)
    // The same request written another way (atomic spelled out, a wallet id as a number) is the same request.
    const again = await sendBatch(payer, { atomic: true, transfers: body.transfers }, { 'idempotency-key': 'batch-1' })
    assert.equal(again.statusCode, 201)
    assert.equal(again.headers['idempotent-replayed'], 'true')
    assert.deepEqual(again.json(), first.json())
    assert.deepEqual(await ledgerState(t.database.db), before)
    assert.deepEqual(await balances(payer), { [gold.name]: 5 })
  })

  it("refuses the key with G003 for a different batch, a non-atomic one, or a single transfer, and a batch under a transfer's key", async () => {
    const payer = await fundedUser(t, [[gold, 10]])
    const bob = await createUser(t.app)
    const transfer = { recipient: bob.username, assets: { [gold.name]: 1 } }
    const first = await sendBatch(payer, { transfers: [transfer] }, { 'idempotency-key': 'batch-2' })
    assert.equal(first.statusCode, 201, first.body)
    await refusedUnchanged(() => sendBatch(payer, { transfers: [transfer, transfer] }, { 'idempotency-key': 'batch-2' }), 409, 'G003')
    await refusedUnchanged(() => sendBatch(payer, { atomic: false, transfers: [transfer] }, { 'idempotency-key': 'batch-2' }), 409, 'G003')
    await refusedUnchanged(
      () => sendBatch(payer, { transfers: [{ ...transfer, memo: 'other' }] }, { 'idempotency-key': 'batch-2' }),
      409,
      'G003',
    )
    await refusedUnchanged(
      () => sendBatch(payer, { transfers: [{ ...transfer, metadata: { order: '1' } }] }, { 'idempotency-key': 'batch-2' }),
      409,
      'G003',
    )
    await refusedUnchanged(
      () =>
        t.app.inject({
          method: 'POST',
          url: '/wallet/transactions',
          headers: { ...payer.auth, 'idempotency-key': 'batch-2' },
          payload: transfer,
        }),
      409,
      'G003',
    )
    const single = await t.app.inject({
      method: 'POST',
      url: '/wallet/transactions',
      headers: { ...payer.auth, 'idempotency-key': 'single-2' },
      payload: transfer,
    })
    assert.equal(single.statusCode, 201, single.body)
    await refusedUnchanged(() => sendBatch(payer, { transfers: [transfer] }, { 'idempotency-key': 'single-2' }), 409, 'G003')
    // Keys are the wallet's: another wallet's batch under the same key is its own request.
    const other = await fundedUser(t, [[gold, 1]])
    assert.equal((await sendBatch(other, { transfers: [transfer] }, { 'idempotency-key': 'batch-2' })).statusCode, 201)
  })

  it("replays a non-atomic batch's mixed answer (200) as it was", async () => {
    const payer = await fundedUser(t, [[gold, 3]])
    const bob = await createUser(t.app)
    const body = {
      atomic: false,
      transfers: [
        { recipient: bob.username, assets: { [gold.name]: 2 } },
        { recipient: bob.username, assets: { [gold.name]: 2 } },
      ],
    }
    const first = await sendBatch(payer, body, { 'idempotency-key': 'each-1' })
    assert.equal(first.statusCode, 200, first.body)
    assert.deepEqual(
      first.json().results.map((result: { status: number }) => result.status),
      [201, 400],
    )
    await issue(t, payer.walletId, gold.id, 10)
    const again = await sendBatch(payer, body, { 'idempotency-key': 'each-1' })
    assert.equal(again.statusCode, 200)
    assert.equal(again.headers['idempotent-replayed'], 'true')
    assert.deepEqual(again.json(), first.json())
    assert.deepEqual(await balances(payer), { [gold.name]: 11 })
  })

  it('stores nothing for a refused atomic batch: its retry runs again and can then succeed', async () => {
    const payer = await fundedUser(t, [[gold, 1]])
    const bob = await createUser(t.app)
    const body = {
      transfers: [
        { recipient: bob.username, assets: { [gold.name]: 1 } },
        { recipient: bob.username, assets: { [gold.name]: 1 } },
      ],
    }
    expectError(await sendBatch(payer, body, { 'idempotency-key': 'retry-1' }), 400, 'I002')
    await issue(t, payer.walletId, gold.id, 1)
    const retry = await sendBatch(payer, body, { 'idempotency-key': 'retry-1' })
    assert.equal(retry.statusCode, 201, retry.body)
    assert.equal(retry.headers['idempotent-replayed'], undefined)
    assert.deepEqual(await balances(bob), { [gold.name]: 2 })
  })

  it('runs a batch sent twice at once under one key only once: the other answer is G004 or the replay', async () => {
    const payer = await fundedUser(t, [[gold, 10]])
    const bob = await createUser(t.app)
    const body = {
      transfers: [
        { recipient: bob.username, assets: { [gold.name]: 1 } },
        { recipient: bob.username, assets: { [gold.name]: 2 } },
      ],
    }
    const responses = await Promise.all([
      sendBatch(payer, body, { 'idempotency-key': 'twice' }),
      sendBatch(payer, body, { 'idempotency-key': 'twice' }),
    ])
    const fresh = responses.filter((response) => response.statusCode === 201 && response.headers['idempotent-replayed'] === undefined)
    assert.equal(fresh.length, 1, responses.map((response) => response.body).join('\n'))
    const other = responses.find((response) => response !== fresh[0]) as LightMyRequestResponse
    if (other.statusCode === 409) expectError(other, 409, 'G004')
    else assert.deepEqual(other.json(), fresh[0].json())
    assert.deepEqual(await balances(bob), { [gold.name]: 3 })
  })
})

describe(`atomic batches in the group commit (${STORAGE})`, () => {
  it('checks an atomic batch in its place among the transfers committed with it, failing alone and taking its changes back', async () => {
    const [a, b, c] = [await fundedUser(t, [[gold, 10]]), await createUser(t.app), await createUser(t.app)]
    const { dialect } = t.database
    const committer = new GroupCommitter(t.database.db, outbox, {
      maxBatch: DEFAULT_MAX_BATCH[dialect],
      beginEarly: dialect === 'postgres',
    })
    const line = (quantity: number) => [{ asset: gold, quantity }]
    const move = (from: TestUser, to: TestUser, quantity: number) => ({
      from: from.walletId,
      to: to.walletId,
      lines: line(quantity),
      memo: '',
      kind: 'transfer' as const,
    })
    // All in one tick: one group. The failing unit's first move (5) must not count for the transfer after it.
    const results = await Promise.allSettled([
      committer.run(move(a, b, 2)),
      committer.runUnit({ atomic: true, moves: [move(a, b, 5), move(a, c, 100)] }),
      committer.run(move(a, c, 8)),
      committer.runUnit({ atomic: true, moves: [move(c, b, 3), move(b, c, 1)] }),
    ])
    assert.deepEqual(
      results.map((result) => result.status),
      ['fulfilled', 'fulfilled', 'fulfilled', 'fulfilled'],
    )
    const unit = (results[1] as PromiseFulfilledResult<{ ok: boolean; error?: { code: string } }[]>).value
    assert.deepEqual(
      unit.map((outcome) => [outcome.ok, outcome.error?.code]),
      [
        [false, undefined],
        [false, 'I002'],
      ],
    )
    const last = (results[3] as PromiseFulfilledResult<{ ok: boolean }[]>).value
    assert.deepEqual(
      last.map((outcome) => outcome.ok),
      [true, true],
    )
    assert.deepEqual([await balances(a), await balances(b), await balances(c)], [{}, { [gold.name]: 4 }, { [gold.name]: 6 }])
    await committer.close()
  })

  it(`keeps the sums when wallets pay each other in parallel atomic batches, racing single transfers (${STORAGE})`, async () => {
    const [a, b, c] = [await fundedUser(t, [[gold, 300]]), await fundedUser(t, [[gold, 300]]), await fundedUser(t, [[gold, 50]])]
    const batch = (from: TestUser, to: TestUser, quantity: number) =>
      sendBatch(from, { transfers: Array.from({ length: 10 }, () => ({ recipient: to.username, assets: { [gold.name]: quantity } })) })
    const single = (from: TestUser, to: TestUser) =>
      t.app.inject({
        method: 'POST',
        url: '/wallet/transactions',
        headers: from.auth,
        payload: { recipient: to.username, assets: { [gold.name]: 1 } },
      })
    const requests: Promise<LightMyRequestResponse>[] = []
    for (let round = 0; round < 12; round++) {
      requests.push(batch(a, b, 3), batch(b, a, 3), batch(a, c, 1), batch(c, a, 2), single(a, b), single(c, b), single(b, c))
    }
    const responses = await Promise.all(requests)
    let moved = { a: 0, b: 0, c: 0 }
    responses.forEach((response, i) => {
      assert.ok(
        response.statusCode === 201 || (response.statusCode === 400 && response.json().code === 'I002'),
        `${response.statusCode} ${response.body}`,
      )
      if (response.statusCode !== 201) return
      const body = response.json()
      const transactions: Transaction[] = body.transactions ?? [body]
      assert.ok(transactions.length === 10 || (transactions.length === 1 && !body.transactions), `request ${i}`)
      for (const tx of transactions) {
        const quantity = tx.assets[0].quantity
        const key = (id: number) => (id === a.walletId ? 'a' : id === b.walletId ? 'b' : 'c') as 'a' | 'b' | 'c'
        moved = { ...moved, [key(tx.sending_wallet_id)]: moved[key(tx.sending_wallet_id)] - quantity }
        moved = { ...moved, [key(tx.receiving_wallet_id)]: moved[key(tx.receiving_wallet_id)] + quantity }
      }
    })
    const [ba, bb, bc] = [await balances(a), await balances(b), await balances(c)]
    assert.deepEqual([ba[gold.name] ?? 0, bb[gold.name] ?? 0, bc[gold.name] ?? 0], [300 + moved.a, 300 + moved.b, 50 + moved.c])
    assert.equal((ba[gold.name] ?? 0) + (bb[gold.name] ?? 0) + (bc[gold.name] ?? 0), 650)
  })

  it(
    'keeps the sums when two instances run atomic batches paying each other (PostgreSQL): no deadlock',
    { skip: STORAGE !== 'postgres' && 'PostgreSQL only' },
    async () => {
      const peer = await buildPeerApp(t)
      try {
        const [a, b] = [await fundedUser(t, [[gold, 500]]), await fundedUser(t, [[gold, 500]])]
        const batch = (app: FastifyInstance, from: TestUser, to: TestUser) =>
          app.inject({
            method: 'POST',
            url: '/wallet/transactions/batch',
            headers: from.auth,
            payload: {
              transfers: Array.from({ length: 20 }, (_, i) => ({ recipient: to.username, assets: { [gold.name]: 1 + (i % 3) } })),
            },
          })
        const responses = await Promise.all(
          Array.from({ length: 15 }, () => [batch(t.app, a, b), batch(peer.app, b, a), batch(peer.app, a, b), batch(t.app, b, a)]).flat(),
        )
        for (const response of responses)
          assert.ok(
            response.statusCode === 201 || (response.statusCode === 400 && response.json().code === 'I002'),
            `${response.statusCode} ${response.body}`,
          )
        const [ba, bb] = [await balances(a), await balances(b)]
        assert.equal((ba[gold.name] ?? 0) + (bb[gold.name] ?? 0), 1000)
        // 20 transfers of 1, 2, 3 … per batch: 39 units each way.
        const sent = (from: TestUser) =>
          responses.filter((response) => response.statusCode === 201 && response.json().transactions[0].sending_wallet_id === from.walletId)
            .length * 39
        assert.equal(ba[gold.name] ?? 0, 500 - sent(a) + sent(b))
      } finally {
        await peer.close()
      }
    },
  )

  it(`never overdraws a wallet spent by atomic batches and single transfers at once (${STORAGE})`, async () => {
    const payer = await fundedUser(t, [[gold, 100]])
    const [bob, carol] = [await createUser(t.app), await createUser(t.app)]
    const requests: Promise<LightMyRequestResponse>[] = []
    for (let i = 0; i < 10; i++) {
      requests.push(
        sendBatch(payer, { transfers: Array.from({ length: 5 }, () => ({ recipient: bob.username, assets: { [gold.name]: 2 } })) }),
      )
      for (let j = 0; j < 5; j++)
        requests.push(
          t.app.inject({
            method: 'POST',
            url: '/wallet/transactions',
            headers: payer.auth,
            payload: { recipient: carol.username, assets: { [gold.name]: 1 } },
          }),
        )
    }
    const responses = await Promise.all(requests)
    for (const response of responses)
      assert.ok(
        response.statusCode === 201 || (response.statusCode === 400 && response.json().code === 'I002'),
        `${response.statusCode} ${response.body}`,
      )
    const batches = responses.filter((response, i) => i % 6 === 0 && response.statusCode === 201).length
    const singles = responses.filter((response, i) => i % 6 !== 0 && response.statusCode === 201).length
    assert.equal(batches * 10 + singles, 100)
    assert.deepEqual(await balances(payer), {})
    assert.deepEqual(
      [await balances(bob), await balances(carol)],
      [{ [gold.name]: batches * 10 }, ...(singles > 0 ? [{ [gold.name]: singles }] : [{}])],
    )
  })
})

describe(`batches and held funds (${STORAGE})`, () => {
  it('spends only what no pending hold reserves: an atomic batch is refused naming its transfer, a non-atomic one goes as far as the free funds', async () => {
    const payer = await fundedUser(t, [[gold, 10]])
    const [bob, carol] = [await createUser(t.app), await createUser(t.app)]
    const hold = await t.app.inject({
      method: 'POST',
      url: '/wallet/holds',
      headers: payer.auth,
      payload: { recipient: carol.username, assets: { [gold.name]: 6 } },
    })
    assert.equal(hold.statusCode, 201, hold.body)
    const transfers = [
      { recipient: bob.username, assets: { [gold.name]: 3 } },
      { recipient: bob.username, assets: { [gold.name]: 2 } },
    ]
    await refusedUnchanged(() => sendBatch(payer, { transfers }), 400, 'I002', /^transfers\[1\]: wallet holds 7 of \S+ of which 6 held/)
    const each = await sendBatch(payer, { atomic: false, transfers })
    assert.equal(each.statusCode, 200, each.body)
    assert.deepEqual(
      each.json().results.map((result: { status: number; error?: { code: string } }) => [result.status, result.error?.code]),
      [
        [201, undefined],
        [400, 'I002'],
      ],
    )
    const holdings = await t.app.inject({ method: 'GET', url: '/wallet/assets', headers: payer.auth })
    assert.deepEqual(
      holdings.json().map((holding: { quantity: number; held: number }) => [holding.quantity, holding.held]),
      [[7, 6]],
    )
  })
})

describe(`POST /issuances (${STORAGE})`, () => {
  it('issues to every entry, all or nothing, and answers 201 with the transactions in order', async () => {
    const [bob, carol] = [await createUser(t.app), await createUser(t.app)]
    const response = await issueMany({
      asset_id: gold.id,
      memo: 'airdrop',
      metadata: { campaign: 'launch' },
      entries: [
        { wallet_id: bob.walletId, quantity: 5 },
        { wallet_id: carol.walletId, quantity: 7 },
        { wallet_id: bob.walletId, quantity: 1 },
      ],
    })
    assert.equal(response.statusCode, 201, response.body)
    const { transactions } = response.json() as { transactions: Transaction[] }
    assert.deepEqual(
      transactions.map((tx) => [tx.sending_wallet_id, tx.receiving_wallet_id, tx.memo, tx.assets[0].quantity, tx.assets[0].asset.id]),
      [
        [MINT_WALLET_ID, bob.walletId, 'airdrop', 5, gold.id],
        [MINT_WALLET_ID, carol.walletId, 'airdrop', 7, gold.id],
        [MINT_WALLET_ID, bob.walletId, 'airdrop', 1, gold.id],
      ],
    )
    for (const tx of transactions) assert.deepEqual([tx.kind, tx.metadata], ['issuance', { campaign: 'launch' }])
    assert.deepEqual([await balances(bob), await balances(carol)], [{ [gold.name]: 6 }, { [gold.name]: 7 }])
    const ids = transactions.map((tx) => tx.id)
    assert.deepEqual(await eventsOf(ids), [
      [ids[0], bob.walletId, 'transaction.received'],
      [ids[1], carol.walletId, 'transaction.received'],
      [ids[2], bob.walletId, 'transaction.received'],
    ])
    // Without a memo, the memo of a single issuance.
    const plain = await issueMany({ asset_id: gold.id, entries: [{ wallet_id: bob.walletId, quantity: 1 }] })
    assert.equal(plain.json().transactions[0].memo, 'issue')
  })

  it('issues to 1,000 wallets in one request', async () => {
    const users = await Promise.all(Array.from({ length: 20 }, () => createUser(t.app)))
    const entries = Array.from({ length: 1000 }, (_, i) => ({ wallet_id: users[i % users.length].walletId, quantity: 1 + (i % 3) }))
    const response = await issueMany({ asset_id: silver.id, entries })
    assert.equal(response.statusCode, 201, response.body)
    assert.equal(response.json().transactions.length, 1000)
    const expected = entries.filter((entry) => entry.wallet_id === users[0].walletId).reduce((sum, entry) => sum + entry.quantity, 0)
    assert.deepEqual(await balances(users[0]), { [silver.name]: expected })
  })

  it('refuses with W002 naming the first entry of an unknown, deleted or mint wallet, and issues nothing', async () => {
    const bob = await createUser(t.app)
    const gone = await createUser(t.app)
    const wallet = await t.app.inject({ method: 'POST', url: '/user/wallets', headers: gone.auth, payload: {} })
    const goneWallet = wallet.json().id as number
    await t.app.inject({ method: 'PUT', url: '/user/session/wallet', headers: gone.auth, payload: { wallet_id: goneWallet } })
    const deleted = await t.app.inject({ method: 'DELETE', url: '/wallet', headers: gone.auth })
    assert.equal(deleted.statusCode, 204, deleted.body)
    const ok = { wallet_id: bob.walletId, quantity: 1 }
    await refusedUnchanged(
      () => issueMany({ asset_id: gold.id, entries: [ok, { wallet_id: 999_999_999, quantity: 1 }] }),
      404,
      'W002',
      /^entries\[1\]: no wallet 999999999/,
    )
    await refusedUnchanged(
      () => issueMany({ asset_id: gold.id, entries: [ok, ok, { wallet_id: goneWallet, quantity: 1 }] }),
      404,
      'W002',
      /^entries\[2\]: /,
    )
    await refusedUnchanged(
      () => issueMany({ asset_id: gold.id, entries: [{ wallet_id: MINT_WALLET_ID, quantity: 1 }, ok] }),
      404,
      'W002',
      /^entries\[0\]: /,
    )
    // The asset is no entry's fault: no prefix.
    await refusedUnchanged(() => issueMany({ asset_id: 999_999, entries: [ok] }), 404, 'W002', /^no asset 999999$/)
  })

  it('refuses with I003 naming the entry that would pass 2^53-1, counting the earlier entries, and issues nothing', async () => {
    const [bob, carol] = [await createUser(t.app), await createUser(t.app)]
    const coin = await createAsset(t)
    await issue(t, bob.walletId, coin.id, MAX_QUANTITY - 10)
    await refusedUnchanged(
      () =>
        issueMany({
          asset_id: coin.id,
          entries: [
            { wallet_id: carol.walletId, quantity: 3 },
            { wallet_id: bob.walletId, quantity: 6 },
            { wallet_id: bob.walletId, quantity: 5 },
          ],
        }),
      400,
      'I003',
      /^entries\[2\]: /,
    )
    assert.deepEqual(await balances(carol), {})
  })

  it('refuses a malformed body with G000 and changes nothing: 0 or 1,001 entries, a bad entry (named), a long memo', async () => {
    const bob = await createUser(t.app)
    const ok = { wallet_id: bob.walletId, quantity: 1 }
    await refusedUnchanged(() => issueMany({ asset_id: gold.id, entries: [] }), 400, 'G000', /entries/)
    await refusedUnchanged(() => issueMany({ asset_id: gold.id, entries: Array(1001).fill(ok) }), 400, 'G000', /entries/)
    await refusedUnchanged(() => issueMany({ entries: [ok] }), 400, 'G000', /asset_id is required/)
    await refusedUnchanged(
      () => issueMany({ asset_id: gold.id, entries: [ok, { wallet_id: bob.walletId, quantity: 0 }] }),
      400,
      'G000',
      /^entries\[1\]: quantity /,
    )
    await refusedUnchanged(
      () => issueMany({ asset_id: gold.id, entries: [ok, { wallet_id: bob.walletId, quantity: 1.5 }] }),
      400,
      'G000',
      /^entries\[1\]: quantity /,
    )
    await refusedUnchanged(
      () => issueMany({ asset_id: gold.id, entries: [{ quantity: 1 }] }),
      400,
      'G000',
      /^entries\[0\]: wallet_id is required/,
    )
    await refusedUnchanged(() => issueMany({ asset_id: gold.id, entries: [ok], memo: 'm'.repeat(65) }), 400, 'G000', /memo/)
    await refusedUnchanged(() => issueMany({ asset_id: gold.id, entries: [ok], metadata: { 'bad key!': 'x' } }), 400, 'G000', /metadata/)
  })
})
