import assert from 'node:assert/strict'
import fs from 'node:fs'
import { describe, it } from 'node:test'
import { sql } from 'kysely'
import { readEventsAfter } from '../../src/events/events.repository.ts'
import type { Asset, Transaction } from '../../src/ledger/ledger.types.ts'
import { verifyLedger } from '../../src/ledger/verify.ts'
import { buildTestApp, expectError, STORAGE } from '../helpers/app.ts'
import { assertSameTransaction, createAsset, createUser, fundedUser, issue, sendTransaction, type TestUser } from '../helpers/factories.ts'
import { ledgerApp, ledgerState } from '../helpers/ledger-fixture.ts'

/** Refunds (POST /wallet/transactions/{id}/refund) and the operator's reversals (POST /transactions/{id}/reversal). */

const MINT_WALLET_ID = 1

const { t, gold, silver } = await ledgerApp({
  atEnd: async (app) => assert.deepEqual((await verifyLedger(app.database.db)).problems, []),
})

function refund(user: TestUser, id: number | string, payload?: unknown, headers: Record<string, string> = {}) {
  return t.app.inject({
    method: 'POST',
    url: `/wallet/transactions/${id}/refund`,
    headers: { ...user.auth, ...headers },
    ...(payload === undefined ? {} : { payload: payload as object }),
  })
}

function reverse(id: number | string, payload?: unknown, headers: Record<string, string> = {}) {
  return t.app.inject({
    method: 'POST',
    url: `/transactions/${id}/reversal`,
    headers: { ...t.admin, ...headers },
    ...(payload === undefined ? {} : { payload: payload as object }),
  })
}

async function created(response: Promise<{ statusCode: number; body: string; json(): unknown }>): Promise<Transaction> {
  const answer = await response
  assert.equal(answer.statusCode, 201, answer.body)
  return answer.json() as Transaction
}

/** Quantity by asset id of a wallet (mint included), from the holdings table. */
async function holding(walletId: number, asset: Asset): Promise<number> {
  const row = await t.database.db
    .selectFrom('holdings')
    .select('quantity')
    .where('wallet_id', '=', walletId)
    .where('asset_id', '=', asset.id)
    .executeTakeFirst()
  return row === undefined ? 0 : Number(row.quantity)
}

