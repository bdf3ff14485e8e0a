import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, before, describe, it } from 'node:test'
import type { FastifyInstance } from 'fastify'
import { sql } from 'kysely'
import type { Database, Db } from '../../src/db/database.ts'
import { migrateTo, migrateToLatest } from '../../src/db/migrate.ts'
import { createHistoryService } from '../../src/ledger/history.service.ts'
import { PageCache } from '../../src/ledger/page-cache.ts'
import { createBackup } from '../../src/operations/backup.ts'
import { checkBackup, restoreBackup } from '../../src/operations/restore.ts'
import { buildSameStoreApp, buildTestApp, expectError, journalSettled, openTestDatabase, STORAGE, type TestApp } from '../helpers/app.ts'
import { createAsset, createUser, createWalletKey, issue, transfer, uniqueName, type TestUser } from '../helpers/factories.ts'

/**
 * GET /wallet/transactions serves a page it answered before only once the database confirms it is
 * still the page (`history.service.ts` answerWalletTransactions). Each test below caches a page,
 * changes something the page shows, and checks that the next answer is, byte for byte and Link
 * header included, what an instance that never saw the page answers (a second instance on the same
 * store, its cache empty), and that it differs from the page before: a cache that skipped its
 * check would serve the old bytes and fail.
 */

let t: TestApp
let gold: { id: number; name: string }
let silver: { id: number; name: string }
let alice: TestUser
let bob: TestUser
let key: { id: number; auth: Record<string, string> }

/** A second instance on the same store (another process, the CLI). */
const openPeer = () => buildSameStoreApp(t)

const PAGE = '/wallet/transactions?limit=3'

async function page(app: FastifyInstance, url = PAGE, headers = key.auth) {
  // Positions come within a second of commit: pages are compared once the journal has them all.
  await journalSettled(t.database.db)
  const response = await app.inject({ method: 'GET', url, headers })
  assert.equal(response.statusCode, 200, response.body)
  return { body: response.body, link: response.headers.link, type: response.headers['content-type'] }
}

/** What an instance with an empty cache answers now. */
async function freshPage(url = PAGE, headers = key.auth) {
  const peer = await openPeer()
  try {
    return await page(peer.app, url, headers)
  } finally {
    await peer.close()
  }
}

/** The lookups of the page cache by outcome, from /metrics. */
async function lookups(): Promise<Record<string, number>> {
  const text = (await t.app.inject({ method: 'GET', url: '/metrics', headers: t.admin })).body
  const count = (outcome: string) =>
    Number(
      / (\d+)$/.exec(
        text.split('\n').find((line) => line.startsWith(`coffer_history_page_cache_lookups_total{outcome="${outcome}"}`)) ?? ' 0',
      )?.[1],
    )
  // Served: with nothing committed since (unchanged), or once the stamp matched (hit).
  return {
    served: count('unchanged') + count('hit'),
    unchanged: count('unchanged'),
    hit: count('hit'),
    stale: count('stale'),
    miss: count('miss'),
  }
}

/** Caches the page (asked twice, the second a hit), runs `change`, and checks the next answer against a fresh instance's. */
async function expectChangeSeen(change: () => Promise<void>, url = PAGE): Promise<void> {
  await page(t.app, url)
  const before = await lookups()
  const kept = await page(t.app, url)
  assert.equal((await lookups()).served, before.served + 1, 'the page was served from the cache')
  await change()
  const answered = await page(t.app, url)
  assert.deepEqual(answered, await freshPage(url))
  assert.notEqual(answered.body, kept.body, 'the change shows on the page')
  assert.equal((await lookups()).stale, before.stale + 1, 'the kept page was found stale')
}

async function call(method: 'GET' | 'POST' | 'PUT' | 'DELETE', url: string, headers: Record<string, string>, payload?: object) {
  const response = await t.app.inject({ method, url, headers, payload })
  assert.ok(response.statusCode < 300, `${method} ${url}: ${response.statusCode} ${response.body}`)
  return response
}

before(async () => {
  t = await buildTestApp()
  gold = await createAsset(t, { name: uniqueName('gold'), value: 1.5 })
  silver = await createAsset(t, { name: uniqueName('silver'), value: 0.1 })
  alice = await createUser(t.app)
  bob = await createUser(t.app)
  await issue(t, alice.walletId, gold.id, 1000)
  await issue(t, alice.walletId, silver.id, 1000)
  for (let i = 0; i < 4; i++) await transfer(t, alice, bob.username, { [gold.name]: 1 + i, [silver.name]: 2 })
  key = await createWalletKey(t, alice.auth)
})

