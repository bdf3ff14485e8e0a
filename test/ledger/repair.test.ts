import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { isDeepStrictEqual } from 'node:util'
import { repairRunningBalances, type RunningBalancesRepair } from '../../src/ledger/repair.ts'
import { verifyLedger } from '../../src/ledger/verify.ts'
import type { Transaction } from '../../src/ledger/ledger.types.ts'
import { buildTestApp, STORAGE, type TestApp } from '../helpers/app.ts'
import { runCoffer } from '../helpers/cli.ts'
import { createAsset, createUser, issue, transfer, type TestUser } from '../helpers/factories.ts'

const MINT_WALLET_ID = 1

interface Ledger {
  t: TestApp
  users: TestUser[]
  alice: TestUser
  bob: TestUser
  carol: TestUser
  gold: number
  silver: number
  /** Every transaction, in order. */
  steps: Transaction[]
}

/** Three wallets, two assets, eight transactions: every holding has a history of a few rows. */
async function buildLedger(): Promise<Ledger> {
  const t = await buildTestApp()
  const [alice, bob, carol] = [await createUser(t.app), await createUser(t.app), await createUser(t.app)]
  const gold = (await createAsset(t, { name: 'gold' })).id
  const silver = (await createAsset(t, { name: 'silver' })).id
  const steps = [
    await issue(t, alice.walletId, gold, 100),
    await issue(t, alice.walletId, silver, 50),
    await transfer(t, alice, bob.username, { gold: 30, silver: 20 }),
    await transfer(t, alice, carol.username, { gold: 10 }),
    await transfer(t, carol, bob.username, { gold: 4 }),
    await transfer(t, bob, alice.username, { silver: 5 }),
    await transfer(t, alice, carol.username, { gold: 6 }),
    await transfer(t, carol, alice.username, { gold: 1 }),
  ]
  return { t, users: [alice, bob, carol], alice, bob, carol, gold, silver, steps }
}

/** Every user's holdings (`GET /wallet/assets?as_of=…`) at every transaction's instant. */
async function balancesInTime({ t, users, steps }: Ledger): Promise<Record<string, number>[][]> {
  const instants = steps.map((step) => step.created_at)
  return Promise.all(
    users.map((user) =>
      Promise.all(
        instants.map(async (instant) => {
          const response = await t.app.inject({
            method: 'GET',
            url: `/wallet/assets?as_of=${encodeURIComponent(instant)}`,
            headers: user.auth,
          })
          assert.equal(response.statusCode, 200, response.body)
          const holdings = response.json() as { asset: { name: string }; quantity: number }[]
          return Object.fromEntries(holdings.map((holding) => [holding.asset.name, holding.quantity]))
        }),
      ),
    ),
  )
}

function runningBalance(ledger: Ledger, walletId: number, assetId: number, step: number) {
  return ledger.t.database.db
    .updateTable('running_balances')
    .where('wallet_id', '=', walletId)
    .where('asset_id', '=', assetId)
    .where('transaction_id', '=', ledger.steps[step].id)
}

/**
 * Writes running balances wrong as the PostgreSQL race once did (counted from zero) and as damage
 * might: a row in the middle of a history, a holding's last row, mint's, a missing row and a row
 * that no line gives, over several wallets and assets. Returns what a repair must report.
 */
