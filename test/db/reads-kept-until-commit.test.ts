import assert from 'node:assert/strict'
import path from 'node:path'
import { after, before, describe, it } from 'node:test'
import SQLite from 'better-sqlite3'
import type { FastifyInstance } from 'fastify'
import { CompiledQuery } from 'kysely'
import { arrivalMark, KeptReads, readCommitState, readKept } from '../../src/db/commit-state.ts'
import { openPostgres, openSqlite } from '../../src/db/database.ts'
import { sqliteStatementsOf } from '../../src/db/sqlite-statements.ts'
import { ADMIN_KEY, buildSameStoreApp, buildTestApp, expectError, STORAGE, type TestApp } from '../helpers/app.ts'
import { createAsset, createUser, createWalletKey, issue, transfer, uniqueName, type TestUser } from '../helpers/factories.ts'

/**
 * Reads kept while the database's commit state has not moved (`db/commit-state.ts`): credential
 * rows (`authenticateUserSession`, `authenticateWalletKey`) and history pages are served without
 * a statement only while nothing at all has been committed since they were read. Each test below
 * warms what is kept (the page counter shows a page served as `unchanged`, which means the state
 * had not moved, so the credential was served from memory too), commits something, and checks
 * that the next request, on this instance and on a second one, answers as the database now is.
 */

let t: TestApp
let gold: { id: number; name: string }
let alice: TestUser
let bob: TestUser

const PAGE = '/wallet/transactions?limit=3'

/** A second instance on the same store (another process, the CLI). */
const openPeer = () => buildSameStoreApp(t)

/** Another connection writing with SQL of its own, as the `coffer` CLI or a script would. */
async function writeElsewhere(statement: string, parameters: unknown[]): Promise<void> {
  if (STORAGE === 'postgres') {
    const other = openPostgres(t.config.databaseUrl as string, 1)
    try {
      await other.db.executeQuery(CompiledQuery.raw(statement.replace('?', '$1'), parameters))
    } finally {
      await other.close()
    }
    return
  }
  const other = new SQLite(path.join(t.config.dataDir, 'coffer.sqlite'))
  try {
    other.pragma('busy_timeout = 10000')
    other.prepare(statement).run(parameters)
  } finally {
    other.close()
  }
}

async function get(app: FastifyInstance, url: string, headers: Record<string, string>) {
  return app.inject({ method: 'GET', url, headers })
}

async function page(app: FastifyInstance, headers: Record<string, string>, url = PAGE) {
  const response = await get(app, url, headers)
  assert.equal(response.statusCode, 200, response.body)
  return response.body
}

