import assert from 'node:assert/strict'
import fs from 'node:fs'
import { describe, it } from 'node:test'
import { inTransaction } from '../../src/db/dialect.ts'
import { createOutbox } from '../../src/events/outbox.ts'
import { createAssetsService } from '../../src/ledger/assets.service.ts'
import { applyMoves, type Move } from '../../src/ledger/moves.ts'
import { verifyLedger } from '../../src/ledger/verify.ts'
import { buildTestApp, STORAGE, type TestApp } from '../helpers/app.ts'
import { createAsset, createUser, issue, sendTransaction, transfer, type TestUser } from '../helpers/factories.ts'

const MINT_WALLET_ID = 1

interface Ledger {
  t: TestApp
  alice: TestUser
  bob: TestUser
  gold: number
  silver: number
  transactions: number
}

/** A ledger with issuance, multi-asset transfers and a burn: 6 transactions. */
async function buildLedger(): Promise<Ledger> {
  const t = await buildTestApp()
  const alice = await createUser(t.app)
  const bob = await createUser(t.app)
  const gold = (await createAsset(t, { name: 'gold' })).id
  const silver = (await createAsset(t, { name: 'silver' })).id
  await issue(t, alice.walletId, gold, 100)
  await issue(t, alice.walletId, silver, 50)
  await transfer(t, alice, bob.username, { gold: 30, silver: 20 })
  await transfer(t, bob, alice.username, { gold: 5 })
  await sendTransaction(t, alice, { recipient: bob.address, type: 1, assets: { silver: 1 } })
  const burned = await t.app.inject({ method: 'DELETE', url: `/wallets/${bob.walletId}/assets/${gold}?quantity=10`, headers: t.admin })
  assert.equal(burned.statusCode, 204, burned.body)
  return { t, alice, bob, gold, silver, transactions: 6 }
}

/** Closes a ledger that was corrupted on purpose, without the helper's own verification. */
async function discard(ledger: Ledger): Promise<void> {
  await ledger.t.app.close()
  await ledger.t.database.close()
  fs.rmSync(ledger.t.config.dataDir, { recursive: true, force: true })
}

async function corrupt(ledger: Ledger, change: (ledger: Ledger) => Promise<void>): Promise<string[]> {
  const before = await verifyLedger(ledger.t.database.db)
  assert.equal(before.ok, true, before.problems.join('\n'))
  await change(ledger)
  const after = await verifyLedger(ledger.t.database.db)
  assert.equal(after.ok, false, 'the corruption is found')
  assert.ok(after.problems.length > 0)
  return after.problems
}

