import assert from 'node:assert/strict'
import http from 'node:http'
import type net from 'node:net'
import { after, before, describe, it } from 'node:test'
import type { LightMyRequestResponse } from 'fastify'
import { sql } from 'kysely'
import { insertUser, insertUserSession, updateUser } from '../../src/accounts/accounts.repository.ts'
import { hashPassword } from '../../src/accounts/passwords.ts'
import { inTransaction } from '../../src/db/dialect.ts'
import { KEY_SCOPES, type KeyScope } from '../../src/http/key-scopes.ts'
import { createToken, hashToken } from '../../src/http/tokens.ts'
import { createWalletFor } from '../../src/wallets/wallets.service.ts'
import { buildTestApp, journalCovered, type TestApp } from '../helpers/app.ts'
import {
  CALLERS,
  IDOR_CASES,
  NOT_IN_MATRIX,
  ROUTES,
  type Actor,
  type Caller,
  type RouteCase,
  type World,
} from '../helpers/authorization-matrix.ts'

/**
 * Runs every cell of the authorization matrix (test/helpers/authorization-matrix.ts): each route
 * with each kind of caller, expecting the table's status and code, and every path or body id
 * with an id that belongs to someone else. Refused requests must change nothing.
 */

const PASSWORD = 'correct horse'
const SUCCESS_ORDER: Caller[] = [
  'unrelated',
  'keyOther',
  'assigned',
  'keyW',
  'owner',
  'admin',
  'nobody',
  'garbage',
  'revokedUser',
  'revokedKey',
]