/** The page lookups of `app` by outcome, from /metrics. */
async function lookups(app: FastifyInstance): Promise<Record<'unchanged' | 'hit' | 'stale' | 'miss', number>> {
  const text = (await app.inject({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer ${ADMIN_KEY}` } })).body
  const count = (outcome: string) =>
    Number(
      / (\d+)$/.exec(
        text.split('\n').find((line) => line.startsWith(`coffer_history_page_cache_lookups_total{outcome="${outcome}"}`)) ?? ' 0',
      )?.[1],
    )
  return { unchanged: count('unchanged'), hit: count('hit'), stale: count('stale'), miss: count('miss') }
}

/**
 * On PostgreSQL the commit state is the server's: commits in other databases move it too (other
 * test files share the test server). A test that needs a moment with nothing committed anywhere
 * is skipped there when the server never gives one; on SQLite it always has one.
 */
const BUSY = 'the PostgreSQL server never went a moment without a commit (other databases on it are busy)'

function neverQuiet(what: string): undefined {
  if (STORAGE === 'sqlite') throw new Error(`${what}: never, on a store no one else writes`)
  return undefined
}

/**
 * Asks for the page until it is served with nothing committed since it was kept (the credential
 * then came from memory as well); the first asks build it and mark the credential used. The last
 * page answered; `unchanged` false when that never happened (PostgreSQL, `BUSY`).
 */
async function warm(app: FastifyInstance, headers: Record<string, string>, url = PAGE): Promise<{ body: string; unchanged: boolean }> {
  let body = ''
  for (let i = 0; i < 20; i++) {
    const was = (await lookups(app)).unchanged
    body = await page(app, headers, url)
    if ((await lookups(app)).unchanged === was + 1) return { body, unchanged: true }
    // Just after this process wrote, the state is not read for a moment (db/commit-state.ts).
    await pause()
  }
  neverQuiet(`${url} served as unchanged`)
  return { body, unchanged: false }
}

/**
 * PostgreSQL's state is read once per turn as well, but no test can commit on another connection
 * within one turn of this process's event loop there (a commit takes round trips); SQLite's
 * driver commits at once.
 */
const SAME_TURN = 'a commit by another connection within one turn of the event loop needs a synchronous driver (SQLite)'

const pause = () => new Promise((resolve) => setTimeout(resolve, 60))

/**
 * The commit state once it is read again after this process's last write (its own or a
 * background worker's: just after one the state is taken as moved, undefined).
 */
async function settledState(read = () => readCommitState(t.database.db)): Promise<string> {
  for (let i = 0; i < 20; i++) {
    const state = await read()
    if (state !== undefined) return state
    await pause()
  }
  throw new Error('the commit state was never read')
}

/** The commit state read twice alike (nothing committed in between); undefined if never (`BUSY`). */
async function stateReadTwiceAlike(): Promise<string | undefined> {
  for (let i = 0; i < 20; i++) {
    const state = await settledState()
    if ((await readCommitState(t.database.db)) === state) return state
    await pause()
  }
  return neverQuiet('the commit state read twice alike')
}

before(async () => {
  t = await buildTestApp()
  gold = await createAsset(t, { name: uniqueName('gold'), value: 2 })
  alice = await createUser(t.app)
  bob = await createUser(t.app)
  await issue(t, alice.walletId, gold.id, 1000)
  for (let i = 0; i < 3; i++) await transfer(t, alice, bob.username, { [gold.name]: 1 + i })
})

after(async () => {
  await t?.close()
})

describe(`the commit state (${STORAGE})`, () => {
  it('stays while nothing is committed, and moves on a commit by this connection and by another', async (context) => {
    const { db } = t.database
    const first = await stateReadTwiceAlike()
    if (first === undefined) return context.skip(BUSY)
    await transfer(t, alice, bob.username, { [gold.name]: 1 })
    // Just after this process wrote, the state is taken as moved without a read (undefined).
    assert.notEqual(await readCommitState(db), first, 'a transfer through this instance moves it')
    const second = await settledState()
    assert.notEqual(second, first, 'a transfer through this instance moves it')
    await writeElsewhere('update assets set value = value + 1 where id = ?', [gold.id])
    const third = await settledState()
    assert.notEqual(third, second, 'a commit by another connection moves it')
  })

  it('is unknown inside a transaction, and names its database object', async () => {
    const { db } = t.database
    await db.transaction().execute(async (trx) => assert.equal(await readCommitState(trx), undefined))
    // A second database object on the same store, nothing committed between the two reads: what
    // was kept for one is still never served for the other.
    const other =
      STORAGE === 'postgres' ? openPostgres(t.config.databaseUrl as string, 1) : openSqlite(path.join(t.config.dataDir, 'coffer.sqlite'))
    try {
      const [mine, theirs] = [await settledState(), await readCommitState(other.db)]
      assert.ok(mine !== undefined && theirs !== undefined)
      assert.notEqual(mine, theirs)
    } finally {
      await other.close()
    }
  })

  it('serves a request the state read after it arrived, and never one read before', async () => {
    const { db } = t.database
    const arrived = arrivalMark(db)
    const read = await settledState()
    await writeElsewhere('update assets set value = value + 1 where id = ?', [gold.id])
    // Read after the request arrived: the request is answered as the database was then.
    assert.equal(await readCommitState(db, arrived), read)
    // A request arriving now is not: the commit above shows.
    const now = await settledState(() => readCommitState(db, arrivalMark(db)))
    assert.notEqual(now, read)
  })

  it('is read once for the requests of one turn, after the last of them arrived (SQLite)', async (context) => {
    if (STORAGE !== 'sqlite') return context.skip(SAME_TURN)
    const { db } = t.database
    const before = await stateReadTwiceAlike()
    const statements = sqliteStatementsOf(db)
    assert.ok(statements)
    const prepare = statements.prepare
    let reads = 0
    statements.prepare = (sql) => {
      if (sql.includes('data_version')) reads++
      return prepare.call(statements, sql)
    }
    try {
      // A request arrives and asks; another connection commits; 31 more arrive: all in one turn.
      const first = readCommitState(db, arrivalMark(db))
      void writeElsewhere('update assets set value = value + 1 where id = ?', [gold.id])
      const later = Array.from({ length: 31 }, () => readCommitState(db, arrivalMark(db)))
      const states = await Promise.all([first, ...later])
      assert.equal(reads, 1, 'one read for the turn')
      assert.equal(new Set(states).size, 1, 'the same state for every request of the turn')
      assert.ok(states[0] !== undefined && states[0] !== before, 'read after the commit that came before the later requests')
      // A request of the next turn is not served the turn's state without a read of its own.
      await readCommitState(db, arrivalMark(db))
      assert.equal(reads, 2)
    } finally {
      statements.prepare = prepare
    }
  })

  it('keeps a value only with the state it was read at, and never a missing one', async (context) => {
    const kept = new KeptReads<string, { n: number }>(10)
    kept.set('a', 'one', { n: 1 })
    assert.deepEqual(kept.get('a', 'one'), { n: 1 })
    assert.equal(kept.get('a', 'two'), undefined, 'another state: read again')
    assert.equal(kept.get('a', undefined), undefined, 'never served when the state is unknown')
    kept.set('a', undefined, { n: 2 })
    assert.equal(kept.get('a', 'one'), undefined, 'a value read at an unknown state replaces nothing')
    kept.set('b', 'one', undefined)
    assert.equal(kept.size, 0)

    const { db } = t.database
    let loads = 0
    const load = async (key: string) => (key === 'none' ? undefined : { n: ++loads })
    assert.equal(await readKept(db, kept, 'none', load), undefined)
    assert.equal(kept.size, 0, 'nothing kept for a key the load does not find')
    // Served from memory once the state is read twice alike (a background write may move it).
    let served = false
    for (let i = 0; i < 20 && !served; i++) {
      const first = await readKept(db, kept, 'a', load)
      served = (await readKept(db, kept, 'a', load)) === first
      if (!served) await pause()
    }
    if (!served) return context.skip(neverQuiet('a value served from memory') ?? BUSY)
    const before = loads
    await transfer(t, alice, bob.username, { [gold.name]: 1 })
    assert.deepEqual(await readKept(db, kept, 'a', load), { n: before + 1 }, 'read again after a commit')
  })
})

describe(`credentials and pages kept while nothing was committed (${STORAGE})`, () => {
  it('serves a page again without a statement, and not after a commit', async (context) => {
    const key = await createWalletKey(t, alice.auth)
    // Served with no statement (counted `unchanged`), the credential's too.
    const { body: kept, unchanged } = await warm(t.app, key.auth)
    if (!unchanged) return context.skip(BUSY)
    const before = await lookups(t.app)
    await transfer(t, bob, alice.username, { [gold.name]: 1 })
    const after = await page(t.app, key.auth)
    const counted = await lookups(t.app)
    assert.equal(counted.unchanged, before.unchanged, 'not served unchanged after a commit')
    assert.equal(counted.stale, before.stale + 1, 'checked against the database, and found changed')
    assert.notEqual(after, kept)
  })

  it('shows what another connection committed (the CLI, a script), and a change of label', async () => {
    const key = await createWalletKey(t, alice.auth)
    const { body: kept } = await warm(t.app, key.auth)
    await writeElsewhere('update assets set value = value * 2 where id = ?', [gold.id])
    const answered = await page(t.app, key.auth)
    assert.notEqual(answered, kept, 'the new value shows')
    const peer = await openPeer()
    try {
      assert.equal(answered, await page(peer.app, key.auth), 'as an instance that never kept it answers')
    } finally {
      await peer.close()
    }
  })

  it('refuses a revoked key on the next request, on this instance and on another', async () => {
    const key = await createWalletKey(t, alice.auth)
    const peer = await openPeer()
    try {
      await warm(t.app, key.auth)
      await warm(peer.app, key.auth)
      const revoked = await t.app.inject({ method: 'DELETE', url: `/wallet/sessions/${key.id}`, headers: alice.auth })
      assert.ok(revoked.statusCode < 300, revoked.body)
      expectError(await get(t.app, PAGE, key.auth), 401, 'A001')
      expectError(await get(peer.app, PAGE, key.auth), 401, 'A001')
    } finally {
      await peer.close()
    }
  })

  it('refuses a key whose wallet another connection deleted between two requests of one turn (SQLite)', async (context) => {
    if (STORAGE !== 'sqlite') return context.skip(SAME_TURN)
    const erin = await createUser(t.app)
    const key = await createWalletKey(t, erin.auth)
    const { unchanged } = await warm(t.app, key.auth)
    assert.ok(unchanged)
    // The first request arrives; another connection deletes the wallet (its key no longer stands);
    // the second arrives in the same turn, before the state is read for either.
    const first = get(t.app, PAGE, key.auth)
    void writeElsewhere('update wallets set deleted_at = ? where id = ?', [new Date().toISOString(), erin.walletId])
    const second = get(t.app, PAGE, key.auth)
    expectError(await second, 401, 'A001')
    // The first arrived before the commit: either answer is one the database gave at a moment of it.
    assert.ok([200, 401].includes((await first).statusCode))
  })

  it('refuses an ended session, and the other sessions after a password change, on this instance and on another', async () => {
    const carol = await createUser(t.app)
    const login = await t.app.inject({
      method: 'POST',
      url: `/users/${carol.username}/sessions`,
      payload: { password: carol.password, return_token: true },
    })
    const second = { authorization: `Bearer ${login.json().token}` }
    const peer = await openPeer()
    try {
      for (const app of [t.app, peer.app]) for (const auth of [carol.auth, second]) await warm(app, auth)
      const ended = await t.app.inject({ method: 'DELETE', url: '/user/session', headers: second })
      assert.ok(ended.statusCode < 300, ended.body)
      expectError(await get(t.app, PAGE, second), 401, 'A001')
      expectError(await get(peer.app, PAGE, second), 401, 'A001')

      const third = (
        await t.app.inject({
          method: 'POST',
          url: `/users/${carol.username}/sessions`,
          payload: { password: carol.password, return_token: true },
        })
      ).json().token as string
      const other = { authorization: `Bearer ${third}` }
      for (const app of [t.app, peer.app]) for (const auth of [carol.auth, other]) await warm(app, auth)
      const changed = await t.app.inject({
        method: 'PUT',
        url: '/user/password',
        headers: carol.auth,
        payload: { password: 'a new horse battery' },
      })
      assert.ok(changed.statusCode < 300, changed.body)
      expectError(await get(t.app, PAGE, other), 401, 'A001')
      expectError(await get(peer.app, PAGE, other), 401, 'A001')
    } finally {
      await peer.close()
    }
  })

  it('refuses a session whose time ran out though nothing was written since', async () => {
    const dave = await createUser(t.app)
    // The session ends in 3 s; it is kept, then nothing is written until that instant has passed.
    const expiresAt = Date.now() + 3000
    await t.database.db
      .updateTable('user_sessions')
      .set({ expires_at: new Date(expiresAt).toISOString() })
      .where('user_id', '=', dave.id)
      .execute()
    await warm(t.app, dave.auth)
    assert.ok(Date.now() < expiresAt, 'kept before it ended')
    await new Promise((resolve) => setTimeout(resolve, expiresAt - Date.now() + 50))
    expectError(await get(t.app, PAGE, dave.auth), 401, 'A001')
  })
})