describe('POST /wallet/transactions/{id}/refund', () => {
  it('moves everything back by default, as a reversal naming the original, to the sender', async () => {
    const [alice, bob] = [
      await fundedUser(t, [
        [gold, 10],
        [silver, 10],
      ]),
      await createUser(t.app),
    ]
    const paid = await sendTransaction(t, alice, { recipient: bob.username, memo: 'rent', assets: { [gold.name]: 4, [silver.name]: 2 } })
    const refunded = await created(refund(bob, paid.id))
    assert.equal(refunded.kind, 'reversal')
    assert.equal(refunded.reverses, paid.id)
    assert.equal(refunded.sending_wallet_id, bob.walletId)
    assert.equal(refunded.receiving_wallet_id, alice.walletId)
    assert.equal(refunded.memo, '')
    assert.deepEqual(refunded.metadata, {})
    assert.deepEqual(refunded.assets, paid.assets)
    assert.ok(!('hold_id' in refunded))
    assert.equal(await holding(alice.walletId, gold), 10)
    assert.equal(await holding(bob.walletId, silver), 0)
    // History and the journal show it like any transaction, filterable by kind.
    const [listed] = (
      await t.app.inject({ method: 'GET', url: '/wallet/transactions?kind=reversal', headers: alice.auth })
    ).json() as Transaction[]
    assertSameTransaction(listed, refunded)
    // Nothing is left to refund.
    expectError(await refund(bob, paid.id), 409, 'T001')
    expectError(await refund(bob, paid.id, {}), 409, 'T001')
  })

  it('refunds in parts, each with its memo and metadata, never more than the original moved of each asset', async () => {
    const [alice, bob] = [
      await fundedUser(t, [
        [gold, 10],
        [silver, 10],
      ]),
      await createUser(t.app),
    ]
    const paid = await sendTransaction(t, alice, { recipient: bob.username, assets: { [gold.name]: 5, [silver.name]: 3 } })
    const first = await created(
      refund(bob, paid.id, { assets: { [gold.name.toUpperCase()]: 2 }, memo: 'partial', metadata: { ticket: 'T-9' } }),
    )
    assert.deepEqual(
      first.assets.map((line) => [line.asset.id, line.quantity]),
      [[gold.id, 2]],
    )
    assert.equal(first.memo, 'partial')
    assert.deepEqual(first.metadata, { ticket: 'T-9' })
    const before = await ledgerState(t.database.db)
    expectError(await refund(bob, paid.id, { assets: { [gold.name]: 4 } }), 409, 'T001')
    // An asset the original did not move has nothing left to refund.
    const other = await createAsset(t)
    await issue(t, bob.walletId, other.id, 5)
    const afterIssue = await ledgerState(t.database.db)
    expectError(await refund(bob, paid.id, { assets: { [other.name]: 1 } }), 409, 'T001')
    expectError(await refund(bob, paid.id, { assets: { nosuchasset: 1 } }), 400, 'I001')
    assert.deepEqual(await ledgerState(t.database.db), afterIssue)
    assert.equal(before.transactions + 1, afterIssue.transactions)
    // The rest, by default: 3 gold and 3 silver.
    const rest = await created(refund(bob, paid.id, {}))
    assert.deepEqual(
      rest.assets.map((line) => line.quantity),
      [3, 3].map((quantity) => quantity),
    )
    assert.equal(await holding(alice.walletId, gold), 10)
    assert.equal(await holding(alice.walletId, silver), 10)
  })

  it('checks what is left (T001) before what the wallet holds (I002)', async () => {
    const [alice, bob, carol] = [await fundedUser(t, [[gold, 10]]), await createUser(t.app), await createUser(t.app)]
    const paid = await sendTransaction(t, alice, { recipient: bob.username, assets: { [gold.name]: 5 } })
    await sendTransaction(t, bob, { recipient: carol.username, assets: { [gold.name]: 4 } })
    expectError(await refund(bob, paid.id, { assets: { [gold.name]: 6 } }), 409, 'T001')
    expectError(await refund(bob, paid.id, { assets: { [gold.name]: 3 } }), 400, 'I002')
    expectError(await refund(bob, paid.id), 400, 'I002')
    const one = await created(refund(bob, paid.id, { assets: { [gold.name]: 1 } }))
    assert.equal(one.assets[0].quantity, 1)
  })

  it('refunds a capture, and spends only what is free of the refunding wallet (I002 while the rest is held)', async () => {
    const [alice, bob, carol] = [await fundedUser(t, [[gold, 10]]), await createUser(t.app), await createUser(t.app)]
    const held = await t.app.inject({
      method: 'POST',
      url: '/wallet/holds',
      headers: alice.auth,
      payload: { recipient: bob.username, assets: { [gold.name]: 6 } },
    })
    assert.equal(held.statusCode, 201, held.body)
    const captured = await created(t.app.inject({ method: 'POST', url: `/wallet/holds/${held.json().id}/capture`, headers: alice.auth }))
    assert.equal(captured.kind, 'capture')
    // Bob holds 6 of gold, 5 of them reserved for carol: only 1 is free to refund.
    const reserved = await t.app.inject({
      method: 'POST',
      url: '/wallet/holds',
      headers: bob.auth,
      payload: { recipient: carol.username, assets: { [gold.name]: 5 } },
    })
    assert.equal(reserved.statusCode, 201, reserved.body)
    expectError(await refund(bob, captured.id, { assets: { [gold.name]: 2 } }), 400, 'I002')
    expectError(await refund(bob, captured.id, { assets: { [gold.name]: 7 } }), 409, 'T001')
    const one = await created(refund(bob, captured.id, { assets: { [gold.name]: 1 } }))
    assert.deepEqual([one.kind, one.reverses, one.receiving_wallet_id], ['reversal', captured.id, alice.walletId])
    assert.equal(await holding(bob.walletId, gold), 5)
  })

  it('answers T000 for what the wallet did not receive, and for kinds other than transfer and capture', async () => {
    const [alice, bob] = [await fundedUser(t, [[gold, 10]]), await createUser(t.app)]
    const paid = await sendTransaction(t, alice, { recipient: bob.username, assets: { [gold.name]: 5 } })
    const issued = await issue(t, bob.walletId, gold.id, 1)
    const refunded = await created(refund(bob, paid.id, { assets: { [gold.name]: 1 } }))
    const before = await ledgerState(t.database.db)
    expectError(await refund(alice, paid.id), 404, 'T000')
    expectError(await refund(bob, issued.id), 404, 'T000')
    expectError(await refund(alice, refunded.id), 404, 'T000')
    expectError(await refund(bob, 987654321), 404, 'T000')
    // A wallet key of another wallet, and another user's active wallet.
    const carol = await createUser(t.app)
    expectError(await refund(carol, paid.id), 404, 'T000')
    assert.deepEqual(await ledgerState(t.database.db), before)
  })

  it("answers W000 when the sender's wallet has been deleted", async () => {
    const [owner, bob] = [await createUser(t.app), await createUser(t.app)]
    const spare = (await t.app.inject({ method: 'POST', url: '/user/wallets', headers: owner.auth, payload: {} })).json() as { id: number }
    await issue(t, spare.id, gold.id, 3)
    assert.equal(
      (await t.app.inject({ method: 'PUT', url: '/user/session/wallet', headers: owner.auth, payload: { wallet_id: spare.id } }))
        .statusCode,
      200,
    )
    const paid = await sendTransaction(t, owner, { recipient: bob.username, assets: { [gold.name]: 2 } })
    assert.equal((await t.app.inject({ method: 'DELETE', url: '/wallet', headers: owner.auth })).statusCode, 204)
    const before = await ledgerState(t.database.db)
    expectError(await refund(bob, paid.id), 404, 'W000')
    expectError(await reverse(paid.id), 404, 'W000')
    assert.deepEqual(await ledgerState(t.database.db), before)
  })

  it('refuses bad bodies and ids with G000 / G001, and changes nothing', async () => {
    const [alice, bob] = [await fundedUser(t, [[gold, 10]]), await createUser(t.app)]
    const paid = await sendTransaction(t, alice, { recipient: bob.username, assets: { [gold.name]: 5 } })
    const before = await ledgerState(t.database.db)
    for (const body of [
      { memo: 'x'.repeat(65) },
      { memo: 5 },
      { assets: {} },
      { assets: { [gold.name]: 0 } },
      { assets: { [gold.name]: -1 } },
      { assets: { [gold.name]: 1.5 } },
      { assets: { [gold.name]: '1' } },
      { assets: { [gold.name]: Number.MAX_SAFE_INTEGER + 1 } },
      { assets: [1] },
      { metadata: { ['k'.repeat(41)]: 'v' } },
      { metadata: { k: 1 } },
      { metadata: Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`k${i}`, 'v'])) },
    ]) {
      expectError(await refund(bob, paid.id, body), 400, 'G000')
      expectError(await reverse(paid.id, body), 400, 'G000')
    }
    expectError(
      await t.app.inject({
        method: 'POST',
        url: `/wallet/transactions/${paid.id}/refund`,
        headers: { ...bob.auth, 'content-type': 'application/json' },
        payload: '[',
      }),
      400,
      'G000',
    )
    for (const id of ['abc', '0', '-1', '1e3', '99999999999999999']) {
      expectError(await refund(bob, id), 400, 'G001')
      expectError(await reverse(id), 400, 'G001')
    }
    assert.deepEqual(await ledgerState(t.database.db), before)
  })

  it('answers a repeat with an Idempotency-Key from the first response, and a different request under it with G003', async () => {
    const [alice, bob] = [await fundedUser(t, [[gold, 10]]), await createUser(t.app)]
    const paid = await sendTransaction(t, alice, { recipient: bob.username, assets: { [gold.name]: 5 } })
    const key = { 'idempotency-key': 'refund-1' }
    const first = await refund(bob, paid.id, { assets: { [gold.name]: 1 }, metadata: { a: '1' } }, key)
    assert.equal(first.statusCode, 201, first.body)
    const again = await refund(bob, paid.id, { assets: { [gold.name.toUpperCase()]: 1 }, metadata: { a: '1' } }, key)
    assert.equal(again.statusCode, 201)
    assert.equal(again.headers['idempotent-replayed'], 'true')
    assert.deepEqual(again.json(), first.json())
    expectError(await refund(bob, paid.id, { assets: { [gold.name]: 2 } }, key), 409, 'G003')
    expectError(await refund(bob, paid.id, { assets: { [gold.name]: 1 }, metadata: { a: '2' } }, key), 409, 'G003')
    // A transfer under a refund's key is a different request too.
    expectError(
      await t.app.inject({
        method: 'POST',
        url: '/wallet/transactions',
        headers: { ...bob.auth, ...key },
        payload: { recipient: alice.username, assets: { [gold.name]: 1 } },
      }),
      409,
      'G003',
    )
    assert.equal(await holding(bob.walletId, gold), 4)
    // The operator's keys are their own: the same key reverses once.
    const reversal = await reverse(paid.id, { assets: { [gold.name]: 1 } }, key)
    assert.equal(reversal.statusCode, 201, reversal.body)
    const repeated = await reverse(paid.id, { assets: { [gold.name]: 1 } }, key)
    assert.equal(repeated.headers['idempotent-replayed'], 'true')
    assert.deepEqual(repeated.json(), reversal.json())
    assert.equal(await holding(bob.walletId, gold), 3)
  })

  it('records the events of any transaction: sent for the refunding wallet, received for the sender', async () => {
    const [alice, bob] = [await fundedUser(t, [[gold, 10]]), await createUser(t.app)]
    const paid = await sendTransaction(t, alice, { recipient: bob.username, assets: { [gold.name]: 5 } })
    const refunded = await created(refund(bob, paid.id))
    const events = (await readEventsAfter(t.database.db, 0, 100_000)).rows.filter(
      (event) => !event.gap && JSON.parse(event.payload).data.id === refunded.id,
    )
    assert.deepEqual(
      events.map((event) => [event.wallet_id, event.type]),
      [
        [bob.walletId, 'transaction.sent'],
        [alice.walletId, 'transaction.received'],
      ],
    )
    assert.deepEqual(JSON.parse(events[0].payload).data, refunded)
  })
})

