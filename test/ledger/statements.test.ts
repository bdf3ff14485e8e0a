import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { sql } from 'kysely'
import { migrateTo, migrateToLatest, MIGRATION_NAMES } from '../../src/db/migrate.ts'
import { createHistoryService } from '../../src/ledger/history.service.ts'
import { PageCache } from '../../src/ledger/page-cache.ts'
import type { Asset, Transaction } from '../../src/ledger/ledger.types.ts'
import { buildTestApp, expectError, STORAGE, type TestApp } from '../helpers/app.ts'
import { createAsset, createUser, issue, sendTransaction, uniqueName, type TestUser } from '../helpers/factories.ts'

/** Balances in time (`GET /wallet/assets?as_of=…`) and statements (`GET /wallet/transactions?format=csv`). */

let t: TestApp
before(async () => {
  t = await buildTestApp()
})
after(async () => {
  await t.close()
})

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
/** One millisecond before a stored timestamp. */
const justBefore = (stamp: string) => new Date(Date.parse(stamp) - 1).toISOString()

async function holdingsAt(user: TestUser, asOf: string): Promise<Record<string, number>> {
  const response = await t.app.inject({ method: 'GET', url: '/wallet/assets', query: { as_of: asOf }, headers: user.auth })
  assert.equal(response.statusCode, 200, response.body)
  const holdings = response.json() as { asset: Asset; quantity: number }[]
  return Object.fromEntries(holdings.map((holding) => [holding.asset.name, holding.quantity]))
}

describe(`GET /wallet/assets?as_of (${STORAGE})`, () => {
  let gold: Asset
  let silver: Asset
  let alice: TestUser
  let bob: TestUser
  const steps: Transaction[] = []

  before(async () => {
    gold = await createAsset(t, { name: uniqueName('gold') })
    silver = await createAsset(t, { name: uniqueName('silver') })
    alice = await createUser(t.app)
    bob = await createUser(t.app)
    // A pause between steps, so that each has its own millisecond and the one before it is free.
    await pause(3)
    steps.push(await issue(t, alice.walletId, gold.id, 100))
    await pause(3)
    steps.push(await issue(t, alice.walletId, silver.id, 7))
    await pause(3)
    steps.push(await sendTransaction(t, alice, { recipient: bob.username, assets: { [gold.name]: 30, [silver.name]: 7 } }))
    await pause(3)
    steps.push(await sendTransaction(t, bob, { recipient: alice.username, assets: { [gold.name]: 10 } }))
  })

  it('answers [] for an instant before the wallet existed or before its first transaction', async () => {
    assert.deepEqual(await holdingsAt(alice, '2000-01-01T00:00:00.000Z'), {})
    assert.deepEqual(await holdingsAt(alice, justBefore(steps[0].created_at)), {})
  })

  it('answers the holdings as they were between transactions, from both sides', async () => {
    assert.deepEqual(await holdingsAt(alice, steps[0].created_at), { [gold.name]: 100 })
    assert.deepEqual(await holdingsAt(alice, justBefore(steps[2].created_at)), { [gold.name]: 100, [silver.name]: 7 })
    // Silver all sent: a holding of zero is not listed.
    assert.deepEqual(await holdingsAt(alice, steps[2].created_at), { [gold.name]: 70 })
    assert.deepEqual(await holdingsAt(bob, justBefore(steps[2].created_at)), {})
    assert.deepEqual(await holdingsAt(bob, steps[2].created_at), { [gold.name]: 30, [silver.name]: 7 })
    assert.deepEqual(await holdingsAt(bob, steps[3].created_at), { [gold.name]: 20, [silver.name]: 7 })
    assert.deepEqual(await holdingsAt(alice, '9999-12-31T23:59:59.999Z'), { [gold.name]: 80 })
  })

  it('has the shape of the current holdings, ordered by asset name, nothing held', async () => {
    const now = await t.app.inject({ method: 'GET', url: '/wallet/assets', headers: bob.auth })
    const then = await t.app.inject({
      method: 'GET',
      url: `/wallet/assets?as_of=${encodeURIComponent(new Date().toISOString())}`,
      headers: bob.auth,
    })
    assert.equal(then.statusCode, 200)
    const current = now.json() as { asset: Asset; quantity: number; held?: number }[]
    const past = then.json() as { asset: Asset; quantity: number; held?: number }[]
    assert.deepEqual(
      past.map(({ asset, quantity }) => ({ asset, quantity })),
      current.map(({ asset, quantity }) => ({ asset, quantity })),
    )
    for (const holding of past) assert.equal(holding.held, 0)
  })

  it('reads an instant written with an offset as that instant', async () => {
    const stamp = new Date(Date.parse(steps[2].created_at))
    const local = new Date(stamp.getTime() + 2 * 3_600_000).toISOString().replace('Z', '+02:00')
    assert.deepEqual(await holdingsAt(alice, local), { [gold.name]: 70 })
  })

  it('refuses a value that is not a timestamp with 400 G002', async () => {
    for (const value of ['yesterday', '2026-13-01T00:00:00Z', '', '1700000000', '2026-11-21']) {
      expectError(await t.app.inject({ method: 'GET', url: '/wallet/assets', query: { as_of: value }, headers: alice.auth }), 400, 'G002')
    }
  })

  it('migration 0010 fills in for an existing journal exactly the balances the ledger writes', async () => {
    const db = t.database.db
    const read = async () =>
      (
        await sql<
          Record<string, unknown>
        >`select wallet_id, asset_id, created_at, transaction_id, quantity from running_balances order by wallet_id, asset_id, created_at, transaction_id`.execute(
          db,
        )
      ).rows
    const written = await read()
    assert.ok(written.length >= 2 * steps.length)
    const index = MIGRATION_NAMES.indexOf('0010_running_balances')
    await migrateTo(db, MIGRATION_NAMES[index - 1])
    assert.deepEqual(await migrateToLatest(db), MIGRATION_NAMES.slice(index))
    assert.deepEqual(await read(), written)
  })
})