describe('verifyLedger', () => {
  it('passes after activity and counts what it checked', async () => {
    const ledger = await buildLedger()
    try {
      const calls: [number, number][] = []
      const report = await verifyLedger(ledger.t.database.db, (done, total) => calls.push([done, total]))
      assert.deepEqual(report.problems, [])
      assert.equal(report.ok, true)
      assert.equal(report.transactions, ledger.transactions)
      assert.equal(report.assets, 2)
      // An asset nobody holds exists all the same, and is counted.
      const created = await ledger.t.app.inject({
        method: 'POST',
        url: '/assets',
        headers: ledger.t.admin,
        payload: { name: 'unheld', value: 1 },
      })
      assert.equal(created.statusCode, 201, created.body)
      assert.equal((await verifyLedger(ledger.t.database.db)).assets, 3)
      assert.ok(report.holdings >= 4, 'alice, bob and mint hold gold and silver')
      assert.deepEqual(calls.at(-1), [ledger.transactions, ledger.transactions], 'progress reaches the total')
    } finally {
      await ledger.t.close()
    }
  })

  it('passes while transfers commit beside it: everything it reads is one snapshot', async () => {
    const ledger = await buildLedger()
    const { t, alice, bob } = ledger
    try {
      let sending = true
      const transfer = (from: TestUser, to: TestUser) =>
        t.app.inject({
          method: 'POST',
          url: '/wallet/transactions',
          headers: from.auth,
          payload: { recipient: to.username, assets: { gold: 1 } },
        })
      const traffic = (async () => {
        // Back and forth, a few at a time: every commit changes both holdings.
        for (let round = 0; sending; round++) {
          const [from, to] = round % 2 === 0 ? [alice, bob] : [bob, alice]
          for (const response of await Promise.all([transfer(from, to), transfer(from, to)]))
            assert.equal(response.statusCode, 201, response.body)
        }
      })()
      try {
        for (let run = 0; run < 40; run++) {
          const report = await verifyLedger(t.database.db)
          assert.deepEqual(report.problems, [], `run ${run}`)
        }
      } finally {
        sending = false
        await traffic
      }
    } finally {
      await t.close()
    }
  })

  it('passes on an empty ledger', async () => {
    const t = await buildTestApp()
    try {
      const report = await verifyLedger(t.database.db)
      assert.equal(report.ok, true)
      assert.equal(report.transactions, 0)
    } finally {
      await t.close()
    }
  })

  it('reports a holding changed behind the journal’s back', async () => {
    const ledger = await buildLedger()
    try {
      const problems = await corrupt(ledger, async ({ t, bob, gold }) => {
        await t.database.db
          .updateTable('holdings')
          .set({ quantity: 999 })
          .where('wallet_id', '=', bob.walletId)
          .where('asset_id', '=', gold)
          .execute()
      })
      // bob: 30 received, 5 sent back, 10 burned.
      assert.ok(
        problems.some(
          (problem) => problem.includes(`wallet ${ledger.bob.walletId} holds 999 of asset ${ledger.gold}`) && problem.includes('15'),
        ),
        problems.join('\n'),
      )
      assert.ok(
        problems.some((problem) => problem.includes(`asset ${ledger.gold} sums to`)),
        problems.join('\n'),
      )
      assert.ok(!problems.some((problem) => problem.includes(`asset ${ledger.silver} `)), 'silver is fine')
    } finally {
      await discard(ledger)
    }
  })

  it('reports a negative holding outside mint that no transaction made', async () => {
    const ledger = await buildLedger()
    try {
      const problems = await corrupt(ledger, async ({ t, alice, silver }) => {
        await t.database.db
          .updateTable('holdings')
          .set({ quantity: -4 })
          .where('wallet_id', '=', alice.walletId)
          .where('asset_id', '=', silver)
          .execute()
      })
      assert.ok(
        problems.some((problem) => problem.includes(`wallet ${ledger.alice.walletId} holds -4`) && problem.includes('the journal says')),
        problems.join('\n'),
      )
    } finally {
      await discard(ledger)
    }
  })

  it('reports an asset that no longer sums to zero with mint', async () => {
    const ledger = await buildLedger()
    try {
      const problems = await corrupt(ledger, async ({ t, silver }) => {
        await t.database.db
          .updateTable('holdings')
          .set((eb) => ({ quantity: eb('quantity', '+', 7) }))
          .where('wallet_id', '=', MINT_WALLET_ID)
          .where('asset_id', '=', silver)
          .execute()
      })
      assert.ok(
        problems.some((problem) => problem.includes(`asset ${ledger.silver} sums to 7`)),
        problems.join('\n'),
      )
      assert.ok(!problems.some((problem) => problem.includes(`asset ${ledger.gold} `)), 'gold is fine')
    } finally {
      await discard(ledger)
    }
  })

  it('reports units that appeared without a transaction', async () => {
    const ledger = await buildLedger()
    try {
      const carol = await createUser(ledger.t.app)
      const problems = await corrupt(ledger, async ({ t, gold }) => {
        await t.database.db.insertInto('holdings').values({ wallet_id: carol.walletId, asset_id: gold, quantity: 12 }).execute()
      })
      assert.ok(
        problems.some((problem) => problem.includes(`wallet ${carol.walletId} holds 12`) && problem.includes('journal says 0')),
        problems.join('\n'),
      )
      assert.ok(problems.some((problem) => problem.includes(`asset ${ledger.gold} sums to 12`)))
    } finally {
      await discard(ledger)
    }
  })

  it('reports a running balance (balances in time) that is not the holding', async () => {
    const ledger = await buildLedger()
    try {
      const problems = await corrupt(ledger, async ({ t, gold }) => {
        await t.database.db
          .updateTable('running_balances')
          .set((eb) => ({ quantity: eb('quantity', '+', 1) }))
          .where('wallet_id', '=', ledger.alice.walletId)
          .where('asset_id', '=', gold)
          .execute()
      })
      assert.ok(
        problems.some(
          (problem) =>
            problem.includes(`wallet ${ledger.alice.walletId} holds`) &&
            problem.includes(`asset ${ledger.gold}, its last running balance says`),
        ),
        problems.join('\n'),
      )
    } finally {
      await discard(ledger)
    }
  })

  it('passes when the clock stepped back: the last running balance is the last in commit order, not in time', async () => {
    const ledger = await buildLedger()
    try {
      const { t, alice, bob, gold } = ledger
      // A wall clock stepped back an hour before this transfer: a larger id with an earlier created_at.
      const earlier = new Date(Date.now() - 3_600_000).toISOString()
      const asset = await createAssetsService({ db: t.database.db }).findLiveAssetById(gold)
      assert.ok(asset)
      const move: Move = { from: alice.walletId, to: bob.walletId, lines: [{ asset, quantity: 7 }], memo: '', kind: 'transfer' }
      const [outcome] = await inTransaction(t.database, (trx) => applyMoves(trx, [move], createOutbox(), () => earlier))
      assert.equal(outcome.ok, true, String(!outcome.ok && outcome.error))
      const report = await verifyLedger(t.database.db)
      assert.deepEqual(report.problems, [])
    } finally {
      await ledger.t.close()
    }
  })

  it("reports a running balance in the middle of a holding's history that the journal does not give, though the last one is right", async () => {
    const ledger = await buildLedger()
    try {
      const first = await ledger.t.database.db
        .selectFrom('running_balances')
        .select(['transaction_id', 'quantity'])
        .where('wallet_id', '=', ledger.alice.walletId)
        .where('asset_id', '=', ledger.gold)
        .orderBy('transaction_id')
        .executeTakeFirstOrThrow()
      const rows = await ledger.t.database.db
        .selectFrom('running_balances')
        .select('transaction_id')
        .where('wallet_id', '=', ledger.alice.walletId)
        .where('asset_id', '=', ledger.gold)
        .execute()
      assert.ok(rows.length > 1, 'alice has more than one running balance of gold')
      const problems = await corrupt(ledger, async ({ t, gold }) => {
        await t.database.db
          .updateTable('running_balances')
          .set((eb) => ({ quantity: eb('quantity', '+', 1) }))
          .where('wallet_id', '=', ledger.alice.walletId)
          .where('asset_id', '=', gold)
          .where('transaction_id', '=', first.transaction_id)
          .execute()
      })
      assert.deepEqual(problems, [
        `transaction ${first.transaction_id}'s running balance of wallet ${ledger.alice.walletId} in asset ${ledger.gold} says ${Number(first.quantity) + 1}, the journal says ${first.quantity}`,
      ])
    } finally {
      await discard(ledger)
    }
  })

  it('reports a running balance missing for a side, and one that no line gives', async () => {
    const ledger = await buildLedger()
    try {
      const { t, alice, gold } = ledger
      const last = await t.database.db
        .selectFrom('running_balances')
        .selectAll()
        .where('wallet_id', '=', alice.walletId)
        .where('asset_id', '=', gold)
        .orderBy('transaction_id', 'desc')
        .executeTakeFirstOrThrow()
      const problems = await corrupt(ledger, async () => {
        const db = t.database.db
        await db
          .deleteFrom('running_balances')
          .where('wallet_id', '=', last.wallet_id)
          .where('asset_id', '=', last.asset_id)
          .where('transaction_id', '=', last.transaction_id)
          .execute()
        // Every side still finds its row and the last one is the holding: only the count tells this row apart.
        await db
          .insertInto('running_balances')
          .values({ ...last, created_at: '2000-01-01T00:00:00.000Z', transaction_id: 0 })
          .execute()
        await db.insertInto('running_balances').values(last).execute()
      })
      assert.deepEqual(problems, [
        `transaction 0's running balance of wallet ${alice.walletId} in asset ${gold} says ${last.quantity}, but no line of the journal gives it`,
      ])
      await t.database.db.deleteFrom('running_balances').where('transaction_id', '=', 0).execute()
      const missing = await corrupt(ledger, async () => {
        await t.database.db
          .deleteFrom('running_balances')
          .where('wallet_id', '=', last.wallet_id)
          .where('asset_id', '=', last.asset_id)
          .where('transaction_id', '=', last.transaction_id)
          .execute()
      })
      assert.ok(
        missing.includes(
          `transaction ${last.transaction_id} has no running balance of wallet ${alice.walletId} in asset ${gold} (the journal says ${last.quantity})`,
        ),
        missing.join('\n'),
      )
    } finally {
      await discard(ledger)
    }
  })

  it('reports a running balance moved to another time, and two that swapped quantities', async () => {
    const ledger = await buildLedger()
    try {
      const { t, alice, bob, gold } = ledger
      const first = await t.database.db
        .selectFrom('running_balances')
        .selectAll()
        .where('wallet_id', '=', alice.walletId)
        .where('asset_id', '=', gold)
        .orderBy('transaction_id')
        .executeTakeFirstOrThrow()
      // The same wallet, asset, transaction and quantity: only `created_at` is not the transaction's.
      const moved = await corrupt(ledger, async () => {
        await t.database.db
          .updateTable('running_balances')
          .set({ created_at: '2000-01-01T00:00:00.000Z' })
          .where('wallet_id', '=', first.wallet_id)
          .where('asset_id', '=', first.asset_id)
          .where('transaction_id', '=', first.transaction_id)
          .execute()
      })
      assert.deepEqual(moved, [
        `transaction ${first.transaction_id} has no running balance of wallet ${alice.walletId} in asset ${gold} (the journal says ${first.quantity})`,
        `transaction ${first.transaction_id}'s running balance of wallet ${alice.walletId} in asset ${gold} says ${first.quantity}, ` +
          'but no line of the journal gives it',
      ])
      await t.database.db
        .updateTable('running_balances')
        .set({ created_at: first.created_at })
        .where('wallet_id', '=', first.wallet_id)
        .where('asset_id', '=', first.asset_id)
        .where('transaction_id', '=', first.transaction_id)
        .execute()
      // Alice's first and Bob's first running balance of gold trade quantities: the sums over all rows stay the same.
      const bobs = await t.database.db
        .selectFrom('running_balances')
        .selectAll()
        .where('wallet_id', '=', bob.walletId)
        .where('asset_id', '=', gold)
        .orderBy('transaction_id')
        .executeTakeFirstOrThrow()
      const swapped = await corrupt(ledger, async () => {
        for (const [row, quantity] of [
          [first, bobs.quantity],
          [bobs, first.quantity],
        ] as const)
          await t.database.db
            .updateTable('running_balances')
            .set({ quantity })
            .where('wallet_id', '=', row.wallet_id)
            .where('asset_id', '=', row.asset_id)
            .where('transaction_id', '=', row.transaction_id)
            .execute()
      })
      for (const [row, says] of [
        [first, bobs.quantity],
        [bobs, first.quantity],
      ] as const)
        assert.ok(
          swapped.includes(
            `transaction ${row.transaction_id}'s running balance of wallet ${row.wallet_id} in asset ${gold} says ${says}, ` +
              `the journal says ${row.quantity}`,
          ),
          swapped.join('\n'),
        )
    } finally {
      await discard(ledger)
    }
  })

  it('reports a journal line rewritten after the fact', async () => {
    const ledger = await buildLedger()
    try {
      const problems = await corrupt(ledger, async ({ t, gold }) => {
        const first = await t.database.db
          .selectFrom('transaction_assets')
          .select('transaction_id')
          .where('asset_id', '=', gold)
          .orderBy('transaction_id')
          .executeTakeFirstOrThrow()
        await t.database.db
          .updateTable('transaction_assets')
          .set({ quantity: 101 })
          .where('transaction_id', '=', first.transaction_id)
          .where('asset_id', '=', gold)
          .execute()
      })
      assert.ok(
        problems.some((problem) => problem.includes(`wallet ${ledger.alice.walletId} holds`) && problem.includes(`asset ${ledger.gold}`)),
        problems.join('\n'),
      )
    } finally {
      await discard(ledger)
    }
  })

  // SQLite's foreign keys refuse these changes; on PostgreSQL the write path keeps them (migration 0005).
  it(
    'reports journal rows that name a missing wallet, asset or transaction',
    { skip: STORAGE !== 'postgres' && 'PostgreSQL only' },
    async () => {
      const ledger = await buildLedger()
      try {
        const problems = await corrupt(ledger, async ({ t }) => {
          const db = t.database.db
          const last = await db.selectFrom('transactions').select('id').orderBy('id', 'desc').executeTakeFirstOrThrow()
          await db.updateTable('transactions').set({ receiving_wallet_id: 9_999 }).where('id', '=', last.id).execute()
          await db.updateTable('transaction_assets').set({ asset_id: 9_998 }).where('transaction_id', '=', last.id).execute()
          // An event row as written before a transaction's events were derived, naming a transaction that is not there.
          const wallet = await db.selectFrom('wallets').select('id').where('id', '<>', 1).executeTakeFirstOrThrow()
          await db
            .insertInto('events')
            .values({
              id: 1,
              event_id: 'evt_orphan',
              wallet_id: wallet.id,
              type: 'transaction.sent',
              transaction_id: 9_997,
              created_at: '',
            })
            .execute()
        })
        for (const expected of [
          '1 transactions rows name a missing wallets row in receiving_wallet_id',
          '1 transaction_assets rows name a missing assets row in asset_id',
          '1 events rows name a missing transactions row in transaction_id',
        ]) {
          assert.ok(problems.includes(expected), `${expected}\n${problems.join('\n')}`)
        }
      } finally {
        await discard(ledger)
      }
    },
  )
})