describe('POST /transactions/{id}/reversal', () => {
  it('reverses a transfer, an issuance (back to mint) and a burn (out of mint again)', async () => {
    const asset = await createAsset(t)
    const [alice, bob] = [await createUser(t.app), await createUser(t.app)]
    const issued = await issue(t, alice.walletId, asset.id, 10)
    const paid = await sendTransaction(t, alice, { recipient: bob.username, assets: { [asset.name]: 4 } })
    assert.equal(
      (await t.app.inject({ method: 'DELETE', url: `/wallets/${alice.walletId}/assets/${asset.id}?quantity=2`, headers: t.admin }))
        .statusCode,
      204,
    )
    const [burned] = (
      await t.app.inject({ method: 'GET', url: '/wallet/transactions?kind=burn', headers: alice.auth })
    ).json() as Transaction[]

    const transfer = await created(reverse(paid.id, { memo: 'correction' }))
    assert.deepEqual(
      [transfer.kind, transfer.reverses, transfer.sending_wallet_id, transfer.receiving_wallet_id, transfer.memo],
      ['reversal', paid.id, bob.walletId, alice.walletId, 'correction'],
    )
    const unissued = await created(reverse(issued.id, { assets: { [asset.name]: 3 } }))
    assert.deepEqual([unissued.sending_wallet_id, unissued.receiving_wallet_id], [alice.walletId, MINT_WALLET_ID])
    const unburned = await created(reverse(burned.id))
    assert.deepEqual(
      [unburned.sending_wallet_id, unburned.receiving_wallet_id, unburned.assets[0].quantity],
      [MINT_WALLET_ID, alice.walletId, 2],
    )
    // 10 issued, 3 taken back; the burn undone.
    assert.equal(await holding(alice.walletId, asset), 7)
    assert.equal(await holding(MINT_WALLET_ID, asset), -7)
    expectError(await reverse(issued.id, { assets: { [asset.name]: 8 } }), 409, 'T001')
  })

  it('never reverses a reversal (T001), and answers T000 for an unknown transaction', async () => {
    const [alice, bob] = [await fundedUser(t, [[gold, 10]]), await createUser(t.app)]
    const paid = await sendTransaction(t, alice, { recipient: bob.username, assets: { [gold.name]: 5 } })
    const refunded = await created(refund(bob, paid.id, { assets: { [gold.name]: 1 } }))
    const before = await ledgerState(t.database.db)
    expectError(await reverse(refunded.id), 409, 'T001')
    expectError(await reverse(refunded.id, { assets: { [gold.name]: 1 } }), 409, 'T001')
    expectError(await reverse(987654321), 404, 'T000')
    assert.deepEqual(await ledgerState(t.database.db), before)
    // Refunds and reversals of one transaction share what is left of it.
    await created(reverse(paid.id, { assets: { [gold.name]: 3 } }))
    expectError(await refund(bob, paid.id, { assets: { [gold.name]: 2 } }), 409, 'T001')
    await created(refund(bob, paid.id))
    expectError(await reverse(paid.id), 409, 'T001')
  })
})