async function corrupt(ledger: Ledger): Promise<RunningBalancesRepair> {
  const { t, alice, bob, carol, gold, silver, steps } = ledger
  const db = t.database.db
  // Alice's first gold (100, then 70, 60, 54, 55): counted from zero, it reads 0.
  await runningBalance(ledger, alice.walletId, gold, 0).set({ quantity: 0 }).execute()
  // Bob's last silver (20, then 15).
  await runningBalance(ledger, bob.walletId, silver, 5).set({ quantity: 999 }).execute()
  // Mint's only gold row (-100).
  await runningBalance(ledger, MINT_WALLET_ID, gold, 0).set({ quantity: -1 }).execute()
  // Carol's gold after she sent 4 (10, then 6, 12, 11): gone.
  await db
    .deleteFrom('running_balances')
    .where('wallet_id', '=', carol.walletId)
    .where('asset_id', '=', gold)
    .where('transaction_id', '=', steps[4].id)
    .execute()
  // Bob had no part in alice's transfer to carol, yet a row says he then held 77 gold.
  await db
    .insertInto('running_balances')
    .values({ wallet_id: bob.walletId, asset_id: gold, created_at: steps[3].created_at, transaction_id: steps[3].id, quantity: 77 })
    .execute()
  const named = [
    { wallet_id: MINT_WALLET_ID, asset_id: gold, rewritten: 1, added: 0, removed: 0 },
    { wallet_id: alice.walletId, asset_id: gold, rewritten: 1, added: 0, removed: 0 },
    { wallet_id: bob.walletId, asset_id: gold, rewritten: 0, added: 0, removed: 1 },
    { wallet_id: bob.walletId, asset_id: silver, rewritten: 1, added: 0, removed: 0 },
    { wallet_id: carol.walletId, asset_id: gold, rewritten: 0, added: 1, removed: 0 },
  ].sort((a, b) => a.wallet_id - b.wallet_id || a.asset_id - b.asset_id)
  return { rewritten: 3, added: 1, removed: 1, holdings: 5, named }
}

async function allRunningBalances(t: TestApp) {
  const rows = await t.database.db
    .selectFrom('running_balances')
    .selectAll()
    .orderBy('wallet_id')
    .orderBy('asset_id')
    .orderBy('transaction_id')
    .execute()
  return rows.map((row) => ({
    ...row,
    wallet_id: Number(row.wallet_id),
    asset_id: Number(row.asset_id),
    transaction_id: Number(row.transaction_id),
    quantity: Number(row.quantity),
  }))
}