describe('authorization matrix', () => {
  let t: TestApp
  let port: number
  let shared: World
  let goldId: number
  let worlds = 0
  let users = 0
  let passwordHash: string
  let cells = 0

  async function call(method: string, url: string, headers: Record<string, string>, payload?: object): Promise<LightMyRequestResponse> {
    return t.app.inject({ method: method as 'GET', url, headers, payload })
  }

  async function ok(response: LightMyRequestResponse | Promise<LightMyRequestResponse>, status: number): Promise<Record<string, unknown>> {
    const answered = await response
    assert.equal(answered.statusCode, status, answered.body)
    return answered.body ? answered.json() : {}
  }

  function bearer(token: string): Record<string, string> {
    return { authorization: `Bearer ${token}` }
  }

  /**
   * A user with a primary wallet and a session, stored as POST /users and a login would store
   * them but without hashing the password again: Argon2 dominates the time of a world, and the
   * matrix builds dozens. (Registration and login themselves are cells of the matrix.)
   */
  async function fixtureUser(): Promise<Actor> {
    const username = `mx${process.pid}u${++users}`
    const token = createToken('user')
    return inTransaction(t.database.db, async (trx) => {
      const user = await insertUser(trx, username, passwordHash)
      const wallet = await createWalletFor(trx, user.id)
      await updateUser(trx, user.id, { primary_wallet_id: wallet.id })
      await insertUserSession(trx, {
        userId: user.id,
        walletId: wallet.id,
        tokenHash: hashToken(token),
        expiresAt: new Date(Date.now() + 86_400_000).toISOString(),
      })
      return { id: user.id, username, password: PASSWORD, token, primaryWalletId: wallet.id }
    })
  }

  /** Another session of the user on their primary wallet, as a login would open it. */
  async function fixtureSession(user: Actor): Promise<{ id: number; token: string }> {
    const token = createToken('user')
    const session = await insertUserSession(t.database.db, {
      userId: user.id,
      walletId: user.primaryWalletId,
      tokenHash: hashToken(token),
      expiresAt: new Date(Date.now() + 86_400_000).toISOString(),
    })
    return { id: session.id, token }
  }

  /** A fresh world (see the matrix file) built through the API. */
  async function buildWorld(): Promise<World> {
    const n = ++worlds
    let names = 0
    const unique = (prefix: string) => `${prefix}${process.pid}w${n}n${++names}`
    const [owner, assigned, unrelated, other, target] = await Promise.all([0, 1, 2, 3, 4].map(() => fixtureUser()))
    const as = (who: Actor) => bearer(who.token)

    const walletW = (await ok(call('POST', '/user/wallets', as(owner), {}), 201)).id as number
    await ok(call('PUT', '/user/session/wallet', as(owner), { wallet_id: walletW }), 200)
    await ok(call('POST', '/wallet/users', as(owner), { username: assigned.username }), 201)
    await ok(call('PUT', '/user/session/wallet', as(assigned), { wallet_id: walletW }), 200)
    const walletX = other.primaryWalletId
    await ok(call('POST', '/wallet/users', as(other), { username: unrelated.username }), 201)

    for (const [walletId, quantity] of [
      [walletW, 1000],
      [walletX, 100],
      [unrelated.primaryWalletId, 100],
    ]) {
      await ok(call('POST', `/wallets/${walletId}/assets`, t.admin, { id: goldId, quantity }), 201)
    }
    const spareAssetId = (await ok(call('POST', '/assets', t.admin, { name: unique('spare'), value: 1 }), 201)).id as number

    const keyW = await ok(call('POST', '/wallet/sessions', as(owner), { name: 'key of W', scopes: [...KEY_SCOPES] }), 201)
    const keyOther = await ok(call('POST', '/wallet/sessions', as(other), { name: 'key of X', scopes: [...KEY_SCOPES] }), 201)
    const keysWithout = {} as Record<KeyScope, string>
    for (const missing of KEY_SCOPES) {
      const scopes = KEY_SCOPES.filter((scope) => scope !== missing)
      keysWithout[missing] = (await ok(call('POST', '/wallet/sessions', as(owner), { name: `no ${missing}`, scopes }), 201)).token as string
    }
    const revokedKey = await ok(call('POST', '/wallet/sessions', as(owner), { name: 'revoked' }), 201)
    await ok(call('DELETE', `/wallet/sessions/${revokedKey.id}`, as(owner)), 204)

    const revokedUser = await fixtureSession(owner)
    await ok(call('DELETE', '/user/session', bearer(revokedUser.token)), 204)
    const ownerSecond = await fixtureSession(owner)
    const otherSession = await ok(call('GET', '/user/session', as(other)), 200)

    // Both wallets get a webhook, then one transfer W → X queues a delivery on each side.
    await ok(call('PUT', '/wallet/webhook', as(owner), { webhook: 'http://127.0.0.1:9/w' }), 200)
    await ok(call('PUT', '/wallet/webhook', as(other), { webhook: 'http://127.0.0.1:9/x' }), 200)
    await ok(call('POST', '/wallet/transactions', as(owner), { recipient: other.username, assets: { gold: 1 } }), 201)
    const receivedByW = (
      await ok(call('POST', '/wallet/transactions', as(other), { recipient: String(walletW), type: 2, assets: { gold: 10 } }), 201)
    ).id as number
    const holdW = (await ok(call('POST', '/wallet/holds', as(owner), { recipient: other.username, assets: { gold: 2 } }), 201)).id as number
    const startAt = new Date(Date.now() + 3_600_000).toISOString()
    const scheduleW = (
      await ok(
        call('POST', '/wallet/schedules', as(owner), { recipient: other.username, assets: { gold: 1 }, start_at: startAt, every: 'P1M' }),
        201,
      )
    ).id as number
    const monitorW = (await ok(call('POST', '/wallet/monitors', as(owner), { asset: 'gold', below: 5 }), 201)).id as number
    const delivery = async (walletId: number) =>
      (
        await t.database.db
          .selectFrom('webhook_deliveries')
          .select('id')
          .where('wallet_id', '=', walletId)
          .orderBy('id')
          .executeTakeFirstOrThrow()
      ).id

    return {
      owner,
      assigned,
      unrelated,
      other,
      target,
      walletW,
      walletX,
      keyW: { id: keyW.id as number, token: keyW.token as string },
      keyOther: { id: keyOther.id as number, token: keyOther.token as string },
      keysWithout,
      revokedUserToken: revokedUser.token,
      revokedKeyToken: revokedKey.token as string,
      ownerSecondSession: ownerSecond,
      otherSessionId: otherSession.id as number,
      goldId,
      goldName: 'gold',
      spareAssetId,
      holdW,
      scheduleW,
      monitorW,
      deliveryW: await delivery(walletW),
      deliveryX: await delivery(walletX),
      receivedByW,
      unique,
    }
  }

  function credentials(world: World, caller: Caller | 'other'): Record<string, string> {
    switch (caller) {
      case 'nobody':
        return {}
      case 'garbage':
        return bearer('garbage-token')
      case 'revokedUser':
        return bearer(world.revokedUserToken)
      case 'revokedKey':
        return bearer(world.revokedKeyToken)
      case 'keyW':
        return bearer(world.keyW.token)
      case 'keyOther':
        return bearer(world.keyOther.token)
      case 'admin':
        return t.admin
      default:
        return bearer(world[caller].token)
    }
  }

  function actsOn(world: World, caller: Caller): { walletId: number | undefined; userId: number | undefined } {
    if (caller === 'keyW' || caller === 'owner' || caller === 'assigned')
      return { walletId: world.walletW, userId: caller === 'keyW' ? undefined : world[caller].id }
    if (caller === 'keyOther') return { walletId: world.walletX, userId: undefined }
    if (caller === 'unrelated') return { walletId: world.unrelated.primaryWalletId, userId: world.unrelated.id }
    return { walletId: undefined, userId: undefined }
  }

  /** Status and body of an event stream request; the stream itself is cut after its head. */
  function streamHead(url: string, headers: Record<string, string>): Promise<{ statusCode: number; body: string; contentType: string }> {
    return new Promise((resolve, reject) => {
      const request = http.get({ host: '127.0.0.1', port, path: url, headers, agent: false }, (response) => {
        const contentType = String(response.headers['content-type'] ?? '')
        if (response.statusCode === 200) {
          response.destroy()
          resolve({ statusCode: 200, body: '', contentType })
          return
        }
        let body = ''
        response.on('data', (chunk: Buffer) => (body += chunk.toString()))
        response.on('end', () => resolve({ statusCode: response.statusCode ?? 0, body, contentType }))
      })
      request.on('error', reject)
    })
  }

  /** Runs one cell; returns what went wrong, or undefined. */
  async function runCell(
    world: World,
    route: RouteCase,
    caller: Caller,
    as?: { headers: Record<string, string>; expected: { status: number; code?: string } },
  ): Promise<string | undefined> {
    cells++
    const expected = as?.expected ?? route.expect[caller]
    const url = route.url?.(world) ?? route.route
    const headers = as?.headers ?? credentials(world, caller)
    let statusCode: number
    let body: string
    let response: LightMyRequestResponse | undefined
    if (route.stream) {
      const head = await streamHead(url, headers)
      statusCode = head.statusCode
      body = head.body
      if (statusCode === 200 && !head.contentType.startsWith('text/event-stream')) return `${caller}: 200 with ${head.contentType}`
    } else {
      response = await call(route.method, url, headers, route.body?.(world, caller))
      statusCode = response.statusCode
      body = response.body
    }
    let code: string | undefined
    try {
      code = body ? (JSON.parse(body) as { code?: string }).code : undefined
    } catch {
      code = undefined
    }
    if (statusCode !== expected.status || (expected.code !== undefined && code !== expected.code)) {
      return `${caller}: expected ${expected.status} ${expected.code ?? ''}, got ${statusCode} ${body.slice(0, 160)}`
    }
    if (expected.status < 400 && route.check && response) {
      try {
        await route.check(response, { world, caller, ...actsOn(world, caller), db: t.database.db })
      } catch (error) {
        return `${caller}: ${error instanceof Error ? error.message : String(error)}`
      }
    }
    return undefined
  }

  /** What a refused request must not change: ownership, access, keys, sessions, holdings (and what is held), holds, assets, webhooks. */
  async function fingerprint(): Promise<string> {
    const db = t.database.db
    const rows = await Promise.all([
      db.selectFrom('users').select(['id', 'username', 'password_hash', 'primary_wallet_id']).orderBy('id').execute(),
      db.selectFrom('user_sessions').select(['id', 'user_id', 'wallet_id']).orderBy('id').execute(),
      db.selectFrom('wallets').select(['id', 'address', 'user_id', 'deleted_at']).orderBy('id').execute(),
      db.selectFrom('wallet_users').select(['wallet_id', 'user_id']).orderBy('wallet_id').orderBy('user_id').execute(),
      db.selectFrom('wallet_sessions').select(['id', 'wallet_id', 'user_id', 'name']).orderBy('id').execute(),
      db.selectFrom('holdings').select(['wallet_id', 'asset_id', 'quantity', 'held']).orderBy('wallet_id').orderBy('asset_id').execute(),
      db.selectFrom('holds').select(['id', 'status', 'transaction_id']).orderBy('id').execute(),
      db.selectFrom('assets').select(['id', 'name', 'value', 'deleted_at']).orderBy('id').execute(),
      db.selectFrom('webhooks').select(['wallet_id', 'url', 'secret']).orderBy('wallet_id').execute(),
      db
        .selectFrom('transactions')
        .select((eb) => eb.fn.countAll<number>().as('count'))
        .execute(),
    ])
    return JSON.stringify(rows, (_key, value) => (typeof value === 'bigint' ? Number(value) : value)).replaceAll('"count":"', '"count":')
  }

  before(async () => {
    t = await buildTestApp({ CHECKPOINT_INTERVAL_MS: '100' })
    // Durability is not under test here, and the matrix builds dozens of worlds: skip fsync.
    if (t.database.dialect === 'sqlite') await sql`pragma synchronous = off`.execute(t.database.db)
    await t.app.listen({ port: 0, host: '127.0.0.1' })
    port = (t.app.server.address() as net.AddressInfo).port
    passwordHash = await hashPassword(PASSWORD)
    goldId = (await ok(call('POST', '/assets', t.admin, { name: 'gold', value: 1 }), 201)).id as number
    shared = await buildWorld()
    // The proofs asked for below need a signed checkpoint over the shared world's transactions.
    await journalCovered(t.database.db)
  })
  after(async () => {
    const idorChecks = IDOR_CASES.length
    console.log(`${cells} cells, ${ROUTES.length} routes × ${CALLERS.length} callers, ${idorChecks} foreign-id cases, ${worlds} worlds`)
    await t.close()
  })

  it('lists every route of the service, and only routes that exist', () => {
    const doc = t.app.swagger() as { paths: Record<string, Record<string, unknown>> }
    const registered: string[] = []
    for (const [path, operations] of Object.entries(doc.paths)) {
      for (const method of Object.keys(operations))
        if (method !== 'head' && method !== 'options') registered.push(`${method.toUpperCase()} ${path.replace(/\{(\w+)\}/g, ':$1')}`)
    }
    const covered = new Set(ROUTES.map((route) => `${route.method} ${route.route}`))
    const missing = registered.filter((route) => !covered.has(route) && !NOT_IN_MATRIX.some((pattern) => pattern.test(route.split(' ')[1])))
    assert.deepEqual(missing, [], 'routes of the service missing from the authorization matrix')
    for (const route of ROUTES)
      assert.ok(
        t.app.hasRoute({ method: route.method, url: route.route }),
        `${route.method} ${route.route} is in the matrix but not served`,
      )
    assert.equal(covered.size, ROUTES.length, 'a route is listed twice')
  })

  for (const route of ROUTES) {
    it(`${route.method} ${route.route}: ${CALLERS.map((caller) => `${caller} ${route.expect[caller].status}${route.expect[caller].code ? ` ${route.expect[caller].code}` : ''}`).join(', ')}`, async () => {
      const failures: string[] = []
      const refused = CALLERS.filter((caller) => route.expect[caller].status >= 400)
      const allowed = SUCCESS_ORDER.filter((caller) => route.expect[caller].status < 400)
      const before = await fingerprint()
      for (const caller of refused) {
        const failure = await runCell(shared, route, caller)
        if (failure) failures.push(failure)
      }
      const changed = (await fingerprint()) !== before
      if (changed) failures.push(`a refused request changed the stored state (callers ${refused.join(', ')})`)
      const fresh = route.fresh ? await Promise.all(allowed.map(() => buildWorld())) : []
      for (const [index, caller] of allowed.entries()) {
        const failure = await runCell(fresh[index] ?? shared, route, caller)
        if (failure) failures.push(failure)
      }
      assert.deepEqual(failures, [])
    })
  }

  // Each wallet key lacking one scope: K000 on the routes that need it (changing nothing), and
  // the answer of a key with every scope on all the others.
  describe('wallet keys lacking a scope', () => {
    for (const route of ROUTES.filter((route) => route.expect.keyW.status < 400)) {
      it(`${route.method} ${route.route}`, async () => {
        const scope = t.app.walletRoutes.find((wallet) => wallet.method === route.method && wallet.url === route.route)?.scope
        const failures: string[] = []
        for (const missing of KEY_SCOPES) {
          const refused = missing === scope
          const world = refused || !route.fresh ? shared : await buildWorld()
          const before = refused ? await fingerprint() : ''
          const expected = refused ? { status: 403, code: 'K000' } : route.expect.keyW
          const failure = await runCell(world, route, 'keyW', { headers: bearer(world.keysWithout[missing]), expected })
          if (failure) failures.push(`without ${missing}: ${failure}`)
          if (refused && (await fingerprint()) !== before) failures.push(`without ${missing}: the refused request changed the stored state`)
        }
        assert.deepEqual(failures, [])
      })
    }
  })

  describe('ids that belong to someone else (no IDOR)', () => {
    // Every case is refused, so they share one world; each checks the foreign object afterwards.
    let world: World
    before(async () => {
      world = await buildWorld()
    })

    for (const idor of IDOR_CASES) {
      it(`${idor.name}: ${idor.method} → ${idor.expect.status} ${idor.expect.code}`, async () => {
        const who = world[idor.caller]
        const response = await call(idor.method, idor.url(world), bearer(who.token), idor.body?.(world))
        assert.equal(response.statusCode, idor.expect.status, response.body)
        assert.equal(response.json().code, idor.expect.code, response.body)
        await idor.untouched({ world, db: t.database.db })
      })
    }
  })
})