describe('coffer verify and reversals', () => {
  it(
    'reports a reversal that exceeds its original, or reverses a reversal',
    { skip: STORAGE === 'postgres' && 'the journal rows are written directly: one storage is enough' },
    async () => {
      // A ledger of its own, forged below.
      const own = await buildTestApp()
      try {
        const coin = await createAsset(own)
        const [alice, bob] = [await fundedUser(own, [[coin, 10]]), await createUser(own.app)]
        const paid = await sendTransaction(own, alice, { recipient: bob.username, assets: { [coin.name]: 5 } })
        const refunded = (
          await own.app.inject({
            method: 'POST',
            url: `/wallet/transactions/${paid.id}/refund`,
            headers: bob.auth,
            payload: { assets: { [coin.name]: 1 } },
          })
        ).json() as Transaction
        const db = own.database.db
        assert.deepEqual((await verifyLedger(db)).problems, [])
        // Forged: the refund now claims 6 (more than the 5 moved), and a second reversal reverses the first.
        await sql`update transaction_assets set quantity = 6 where transaction_id = ${refunded.id}`.execute(db)
        const forged = await sql<{ id: number }>`
        insert into transactions (sending_wallet_id, receiving_wallet_id, memo, created_at, kind, reverses)
        values (${alice.walletId}, ${bob.walletId}, '', ${new Date().toISOString()}, 'reversal', ${refunded.id}) returning id`.execute(db)
        await sql`insert into transaction_assets (transaction_id, asset_id, quantity) values (${forged.rows[0].id}, ${coin.id}, 1)`.execute(
          db,
        )
        const problems = (await verifyLedger(db)).problems
        assert.ok(
          problems.some((problem) => problem.includes(`of transaction ${paid.id} move back 6`)),
          problems.join('\n'),
        )
        assert.ok(
          problems.some((problem) => problem.includes(`of transaction ${refunded.id}, itself a reversal`)),
          problems.join('\n'),
        )
      } finally {
        // Discarded without the closing check, which would find the forgery too.
        await own.app.close()
        await own.database.close()
        fs.rmSync(own.config.dataDir, { recursive: true, force: true })
      }
    },
  )
})