describe('repairRunningBalances (coffer verify --repair)', () => {
  it('rewrites, adds and removes exactly the running balances the journal does not give; balances in time are right again', async () => {
    const ledger = await buildLedger()
    const { t } = ledger
    try {
      const right = await balancesInTime(ledger)
      const rows = await allRunningBalances(t)
      const holdings = await t.database.db.selectFrom('holdings').selectAll().orderBy('wallet_id').orderBy('asset_id').execute()
      const expected = await corrupt(ledger)
      assert.notDeepEqual(await balancesInTime(ledger), right, 'the damage shows in balances in time')
      const before = await verifyLedger(t.database.db)
      assert.equal(before.ok, false)
      assert.equal(before.wrongRunningBalances, 5, before.problems.join('\n'))
      assert.ok(
        before.problems.includes(
          `transaction ${ledger.steps[3].id}'s running balance of wallet ${ledger.bob.walletId} in asset ${ledger.gold} says 77, but no line of the journal gives it`,
        ),
        before.problems.join('\n'),
      )
      assert.ok(
        before.problems.includes(
          `transaction ${ledger.steps[4].id} has no running balance of wallet ${ledger.carol.walletId} in asset ${ledger.gold} (the journal says 6)`,
        ),
        before.problems.join('\n'),
      )

      const progress: [number, number][] = []
      assert.deepEqual(await repairRunningBalances(t.database.db, (done, total) => progress.push([done, total])), expected)
      assert.ok(progress.length > 0 && progress.at(-1)?.[0] === progress.at(-1)?.[1], 'progress reaches the total')
      const after = await verifyLedger(t.database.db)
      assert.deepEqual(after.problems, [])
      assert.equal(after.wrongRunningBalances, 0)
      assert.deepEqual(await balancesInTime(ledger), right)
      assert.deepEqual(await allRunningBalances(t), rows, 'every row as the write path wrote it')
      assert.deepEqual(
        await t.database.db.selectFrom('holdings').selectAll().orderBy('wallet_id').orderBy('asset_id').execute(),
        holdings,
        'holdings untouched',
      )

      // A second run finds nothing and changes nothing.
      assert.deepEqual(await repairRunningBalances(t.database.db), { rewritten: 0, added: 0, removed: 0, holdings: 0, named: [] })
      assert.deepEqual(await allRunningBalances(t), rows)
    } finally {
      await t.close()
    }
  })

  it('changes nothing on a sound ledger, nor on an empty one', async () => {
    const empty = await buildTestApp()
    try {
      assert.deepEqual(await repairRunningBalances(empty.database.db), { rewritten: 0, added: 0, removed: 0, holdings: 0, named: [] })
    } finally {
      await empty.close()
    }
    const ledger = await buildLedger()
    try {
      const rows = await allRunningBalances(ledger.t)
      assert.equal((await repairRunningBalances(ledger.t.database.db)).holdings, 0)
      assert.deepEqual(await allRunningBalances(ledger.t), rows)
    } finally {
      await ledger.t.close()
    }
  })

  it('leaves a holding the journal does not give as it is, for verify to name', async () => {
    const ledger = await buildLedger()
    const { t, bob, gold } = ledger
    try {
      const holding = () =>
        t.database.db
          .selectFrom('holdings')
          .select('quantity')
          .where('wallet_id', '=', bob.walletId)
          .where('asset_id', '=', gold)
          .executeTakeFirstOrThrow()
      const { quantity } = await holding()
      await t.database.db
        .updateTable('holdings')
        .set({ quantity: quantity + 3 })
        .where('wallet_id', '=', bob.walletId)
        .where('asset_id', '=', gold)
        .execute()
      await runningBalance(ledger, bob.walletId, gold, 2).set({ quantity: 1 }).execute()
      const repair = await repairRunningBalances(t.database.db)
      assert.deepEqual(repair.named, [{ wallet_id: bob.walletId, asset_id: gold, rewritten: 1, added: 0, removed: 0 }])
      assert.deepEqual(await holding(), { quantity: quantity + 3 })
      const report = await verifyLedger(t.database.db)
      assert.equal(report.wrongRunningBalances, 0)
      assert.ok(
        report.problems.includes(`wallet ${bob.walletId} holds ${quantity + 3} of asset ${gold}, the journal says ${quantity}`),
        report.problems.join('\n'),
      )
      await t.database.db
        .updateTable('holdings')
        .set({ quantity })
        .where('wallet_id', '=', bob.walletId)
        .where('asset_id', '=', gold)
        .execute()
    } finally {
      await t.close()
    }
  })

  it('repairs while transfers commit beside it: it changes only the damaged rows, and verify passes after', async () => {
    const ledger = await buildLedger()
    const { t, alice, bob, carol } = ledger
    try {
      const expected = await corrupt(ledger)
      let sending = true
      let committed = 0
      const send = async (from: TestUser, to: TestUser) => {
        const response = await t.app.inject({
          method: 'POST',
          url: '/wallet/transactions',
          headers: from.auth,
          payload: { recipient: to.username, assets: { gold: 1 } },
        })
        assert.equal(response.statusCode, 201, response.body)
        committed += 1
      }
      const traffic = (async () => {
        // Every wallet sends and receives, several at once: each commit writes running balances.
        for (let round = 0; sending; round++) {
          const [x, y] = round % 2 === 0 ? [alice, bob] : [bob, alice]
          await Promise.all([send(x, y), send(x, y), send(alice, carol), send(carol, bob)])
        }
      })()
      const runs: RunningBalancesRepair[] = []
      try {
        while (committed < 4) await new Promise((resolve) => setTimeout(resolve, 5))
        for (let run = 0; run < 6; run++) runs.push(await repairRunningBalances(t.database.db))
      } finally {
        sending = false
        await traffic
      }
      assert.ok(committed >= 8, `transfers committed meanwhile (${committed})`)
      assert.deepEqual(runs[0], expected, 'the first run changes exactly the damaged rows')
      for (const run of runs.slice(1))
        assert.equal(run.holdings, 0, 'later runs find nothing: the rows transfers wrote meanwhile are right')
      const report = await verifyLedger(t.database.db)
      assert.deepEqual(report.problems, [])
    } finally {
      await t.close()
    }
  })

  it('run twice at once, changes each row once: one run repairs, the other finds nothing', async () => {
    const ledger = await buildLedger()
    try {
      const rows = await allRunningBalances(ledger.t)
      const expected = await corrupt(ledger)
      const runs = await Promise.all([repairRunningBalances(ledger.t.database.db), repairRunningBalances(ledger.t.database.db)])
      const empty = { rewritten: 0, added: 0, removed: 0, holdings: 0, named: [] }
      assert.ok(
        (isDeepStrictEqual(runs[0], expected) && isDeepStrictEqual(runs[1], empty)) ||
          (isDeepStrictEqual(runs[0], empty) && isDeepStrictEqual(runs[1], expected)),
        JSON.stringify(runs),
      )
      assert.deepEqual(await allRunningBalances(ledger.t), rows)
      assert.deepEqual((await verifyLedger(ledger.t.database.db)).problems, [])
    } finally {
      await ledger.t.close()
    }
  })
})