after(async () => {
  await t?.close()
})

describe(`history pages from the checked cache (${STORAGE})`, () => {
  it('serves a kept page as it was built: the same bytes, content type and Link header', async () => {
    const first = await page(t.app)
    const before = await lookups()
    const second = await page(t.app)
    assert.equal((await lookups()).served, before.served + 1)
    assert.deepEqual(second, first)
    assert.deepEqual(second, await freshPage())
    assert.equal(second.type, 'application/json; charset=utf-8')
    assert.match(String(second.link), /before=\d+/, 'more pages follow: a Link to the next')
    // The last page has no Link, from the cache too.
    const last = '/wallet/transactions?limit=100'
    await page(t.app, last)
    assert.deepEqual(await page(t.app, last), await freshPage(last))
    assert.equal((await page(t.app, last)).link, undefined)
  })

  it('shows a transfer sent through this instance, and one received', async () => {
    await expectChangeSeen(async () => void (await transfer(t, alice, bob.username, { [gold.name]: 7 })))
    await expectChangeSeen(async () => void (await transfer(t, bob, alice.username, { [silver.name]: 1 })))
  })

  it('shows a transfer committed by another instance on the same store', async () => {
    await expectChangeSeen(async () => {
      const peer = await openPeer()
      try {
        const response = await peer.app.inject({
          method: 'POST',
          url: '/wallet/transactions',
          headers: bob.auth,
          payload: { recipient: alice.username, assets: { [gold.name]: 2 } },
        })
        assert.equal(response.statusCode, 201, response.body)
      } finally {
        await peer.close()
      }
    })
  })

  it('shows a new username of the other side', async () => {
    await expectChangeSeen(async () => {
      const username = uniqueName('renamed')
      await call('PUT', '/user/username', bob.auth, { username })
      bob = { ...bob, username }
    })
  })

  it("shows a username when a wallet becomes its user's primary wallet, and drops it when it stops being", async () => {
    const carol = await createUser(t.app)
    const second = (await call('POST', '/user/wallets', carol.auth, {})).json() as { id: number }
    // Alice sends to carol's second wallet by id: no username on that side yet.
    const sent = await t.app.inject({
      method: 'POST',
      url: '/wallet/transactions',
      headers: alice.auth,
      payload: { recipient: String(second.id), type: 2, assets: { [gold.name]: 3 } },
    })
    assert.equal(sent.statusCode, 201, sent.body)
    await expectChangeSeen(async () => void (await call('PUT', '/user/wallet', carol.auth, { wallet_id: second.id })))
    assert.match((await page(t.app)).body, new RegExp(`"receiving_username":"${carol.username}"`))
    await expectChangeSeen(async () => void (await call('PUT', '/user/wallet', carol.auth, { wallet_id: carol.walletId })))
  })

  it("shows an asset's new name and new value", async () => {
    await expectChangeSeen(async () => {
      const name = uniqueName('bullion')
      await call('PUT', `/assets/${gold.id}/name`, t.admin, { name })
      gold = { ...gold, name }
    })
    await expectChangeSeen(async () => void (await call('PUT', `/assets/${gold.id}/value`, t.admin, { value: 0.1 + 0.2 })))
  })

  it('answers as a fresh instance after an asset is deleted, and after a wallet is deleted', async () => {
    const copper = await createAsset(t, { name: uniqueName('copper') })
    await issue(t, alice.walletId, copper.id, 5)
    // Burnt back to mint (a new transaction), then deleted: the history keeps naming it.
    await expectChangeSeen(async () => void (await call('DELETE', `/wallets/${alice.walletId}/assets/${copper.id}`, t.admin)))
    await page(t.app)
    await call('DELETE', `/assets/${copper.id}`, t.admin)
    assert.deepEqual(await page(t.app), await freshPage())
    // Bob's second wallet, funded by alice, deleted: what it holds is swept to bob's primary wallet.
    const created = await call('POST', '/user/wallets', bob.auth, {})
    const wallet = created.json() as { id: number }
    const sent = await t.app.inject({
      method: 'POST',
      url: '/wallet/transactions',
      headers: alice.auth,
      payload: { recipient: String(wallet.id), type: 2, assets: { [silver.name]: 4 } },
    })
    assert.equal(sent.statusCode, 201, sent.body)
    const walletPage = `/wallet/transactions?limit=2`
    const bobAuth = bob.auth
    await call('PUT', '/user/session/wallet', bobAuth, { wallet_id: wallet.id })
    await page(t.app, walletPage, bobAuth)
    const kept = await page(t.app, walletPage, bobAuth)
    await call('DELETE', '/wallet', bobAuth)
    // Bob's session is back on his primary wallet: its page shows the sweep, as a fresh instance does.
    const answered = await page(t.app, walletPage, bobAuth)
    assert.deepEqual(answered, await freshPage(walletPage, bobAuth))
    assert.notEqual(answered.body, kept.body)
  })

  it('refuses a revoked key on the next request, though its page is kept', async () => {
    const spare = await createWalletKey(t, alice.auth)
    await page(t.app, PAGE, spare.auth)
    await page(t.app, PAGE, spare.auth)
    await call('DELETE', `/wallet/sessions/${spare.id}`, alice.auth)
    expectError(await t.app.inject({ method: 'GET', url: PAGE, headers: spare.auth }), 401, 'A001')
  })

  it('keeps pages apart by every parameter that shapes them', async () => {
    const urls = [
      PAGE,
      '/wallet/transactions?limit=3&direction=sent',
      '/wallet/transactions?limit=3&direction=received',
      `/wallet/transactions?limit=3&asset=${silver.name}`,
      '/wallet/transactions?limit=3&offset=1',
      '/wallet/transactions?limit=2',
    ]
    const answers = []
    for (const url of urls) answers.push(await page(t.app, url))
    for (const [i, url] of urls.entries()) assert.deepEqual(await page(t.app, url), answers[i], url)
    for (const [i, url] of urls.entries()) assert.deepEqual(answers[i], await freshPage(url), url)
    assert.equal(new Set(answers.map((answer) => answer.body)).size, urls.length)
  })
})