describe('refunds under concurrency', () => {
  it('lets racing refunds of one transaction together move back at most what it moved', async () => {
    const [alice, bob] = [await fundedUser(t, [[gold, 20]]), await fundedUser(t, [[gold, 100]])]
    const paid = await sendTransaction(t, alice, { recipient: bob.username, assets: { [gold.name]: 7 } })
    // 12 refunds of 1 and 2 full refunds, all at once, half of them by the operator.
    const requests = [
      ...Array.from({ length: 12 }, (_, i) =>
        i % 2 === 0 ? refund(bob, paid.id, { assets: { [gold.name]: 1 } }) : reverse(paid.id, { assets: { [gold.name]: 1 } }),
      ),
      refund(bob, paid.id),
      reverse(paid.id),
    ]
    const answers = await Promise.all(requests)
    for (const answer of answers)
      assert.ok(answer.statusCode === 201 || (answer.statusCode === 409 && answer.json().code === 'T001'), answer.body)
    const moved = answers
      .filter((answer) => answer.statusCode === 201)
      .reduce((sum, answer) => sum + (answer.json() as Transaction).assets[0].quantity, 0)
    assert.equal(moved, 7)
    assert.equal(await holding(alice.walletId, gold), 20)
    assert.equal(await holding(bob.walletId, gold), 100)
    expectError(await refund(bob, paid.id, { assets: { [gold.name]: 1 } }), 409, 'T001')
  })

  it('races a refund against the receiver spending the same funds: the sums add up', async () => {
    for (let round = 0; round < 3; round++) {
      const [alice, bob, carol] = [await fundedUser(t, [[gold, 10]]), await createUser(t.app), await createUser(t.app)]
      const paid = await sendTransaction(t, alice, { recipient: bob.username, assets: { [gold.name]: 6 } })
      const spend = () =>
        t.app.inject({
          method: 'POST',
          url: '/wallet/transactions',
          headers: bob.auth,
          payload: { recipient: carol.username, assets: { [gold.name]: 2 } },
        })
      const answers = await Promise.all([
        spend(),
        refund(bob, paid.id, { assets: { [gold.name]: 4 } }),
        spend(),
        refund(bob, paid.id, { assets: { [gold.name]: 2 } }),
        spend(),
      ])
      const ok = (answer: { statusCode: number }) => answer.statusCode === 201
      for (const answer of answers) assert.ok(ok(answer) || (answer.statusCode === 400 && answer.json().code === 'I002'), answer.body)
      const spent = [answers[0], answers[2], answers[4]].filter(ok).length * 2
      const refunded = [answers[1], answers[3]]
        .filter(ok)
        .reduce((sum, answer) => sum + (answer.json() as Transaction).assets[0].quantity, 0)
      assert.ok(spent + refunded <= 6, `spent ${spent} and refunded ${refunded} of 6`)
      assert.equal(await holding(bob.walletId, gold), 6 - spent - refunded)
      assert.equal(await holding(carol.walletId, gold), spent)
      assert.equal(await holding(alice.walletId, gold), 4 + refunded)
    }
  })
})