describe(`coffer verify --repair (${STORAGE})`, () => {
  it('says what it changed, then verifies; a second run changes nothing; a holding still wrong fails it', async () => {
    const ledger = await buildLedger()
    const { t, alice, bob, gold, silver } = ledger
    const env = { DATA_DIR: t.config.dataDir, DATABASE_URL: t.config.databaseUrl ?? '', ADMIN_API_KEY: '' }
    try {
      await runningBalance(ledger, alice.walletId, gold, 2).set({ quantity: 3 }).execute()
      await runningBalance(ledger, bob.walletId, silver, 2).set({ quantity: 2 }).execute()
      const found = await runCoffer(env, 'verify')
      assert.equal(found.code, 1, found.stdout)
      assert.match(
        found.stdout,
        new RegExp(
          `transaction ${ledger.steps[2].id}'s running balance of wallet ${alice.walletId} in asset ${gold} says 3, the journal says 70`,
        ),
      )
      assert.match(found.stdout, /rewritten from it by `coffer verify --repair`/)

      const repaired = await runCoffer(env, 'verify', '--repair')
      assert.equal(repaired.code, 0, repaired.stdout + repaired.stderr)
      assert.match(repaired.stdout, /^repair: 2 running balances of 2 holdings changed in [\d.]+ s \(2 rewritten, 0 added, 0 removed\):$/m)
      assert.match(repaired.stdout, new RegExp(`^  - wallet ${alice.walletId}, asset ${gold}: 1 rewritten, 0 added, 0 removed$`, 'm'))
      assert.match(repaired.stdout, new RegExp(`^  - wallet ${bob.walletId}, asset ${silver}: 1 rewritten, 0 added, 0 removed$`, 'm'))
      assert.match(repaired.stdout, /ledger OK/)
      assert.deepEqual((await verifyLedger(t.database.db)).problems, [])

      const again = await runCoffer(env, 'verify', '--repair')
      assert.equal(again.code, 0, again.stdout)
      assert.match(again.stdout, /^repair: every running balance is what the journal gives, nothing changed/m)
      assert.match(again.stdout, /ledger OK/)

      // A holding the journal does not give is named, never rewritten: the exit status says so.
      await t.database.db
        .updateTable('holdings')
        .set((eb) => ({ quantity: eb('quantity', '+', 1) }))
        .where('wallet_id', '=', bob.walletId)
        .where('asset_id', '=', gold)
        .execute()
      const still = await runCoffer(env, 'verify', '--repair')
      assert.equal(still.code, 1, still.stdout)
      assert.match(still.stdout, /nothing changed/)
      assert.match(still.stdout, new RegExp(`wallet ${bob.walletId} holds \\d+ of asset ${gold}, the journal says`))
      assert.match(still.stdout, /the journal, holdings and holds are never changed/)
      await t.database.db
        .updateTable('holdings')
        .set((eb) => ({ quantity: eb('quantity', '-', 1) }))
        .where('wallet_id', '=', bob.walletId)
        .where('asset_id', '=', gold)
        .execute()

      const help = await runCoffer(env, 'help')
      assert.match(help.stdout, /verify --repair/)
    } finally {
      await t.close()
    }
  })
})