describe(`the label generation of migration 0013 (${STORAGE})`, () => {
  const generation = async (db: Db) =>
    Number((await sql<{ generation: number }>`select generation from page_generation`.execute(db)).rows[0].generation)

  it('moves on every change to what a page prints, and not on other updates', async () => {
    const { db } = t.database
    const moves = async (change: () => Promise<unknown>) => {
      const was = await generation(db)
      await change()
      return (await generation(db)) > was
    }
    const user = await createUser(t.app)
    // Printed: usernames (and whose primary wallet a wallet is), addresses, asset names and values.
    assert.ok(
      await moves(() =>
        db
          .updateTable('users')
          .set({ username: uniqueName('u') })
          .where('id', '=', user.id)
          .execute(),
      ),
    )
    assert.ok(await moves(() => db.updateTable('users').set({ primary_wallet_id: user.walletId }).where('id', '=', user.id).execute()))
    assert.ok(await moves(() => db.updateTable('wallets').set({ address: user.address }).where('id', '=', user.walletId).execute()))
    assert.ok(await moves(() => db.updateTable('assets').set({ name: gold.name }).where('id', '=', gold.id).execute()))
    assert.ok(await moves(() => db.updateTable('assets').set({ value: 2 }).where('id', '=', gold.id).execute()))
    assert.ok(await moves(() => createAsset(t)))
    assert.ok(await moves(() => createUser(t.app)))
    // Not printed: the generation stays, so pages stay kept.
    assert.ok(!(await moves(() => db.updateTable('users').set({ password_hash: 'x' }).where('id', '=', user.id).execute())))
    assert.ok(!(await moves(() => db.updateTable('wallets').set({ user_id: user.id }).where('id', '=', user.walletId).execute())))
    let sent: { id: number } | undefined
    assert.ok(!(await moves(async () => (sent = await transfer(t, alice, user.username, { [silver.name]: 1 })))))
    // A user deleted (no route does; a script might): a row with nothing referring to it.
    const loose = await db
      .insertInto('users')
      .values({
        username: 'loose',
        username_key: uniqueName('loose'),
        password_hash: 'x',
        primary_wallet_id: null,
        created_at: new Date().toISOString(),
      } as never)
      .returning('id')
      .executeTakeFirstOrThrow()
    assert.ok(await moves(() => db.deleteFrom('users').where('id', '=', loose.id).execute()))
    // The journal is append-only; were a row ever updated, pages would be checked again.
    assert.ok(
      await moves(() =>
        db
          .updateTable('transactions')
          .set({ memo: sql`memo` })
          .where('id', '=', sent?.id ?? 0)
          .execute(),
      ),
    )
  })

  it('goes down and up again', async () => {
    const { database, dataDir } = await openTestDatabase()
    try {
      const { db } = database
      await migrateTo(db, '0012_lean_webhook_deliveries')
      const tables =
        STORAGE === 'postgres'
          ? sql`select tablename as name from pg_tables where tablename = 'page_generation'`
          : sql`select name from sqlite_master where name = 'page_generation'`
      assert.equal((await tables.execute(db)).rows.length, 0)
      await db.updateTable('wallets').set({ address: 'mint' }).where('id', '=', 1).execute()
      await migrateToLatest(db)
      const was = await generation(db)
      assert.ok(was > 1_600_000_000_000_000, 'starts at the clock in microseconds')
      await db.updateTable('wallets').set({ address: 'mint' }).where('id', '=', 1).execute()
      assert.ok((await generation(db)) > was)
    } finally {
      await database.close()
      fs.rmSync(dataDir, { recursive: true, force: true })
    }
  })
})