describe(`GET /wallet/transactions?format=csv (${STORAGE})`, () => {
  let gold: Asset
  let dash: Asset
  let alice: TestUser
  let bob: TestUser
  let bobSide: { id: number; address: string }
  const made: Transaction[] = []

  before(async () => {
    gold = await createAsset(t, { name: uniqueName('gold') })
    // An asset name may start with "-": a cell a spreadsheet would read as a formula.
    dash = await createAsset(t, { name: uniqueName('-dash') })
    alice = await createUser(t.app)
    bob = await createUser(t.app)
    const wallet = await t.app.inject({
      method: 'POST',
      url: '/user/wallets',
      headers: bob.auth,
      payload: {
        address:
          uniqueName('side')
            .replace(/[^a-z]/g, '')
            .slice(0, 20) + 'abc',
      },
    })
    assert.equal(wallet.statusCode, 201, wallet.body)
    bobSide = wallet.json()
    made.push(await issue(t, alice.walletId, gold.id, 1000))
    made.push(await issue(t, alice.walletId, dash.id, 50))
    made.push(
      await sendTransaction(t, alice, { recipient: bob.username, memo: 'rent, "march"', assets: { [gold.name]: 30, [dash.name]: 5 } }),
    )
    made.push(await sendTransaction(t, bob, { recipient: alice.username, memo: '=SUM(A1:A9)', assets: { [gold.name]: 10 } }))
    // To a wallet that is nobody's primary wallet: no counterparty username.
    made.push(
      await sendTransaction(t, alice, { recipient: bobSide.address, type: 1, memo: 'line one\nline two', assets: { [gold.name]: 2 } }),
    )
    made.push(
      await sendTransaction(t, alice, {
        recipient: bob.username,
        memo: '@here -1 +1',
        metadata: { note: 'x,"y"', order: '=1' },
        assets: { [gold.name]: 1 },
      }),
    )
  })

  async function statement(user: TestUser, query = '') {
    const response = await t.app.inject({ method: 'GET', url: `/wallet/transactions?format=csv${query}`, headers: user.auth })
    assert.equal(response.statusCode, 200, response.body)
    return response
  }

  it('streams every transaction as RFC 4180 text, byte for byte', async () => {
    const response = await statement(alice)
    assert.equal(response.headers['content-type'], 'text/csv; charset=utf-8')
    assert.match(String(response.headers['content-disposition']), /^attachment; filename="statement-wallet-\d+-\d{4}-\d{2}-\d{2}\.csv"$/)
    const [issued, issuedDash, rent, back, side, here] = made
    const name = (a: Asset) => (a === dash ? `'${dash.name}` : gold.name)
    const expected = [
      'id,created_at,kind,direction,counterparty_wallet_address,counterparty_username,asset,quantity,memo,metadata',
      // Metadata as JSON, quoted because it holds quotes and a comma; it starts with "{", never a formula.
      `${here.id},${here.created_at},transfer,sent,${bob.address},${bob.username},${gold.name},-1,'@here -1 +1,"{""note"":""x,\\""y\\"""",""order"":""=1""}"`,
      `${side.id},${side.created_at},transfer,sent,${bobSide.address},,${gold.name},-2,"line one\nline two",{}`,
      `${back.id},${back.created_at},transfer,received,${bob.address},${bob.username},${gold.name},10,'=SUM(A1:A9),{}`,
      // Lines in the order of the Transaction's assets (by name): "-dash…" before "gold…".
      `${rent.id},${rent.created_at},transfer,sent,${bob.address},${bob.username},${name(dash)},-5,"rent, ""march""",{}`,
      `${rent.id},${rent.created_at},transfer,sent,${bob.address},${bob.username},${gold.name},-30,"rent, ""march""",{}`,
      `${issuedDash.id},${issuedDash.created_at},issuance,received,mint,,${name(dash)},50,issue,{}`,
      `${issued.id},${issued.created_at},issuance,received,mint,,${gold.name},1000,issue,{}`,
    ]
    assert.equal(response.body, expected.map((line) => `${line}\r\n`).join(''))
  })

  it('applies the filters of the history, asset= to the rows too, and ignores paging', async () => {
    const [, , rent, back, side, here] = made
    const ids = (body: string) =>
      body
        .split('\r\n')
        .slice(1, -1)
        .map((line) => Number(line.split(',')[0]))
    assert.deepEqual(ids((await statement(alice, '&direction=received')).body), [back.id, made[1].id, made[0].id])
    assert.deepEqual(ids((await statement(alice, `&asset=${encodeURIComponent(dash.name)}`)).body), [rent.id, made[1].id])
    assert.deepEqual(
      ids(
        (
          await statement(
            alice,
            `&since=${encodeURIComponent(back.created_at)}&until=${encodeURIComponent(side.created_at)}&direction=sent`,
          )
        ).body,
      ),
      [side.id],
    )
    assert.deepEqual(
      ids((await statement(alice, `&limit=1&offset=1&before=${here.id}&after=${rent.id}`)).body),
      [...made].reverse().flatMap((x) => (x === rent ? [x.id, x.id] : [x.id])),
    )
    assert.deepEqual(ids((await statement(alice, '&kind=issuance')).body), [made[1].id, made[0].id])
    assert.deepEqual(ids((await statement(alice, '&metadata[order]=%3D1&kind=transfer')).body), [here.id])
    assert.deepEqual(ids((await statement(alice, '&metadata[order]=other')).body), [])
    assert.equal(
      (await statement(alice, '&asset=nosuchasset')).body,
      'id,created_at,kind,direction,counterparty_wallet_address,counterparty_username,asset,quantity,memo,metadata\r\n',
    )
    // From bob's side: received, signed positive.
    const bobs = (await statement(bob, `&asset=${encodeURIComponent(gold.name)}&direction=received`)).body.split('\r\n')[2]
    assert.equal(
      bobs,
      `${rent.id},${rent.created_at},transfer,received,${alice.address},${alice.username},${gold.name},30,"rent, ""march""",{}`,
    )
  })

  it('refuses bad filters with 400 G002 before sending anything', async () => {
    for (const query of [
      'format=xml',
      'format=csv&since=yesterday',
      'format=csv&direction=up',
      'format=csv&limit=1000',
      'format=csv&kind=gift',
      'format=csv&metadata=x',
    ]) {
      expectError(await t.app.inject({ method: 'GET', url: `/wallet/transactions?${query}`, headers: alice.auth }), 400, 'G002')
    }
  })

  it('reads in bounded keyset chunks, lazily: a transaction committed meanwhile is not half included', async () => {
    const carol = await createUser(t.app)
    await issue(t, carol.walletId, gold.id, 100)
    for (let i = 0; i < 9; i++) await sendTransaction(t, carol, { recipient: alice.username, assets: { [gold.name]: 1 } })
    const chunks: string[] = []
    const history = createHistoryService({ db: t.database.db, pages: new PageCache() })
    const rows = history.exportWalletTransactions(carol.walletId, {}, 3)
    chunks.push((await rows.next()).value as string)
    chunks.push((await rows.next()).value as string)
    // The export has begun: a transfer now is newer than everything it will read.
    await sendTransaction(t, carol, { recipient: alice.username, assets: { [gold.name]: 1 } })
    for await (const chunk of rows) chunks.push(chunk)
    const idsOf = (chunk: string) =>
      chunk
        .split('\r\n')
        .filter(Boolean)
        .map((line) => Number(line.split(',')[0]))
    // The header, then 10 transactions in chunks of at most 3, each chunk one read.
    assert.deepEqual(
      chunks.slice(1).map((chunk) => idsOf(chunk).length),
      [3, 3, 3, 1],
    )
    const all = chunks.slice(1).flatMap(idsOf)
    assert.equal(new Set(all).size, 10)
    assert.deepEqual(
      all,
      [...all].sort((a, b) => b - a),
    )
    const whole = await statement(carol)
    assert.equal(idsOf(whole.body).length - 1, 11)
  })
})