describe(`a restore under a running instance's kept pages (${STORAGE})`, () => {
  it('never serves a page kept from the store before, even where the restored journal has the same ids', async () => {
    // Two backups of one ledger with the same transactions, the asset renamed between them.
    const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'coffer-page-restore-'))
    const stores: { database: Database; dataDir: string }[] = []
    try {
      const first = path.join(scratch, 'first.coffer.gz')
      const second = path.join(scratch, 'second.coffer.gz')
      await createBackup(t.database, first)
      const name = uniqueName('renamedagain')
      await call('PUT', `/assets/${silver.id}/name`, t.admin, { name })
      silver = { ...silver, name }
      await createBackup(t.database, second)
      // One process's cache, kept while the store under it is replaced by a restore.
      const pages = new PageCache()
      const answer = async (db: Db) =>
        (
          await createHistoryService({ db, pages }).answerWalletTransactions(alice.walletId, { limit: 5 }, (transactions) =>
            JSON.stringify(transactions),
          )
        ).body.toString()
      const fresh = async (db: Db) =>
        (
          await createHistoryService({ db, pages: new PageCache() }).answerWalletTransactions(
            alice.walletId,
            { limit: 5 },
            (transactions) => JSON.stringify(transactions),
          )
        ).body.toString()
      for (const file of [first, second]) {
        const store = await openTestDatabase()
        stores.push(store)
        await restoreBackup(store.database, await checkBackup(file))
      }
      const [before, after] = stores.map((store) => store.database.db)
      const kept = await answer(before)
      assert.equal(await answer(before), kept)
      assert.equal(pages.size, 1)
      const restored = await answer(after)
      assert.equal(restored, await fresh(after))
      assert.notEqual(restored, kept, 'the restored store names the asset otherwise')
      assert.match(restored, new RegExp(name))
    } finally {
      for (const store of stores) {
        await store.database.close()
        fs.rmSync(store.dataDir, { recursive: true, force: true })
      }
      fs.rmSync(scratch, { recursive: true, force: true })
    }
  })
})

describe('the page cache', () => {
  const entry = (bytes: number) => ({
    body: Buffer.alloc(bytes, 'x'),
    more: false,
    lastId: undefined,
    stamp: { ids: '1', generation: 1 },
    state: undefined,
  })

  it('keeps at most its number of entries, the least recently used going first', () => {
    const pages = new PageCache({ maxEntries: 3, maxBytes: 1_000_000 })
    for (const key of ['a', 'b', 'c']) pages.set(key, entry(10))
    pages.get('a')
    pages.set('d', entry(10))
    assert.equal(pages.size, 3)
    assert.equal(pages.get('b'), undefined)
    assert.ok(pages.get('a') && pages.get('c') && pages.get('d'))
  })

  it('keeps at most its bytes', () => {
    const pages = new PageCache({ maxEntries: 1000, maxBytes: 10_000 })
    for (let i = 0; i < 100; i++) pages.set(`page${i}`, entry(1000))
    assert.ok(pages.bytes <= 10_000, `${pages.bytes} bytes kept`)
    assert.ok(pages.size < 10)
    assert.ok(pages.get('page99'))
  })
})
