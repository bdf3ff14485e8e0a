import assert from 'node:assert/strict'
import type { LightMyRequestResponse } from 'fastify'
import type { Database } from '../../src/db/database.ts'
import type { KeyScope } from '../../src/http/key-scopes.ts'
import { ADMIN_KEY } from './app.ts'

/**
 * The authorization matrix: every route of the service × every kind of caller → the
 * expected status and error code. test/http/authorization.test.ts runs every cell on both storages.
 *
 * The world every cell runs in: user `owner` owns wallet W (not their primary) and has W active;
 * `assigned` is assigned to W and has W active; `unrelated` has nothing to do with W (their own
 * primary wallet is active, and they are assigned to X); `other` owns wallet X (their primary).
 * `keyW` is a wallet key of W, `keyOther` one of X. `revokedUser` is a signed-out session of the
 * owner, `revokedKey` a deleted key of W. Routes on "the active wallet" act on the caller's own
 * active wallet, so a success by `unrelated` or `keyOther` must touch their wallet, never W: the
 * `check` of a route asserts that.
 */

export const CALLERS = [
  'nobody',
  'garbage',
  'revokedUser',
  'revokedKey',
  'keyW',
  'keyOther',
  'owner',
  'assigned',
  'unrelated',
  'admin',
] as const
export type Caller = (typeof CALLERS)[number]

export interface Actor {
  id: number
  username: string
  password: string
  token: string
  primaryWalletId: number
}

export interface World {
  owner: Actor
  assigned: Actor
  unrelated: Actor
  other: Actor
  /** A user with no wallet but their own: recipient of transfers, candidate for assignment. */
  target: Actor
  walletW: number
  walletX: number
  keyW: { id: number; token: string }
  /** Keys of W with every scope but one, by the scope each lacks: refused (K000) exactly on the routes needing it. */
  keysWithout: Record<KeyScope, string>
  keyOther: { id: number; token: string }
  revokedUserToken: string
  revokedKeyToken: string
  /** A second, live session of the owner, on their primary wallet. */
  ownerSecondSession: { id: number; token: string }
  /** A session of `other`. */
  otherSessionId: number
  goldId: number
  goldName: string
  /** An asset nobody holds: renamed and deleted by the admin routes. */
  spareAssetId: number
  /** A pending hold W → X (sent by W, received by X). */
  holdW: number
  /** An active monthly schedule of W, first due in an hour. */
  scheduleW: number
  /** A monitor of W's gold. */
  monitorW: number
  /** A webhook delivery of W and one of X (both wallets have a webhook). */
  deliveryW: number
  deliveryX: number
  /** A transfer X → W of 10 gold: refunded by W's callers and reversed by the operator, 1 gold at a time. */
  receivedByW: number
  /** A per-world counter for unique names. */
  unique(prefix: string): string
}

export interface Expect {
  status: number
  code?: string
}

export interface CheckContext {
  world: World
  caller: Caller
  /** The wallet the caller acts on (W, X or unrelated's primary); undefined for nobody/admin. */
  walletId: number | undefined
  /** The caller's user id, when the caller is a user. */
  userId: number | undefined
  db: Database['db']
}

export interface RouteCase {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE'
  /** The route as registered, e.g. `/wallet/users/:userid`. */
  route: string
  /** The concrete URL for a world (path parameters filled in with ids of W's side). */
  url?: (world: World) => string
  body?: (world: World, caller: Caller) => object
  expect: Record<Caller, Expect>
  /** Successful cells change the world: each gets a fresh world of its own. */
  fresh?: boolean
  /** A Server-Sent Events stream: sent over a real socket, only the head is read. */
  stream?: boolean
  /** Asserts that a successful answer concerns the caller's own wallet or user. */
  check?: (response: LightMyRequestResponse, context: CheckContext) => void | Promise<void>
}

const A000: Expect = { status: 401, code: 'A000' }
const A001: Expect = { status: 401, code: 'A001' }
const A003: Expect = { status: 403, code: 'A003' }

function error(status: number, code: string): Expect {
  return { status, code }
}

/** Everybody gets `status`: operations routes, registration and login. */
function everyone(status: number): Record<Caller, Expect> {
  return Object.fromEntries(CALLERS.map((caller) => [caller, { status }])) as Record<Caller, Expect>
}

/** User auth: a user session only; wallet keys and the admin key are the wrong kind (A001). */
function userAuth(users: { owner: Expect | number; assigned: Expect | number; unrelated: Expect | number }): Record<Caller, Expect> {
  const as = (value: Expect | number) => (typeof value === 'number' ? { status: value } : value)
  return {
    nobody: A000,
    garbage: A001,
    revokedUser: A001,
    revokedKey: A001,
    keyW: A001,
    keyOther: A001,
    owner: as(users.owner),
    assigned: as(users.assigned),
    unrelated: as(users.unrelated),
    admin: A001,
  }
}

/** Wallet auth: a user session (its active wallet) or a wallet key (its wallet); the admin key is A001. */
function walletAuth(status: number): Record<Caller, Expect> {
  const ok = { status }
  return {
    nobody: A000,
    garbage: A001,
    revokedUser: A001,
    revokedKey: A001,
    keyW: ok,
    keyOther: ok,
    owner: ok,
    assigned: ok,
    unrelated: ok,
    admin: A001,
  }
}

/** Admin routes: the admin key only; anything else (nothing included) is A003. */
function adminOnly(status: number): Record<Caller, Expect> {
  return { ...(Object.fromEntries(CALLERS.map((caller) => [caller, A003])) as Record<Caller, Expect>), admin: { status } }
}

/** Any authenticated caller. */
function anyCaller(status: number): Record<Caller, Expect> {
  const ok = { status }
  return {
    nobody: A000,
    garbage: A001,
    revokedUser: A001,
    revokedKey: A001,
    keyW: ok,
    keyOther: ok,
    owner: ok,
    assigned: ok,
    unrelated: ok,
    admin: ok,
  }
}

function ids(list: unknown): number[] {
  return (list as { id: number }[]).map((item) => item.id)
}

export const ROUTES: RouteCase[] = [
  // Operations and docs: public, but for the metrics (METRICS_TOKEN or the admin key).
  { method: 'GET', route: '/healthz', expect: everyone(200) },
  { method: 'GET', route: '/readyz', expect: everyone(200) },
  { method: 'GET', route: '/metrics', expect: adminOnly(200) },
  { method: 'GET', route: '/openapi.json', expect: everyone(200) },
  { method: 'GET', route: '/docs', expect: everyone(200) },

  // Registration and login: public (credentials sent along are ignored).
  { method: 'POST', route: '/users', body: (world) => ({ username: world.unique('reg'), password: 'long enough' }), expect: everyone(201) },
  {
    method: 'POST',
    route: '/users/:username/sessions',
    url: (world) => `/users/${world.target.username}/sessions`,
    body: (world) => ({ password: world.target.password, return_token: true }),
    expect: everyone(201),
    check: (response, { world }) => assert.equal(response.json().user_id, world.target.id),
  },

  // Account routes (user auth).
  {
    method: 'PUT',
    route: '/user/username',
    body: (world) => ({ username: world.unique('ren') }),
    expect: userAuth({ owner: 200, assigned: 200, unrelated: 200 }),
    fresh: true,
    check: (response, { userId }) => assert.equal(response.json().id, userId),
  },
  {
    method: 'PUT',
    route: '/user/password',
    body: () => ({ password: 'a new password' }),
    expect: userAuth({ owner: 200, assigned: 200, unrelated: 200 }),
    fresh: true,
  },
  {
    method: 'PUT',
    route: '/user/wallet',
    body: (world) => ({ wallet_id: world.walletW }),
    // Only the owner may make W their primary wallet.
    expect: userAuth({ owner: 200, assigned: error(404, 'W000'), unrelated: error(404, 'W000') }),
    fresh: true,
  },
  {
    method: 'GET',
    route: '/user/wallets',
    expect: userAuth({ owner: 200, assigned: 200, unrelated: 200 }),
    check: (response, { world, caller, userId }) => {
      for (const wallet of response.json() as { user_id: number }[]) assert.equal(wallet.user_id, userId)
      assert.equal(ids(response.json()).includes(world.walletW), caller === 'owner')
    },
  },
  {
    method: 'GET',
    route: '/user/assigned_wallets',
    expect: userAuth({ owner: 200, assigned: 200, unrelated: 200 }),
    check: (response, { world, caller }) => assert.equal(ids(response.json()).includes(world.walletW), caller === 'assigned'),
  },
  {
    method: 'POST',
    route: '/user/wallets',
    body: () => ({}),
    expect: userAuth({ owner: 201, assigned: 201, unrelated: 201 }),
    check: (response, { userId }) => assert.equal(response.json().user_id, userId),
  },
  {
    method: 'PUT',
    route: '/user/session/wallet',
    body: (world) => ({ wallet_id: world.walletW }),
    expect: userAuth({ owner: 200, assigned: 200, unrelated: error(404, 'W000') }),
    check: (response, { world, userId }) => {
      assert.equal(response.json().wallet_id, world.walletW)
      assert.equal(response.json().user_id, userId)
    },
  },
  {
    method: 'GET',
    route: '/user/session',
    expect: userAuth({ owner: 200, assigned: 200, unrelated: 200 }),
    check: (response, { walletId, userId }) => {
      assert.equal(response.json().wallet_id, walletId)
      assert.equal(response.json().user_id, userId)
    },
  },
  {
    method: 'GET',
    route: '/user/sessions',
    expect: userAuth({ owner: 200, assigned: 200, unrelated: 200 }),
    check: (response, { userId }) => {
      for (const session of response.json() as { user_id: number }[]) assert.equal(session.user_id, userId)
    },
  },
  { method: 'DELETE', route: '/user/session', expect: userAuth({ owner: 204, assigned: 204, unrelated: 204 }), fresh: true },
  {
    method: 'DELETE',
    route: '/user/sessions/:sessionid',
    url: (world) => `/user/sessions/${world.ownerSecondSession.id}`,
    // A session of the owner: only the owner may end it.
    expect: userAuth({ owner: 204, assigned: error(404, 'U004'), unrelated: error(404, 'U004') }),
    fresh: true,
  },
  { method: 'DELETE', route: '/user/sessions', expect: userAuth({ owner: 204, assigned: 204, unrelated: 204 }), fresh: true },

  // The active wallet's users, owner, keys, webhook and deletion (user auth).
  {
    method: 'POST',
    route: '/wallet/users',
    body: (world) => ({ username: world.target.username }),
    // Only the owner may assign (400 as the interface fixes); unrelated acts on their own wallet.
    expect: userAuth({ owner: 201, assigned: error(400, 'W006'), unrelated: 201 }),
    fresh: true,
  },
  {
    method: 'GET',
    route: '/wallet/users',
    expect: userAuth({ owner: 200, assigned: 200, unrelated: 200 }),
    check: (response, { world, caller }) => assert.equal(ids(response.json()).includes(world.assigned.id), caller !== 'unrelated'),
  },
  {
    method: 'DELETE',
    route: '/wallet/users/:userid',
    url: (world) => `/wallet/users/${world.assigned.id}`,
    expect: userAuth({ owner: 204, assigned: error(400, 'W006'), unrelated: error(404, 'U003') }),
    fresh: true,
  },
  {
    method: 'PUT',
    route: '/wallet/owner',
    body: (world) => ({ user_id: world.assigned.id }),
    // unrelated's active wallet is their primary wallet, which cannot change hands.
    expect: userAuth({ owner: 200, assigned: error(400, 'W006'), unrelated: error(400, 'W012') }),
    fresh: true,
  },
  {
    method: 'POST',
    route: '/wallet/sessions',
    body: () => ({ name: 'matrix' }),
    expect: userAuth({ owner: 201, assigned: 201, unrelated: 201 }),
    check: (response, { walletId }) => assert.equal(response.json().wallet_id, walletId),
  },
  {
    method: 'GET',
    route: '/wallet/sessions',
    expect: userAuth({ owner: 200, assigned: 200, unrelated: 200 }),
    check: (response, { world, walletId, caller }) => {
      for (const key of response.json() as { wallet_id: number }[]) assert.equal(key.wallet_id, walletId)
      assert.equal(ids(response.json()).includes(world.keyW.id), caller !== 'unrelated')
      for (const key of response.json() as object[]) assert.equal('token' in key, false)
    },
  },
  {
    method: 'DELETE',
    route: '/wallet/sessions/:sessionid',
    url: (world) => `/wallet/sessions/${world.keyW.id}`,
    expect: userAuth({ owner: 204, assigned: 204, unrelated: error(404, 'W005') }),
    fresh: true,
  },
  { method: 'DELETE', route: '/wallet/sessions', expect: userAuth({ owner: 204, assigned: 204, unrelated: 204 }), fresh: true },
  {
    method: 'PUT',
    route: '/wallet/webhook',
    body: () => ({ webhook: 'http://127.0.0.1:9/matrix' }),
    expect: userAuth({ owner: 200, assigned: 200, unrelated: 200 }),
    fresh: true,
  },
  {
    method: 'GET',
    route: '/wallet/webhook',
    expect: userAuth({ owner: 200, assigned: 200, unrelated: 200 }),
    check: (response, { caller }) => assert.equal(response.json().webhook === null, caller === 'unrelated'),
  },
  { method: 'DELETE', route: '/wallet/webhook', expect: userAuth({ owner: 204, assigned: 204, unrelated: 204 }), fresh: true },
  {
    method: 'GET',
    route: '/wallet/webhook/deliveries',
    expect: userAuth({ owner: 200, assigned: 200, unrelated: 200 }),
    check: async (response, { db, walletId }) => {
      const listed = ids(response.json())
      if (listed.length === 0) return
      const rows = await db.selectFrom('webhook_deliveries').select(['id', 'wallet_id']).where('id', 'in', listed).execute()
      for (const row of rows) assert.equal(row.wallet_id, walletId)
    },
  },
  {
    method: 'POST',
    route: '/wallet/webhook/deliveries/:id/retry',
    url: (world) => `/wallet/webhook/deliveries/${world.deliveryW}/retry`,
    expect: userAuth({ owner: 202, assigned: 202, unrelated: error(404, 'G006') }),
  },
  {
    method: 'DELETE',
    route: '/wallet',
    // Only the owner; unrelated's active wallet is their primary wallet.
    expect: userAuth({ owner: 204, assigned: error(400, 'W006'), unrelated: error(400, 'W008') }),
    fresh: true,
  },

  // The general wallet routes (wallet auth).
  {
    method: 'GET',
    route: '/wallet/assets',
    expect: walletAuth(200),
    check: async (response, { db, walletId }) => {
      const held = await db
        .selectFrom('holdings')
        .select(['asset_id', 'quantity'])
        .where('wallet_id', '=', walletId as number)
        .where('quantity', '>', 0)
        .orderBy('asset_id')
        .execute()
      const shown = (response.json() as { asset: { id: number }; quantity: number }[]).map((holding) => ({
        asset_id: holding.asset.id,
        quantity: holding.quantity,
      }))
      assert.deepEqual(
        shown.sort((a, b) => a.asset_id - b.asset_id),
        held,
      )
    },
  },
  {
    method: 'POST',
    route: '/wallet/transactions',
    body: (world) => ({ recipient: world.target.username, memo: 'matrix', assets: { [world.goldName]: 1 } }),
    expect: walletAuth(201),
    check: (response, { walletId }) => assert.equal(response.json().sending_wallet_id, walletId),
  },
  {
    method: 'POST',
    route: '/wallet/transactions/batch',
    body: (world) => ({ transfers: [{ recipient: world.target.username, memo: 'matrix', assets: { [world.goldName]: 1 } }] }),
    expect: walletAuth(201),
    check: (response, { walletId }) =>
      assert.deepEqual(
        (response.json().transactions as { sending_wallet_id: number }[]).map((t) => t.sending_wallet_id),
        [walletId],
      ),
  },
  {
    method: 'GET',
    route: '/wallet/transactions',
    expect: walletAuth(200),
    check: (response, { walletId }) => {
      const list = response.json() as { sending_wallet_id: number; receiving_wallet_id: number }[]
      assert.ok(list.length > 0)
      for (const entry of list) assert.ok(entry.sending_wallet_id === walletId || entry.receiving_wallet_id === walletId)
    },
  },
  {
    method: 'POST',
    route: '/wallet/transactions/:id/refund',
    url: (world) => `/wallet/transactions/${world.receivedByW}/refund`,
    body: () => ({ assets: { gold: 1 } }),
    // Only the receiving wallet may refund: the callers acting on another wallet find no such transaction.
    expect: { ...walletAuth(201), keyOther: error(404, 'T000'), unrelated: error(404, 'T000') },
    check: (response, { walletId, world }) => {
      assert.equal(response.json().sending_wallet_id, walletId)
      assert.equal(response.json().reverses, world.receivedByW)
    },
  },
  { method: 'GET', route: '/wallet/events', expect: walletAuth(200), stream: true },

  // Holds (wallet auth): the sender captures; either side reads and voids; anyone else gets H000.
  {
    method: 'POST',
    route: '/wallet/holds',
    body: (world) => ({ recipient: world.target.username, memo: 'matrix', assets: { [world.goldName]: 1 } }),
    expect: walletAuth(201),
    check: (response, { walletId }) => assert.equal(response.json().sending_wallet_id, walletId),
  },
  {
    method: 'GET',
    route: '/wallet/holds',
    expect: walletAuth(200),
    check: (response, { walletId }) => {
      for (const hold of response.json() as { sending_wallet_id: number; receiving_wallet_id: number }[])
        assert.ok(hold.sending_wallet_id === walletId || hold.receiving_wallet_id === walletId)
    },
  },
  {
    method: 'GET',
    route: '/wallet/holds/:id',
    url: (world) => `/wallet/holds/${world.holdW}`,
    expect: { ...walletAuth(200), unrelated: error(404, 'H000') },
    check: (response, { walletId }) =>
      assert.ok(response.json().sending_wallet_id === walletId || response.json().receiving_wallet_id === walletId),
  },
  {
    method: 'POST',
    route: '/wallet/holds/:id/capture',
    url: (world) => `/wallet/holds/${world.holdW}/capture`,
    // The receiving wallet (X, keyOther's) may not capture either.
    expect: { ...walletAuth(201), keyOther: error(404, 'H000'), unrelated: error(404, 'H000') },
    fresh: true,
    check: (response, { walletId }) => assert.equal(response.json().sending_wallet_id, walletId),
  },
  {
    method: 'POST',
    route: '/wallet/holds/:id/void',
    url: (world) => `/wallet/holds/${world.holdW}/void`,
    expect: { ...walletAuth(200), unrelated: error(404, 'H000') },
    fresh: true,
    check: (response, { walletId }) =>
      assert.ok(response.json().sending_wallet_id === walletId || response.json().receiving_wallet_id === walletId),
  },

  // Schedules (wallet auth): only the paying wallet's callers see or change them; anyone else gets R000.
  {
    method: 'POST',
    route: '/wallet/schedules',
    body: (world) => ({
      recipient: world.target.username,
      assets: { [world.goldName]: 1 },
      start_at: new Date(Date.now() + 3_600_000).toISOString(),
    }),
    expect: walletAuth(201),
    check: (response, { walletId }) => assert.equal(response.json().wallet_id, walletId),
  },
  {
    method: 'GET',
    route: '/wallet/schedules',
    expect: walletAuth(200),
    check: (response, { walletId }) => {
      for (const schedule of response.json() as { wallet_id: number }[]) assert.equal(schedule.wallet_id, walletId)
    },
  },
  ...(['', '/upcoming', '/runs'] as const).map((suffix): RouteCase => ({
    method: 'GET',
    route: `/wallet/schedules/:id${suffix}`,
    url: (world) => `/wallet/schedules/${world.scheduleW}${suffix}`,
    expect: { ...walletAuth(200), keyOther: error(404, 'R000'), unrelated: error(404, 'R000') },
  })),
  ...(['pause', 'resume'] as const).map((action): RouteCase => ({
    method: 'POST',
    route: `/wallet/schedules/:id/${action}`,
    url: (world) => `/wallet/schedules/${world.scheduleW}/${action}`,
    expect: { ...walletAuth(200), keyOther: error(404, 'R000'), unrelated: error(404, 'R000') },
    fresh: true,
    check: (response, { walletId }) => assert.equal(response.json().wallet_id, walletId),
  })),
  {
    method: 'DELETE',
    route: '/wallet/schedules/:id',
    url: (world) => `/wallet/schedules/${world.scheduleW}`,
    expect: { ...walletAuth(200), keyOther: error(404, 'R000'), unrelated: error(404, 'R000') },
    fresh: true,
    check: (response, { walletId }) => {
      assert.equal(response.json().status, 'cancelled')
      assert.equal(response.json().wallet_id, walletId)
    },
  },
  { method: 'GET', route: '/admin/schedules', expect: adminOnly(200) },

  // Monitors (wallet auth): each caller sees and deletes only its wallet's; anyone else gets M000.
  {
    method: 'POST',
    route: '/wallet/monitors',
    body: (world) => ({ asset: world.goldName, above: 1000 }),
    expect: walletAuth(201),
  },
  { method: 'GET', route: '/wallet/monitors', expect: walletAuth(200) },
  {
    method: 'DELETE',
    route: '/wallet/monitors/:id',
    url: (world) => `/wallet/monitors/${world.monitorW}`,
    expect: { ...walletAuth(204), keyOther: error(404, 'M000'), unrelated: error(404, 'M000') },
    fresh: true,
  },

  // Assets and issuance (admin; the asset list for any authenticated caller).
  { method: 'GET', route: '/assets', expect: anyCaller(200) },
  { method: 'POST', route: '/assets', body: (world) => ({ name: world.unique('asset'), value: 1 }), expect: adminOnly(201) },
  {
    method: 'PUT',
    route: '/assets/:id/value',
    url: (world) => `/assets/${world.goldId}/value`,
    body: () => ({ value: 2 }),
    expect: adminOnly(200),
  },
  {
    method: 'PUT',
    route: '/assets/:id/name',
    url: (world) => `/assets/${world.spareAssetId}/name`,
    body: (world) => ({ name: world.unique('renamed') }),
    expect: adminOnly(200),
  },
  { method: 'DELETE', route: '/assets/:id', url: (world) => `/assets/${world.spareAssetId}`, expect: adminOnly(204), fresh: true },
  {
    method: 'POST',
    route: '/wallets/:walletid/assets',
    url: (world) => `/wallets/${world.walletW}/assets`,
    body: (world) => ({ id: world.goldId, quantity: 1 }),
    expect: adminOnly(201),
  },
  {
    method: 'POST',
    route: '/issuances',
    body: (world) => ({ asset_id: world.goldId, entries: [{ wallet_id: world.walletW, quantity: 1 }] }),
    expect: adminOnly(201),
  },
  {
    method: 'DELETE',
    route: '/wallets/:walletid/assets/:assetid',
    url: (world) => `/wallets/${world.walletW}/assets/${world.goldId}?quantity=1`,
    expect: adminOnly(204),
  },
  {
    method: 'PUT',
    route: '/wallets/:walletid/credit',
    url: (world) => `/wallets/${world.walletX}/credit`,
    body: (world) => ({ asset_id: world.goldId, limit: 0 }),
    expect: adminOnly(200),
  },
  {
    method: 'POST',
    route: '/transactions/:id/reversal',
    url: (world) => `/transactions/${world.receivedByW}/reversal`,
    body: () => ({ assets: { gold: 1 } }),
    expect: adminOnly(201),
  },

  // Operator sessions of the console (opened with the admin key in the body) and the operator's reads.
  { method: 'POST', route: '/admin/sessions', body: () => ({ key: ADMIN_KEY }), expect: everyone(201) },
  { method: 'DELETE', route: '/admin/session', expect: adminOnly(204) },
  { method: 'GET', route: '/admin/overview', expect: adminOnly(200) },
  { method: 'GET', route: '/admin/wallets', expect: adminOnly(200) },
  { method: 'GET', route: '/admin/wallets/:id', url: (world) => `/admin/wallets/${world.walletW}`, expect: adminOnly(200) },
  { method: 'GET', route: '/admin/transactions', expect: adminOnly(200) },
  { method: 'GET', route: '/admin/verification', expect: adminOnly(200) },

  // The journal: the feed (admin), the key (public), checkpoints and consistency (any caller), proofs (wallet auth).
  { method: 'GET', route: '/admin/journal', url: () => '/admin/journal?limit=5', expect: adminOnly(200) },
  { method: 'GET', route: '/admin/journal/stream', expect: adminOnly(200), stream: true },
  { method: 'GET', route: '/journal/key', expect: everyone(200) },
  { method: 'GET', route: '/journal/checkpoint', expect: anyCaller(200) },
  { method: 'GET', route: '/journal/consistency', url: () => '/journal/consistency?from=1&to=1', expect: anyCaller(200) },
  {
    method: 'GET',
    route: '/wallet/transactions/:id/proof',
    url: (world) => `/wallet/transactions/${world.receivedByW}/proof`,
    // Either side may prove it (X sent it to W); a wallet of neither side finds no such transaction.
    expect: { ...walletAuth(200), unrelated: error(404, 'T000') },
    check: (response, { world }) => assert.equal(response.json().transaction.id, world.receivedByW),
  },
]

/** Routes that serve files or exist only for browsers; not API routes of their own. */
export const NOT_IN_MATRIX = [/^\/docs\/.+/]

export interface IdorCase {
  name: string
  caller: 'owner' | 'assigned' | 'unrelated' | 'other'
  method: 'POST' | 'PUT' | 'DELETE'
  url: (world: World) => string
  body?: (world: World) => object
  expect: Expect
  /** Asserts that the other party's object is untouched afterwards. */
  untouched: (context: { world: World; db: Database['db'] }) => Promise<void>
}

async function sessionLives(db: Database['db'], sessionId: number): Promise<void> {
  assert.ok(
    await db.selectFrom('user_sessions').select('id').where('id', '=', sessionId).executeTakeFirst(),
    `session ${sessionId} was ended`,
  )
}

async function keyLives(db: Database['db'], keyId: number): Promise<void> {
  assert.ok(
    await db.selectFrom('wallet_sessions').select('id').where('id', '=', keyId).executeTakeFirst(),
    `wallet key ${keyId} was revoked`,
  )
}

async function assignedTo(db: Database['db'], walletId: number, userId: number): Promise<void> {
  const row = await db
    .selectFrom('wallet_users')
    .select('user_id')
    .where('wallet_id', '=', walletId)
    .where('user_id', '=', userId)
    .executeTakeFirst()
  assert.ok(row, `user ${userId} is no longer assigned to wallet ${walletId}`)
}

async function ownedBy(db: Database['db'], walletId: number, userId: number): Promise<void> {
  const row = await db.selectFrom('wallets').select(['user_id', 'deleted_at']).where('id', '=', walletId).executeTakeFirstOrThrow()
  assert.equal(row.user_id, userId)
  assert.equal(row.deleted_at, null)
}

async function primaryOf(db: Database['db'], userId: number, walletId: number): Promise<void> {
  const row = await db.selectFrom('users').select('primary_wallet_id').where('id', '=', userId).executeTakeFirstOrThrow()
  assert.equal(row.primary_wallet_id, walletId)
}

/** Every path (and body) id tried with an id that belongs to someone else. */
export const IDOR_CASES: IdorCase[] = [
  {
    name: "ending another user's session",
    caller: 'owner',
    method: 'DELETE',
    url: (world) => `/user/sessions/${world.otherSessionId}`,
    expect: error(404, 'U004'),
    untouched: ({ world, db }) => sessionLives(db, world.otherSessionId),
  },
  {
    name: "ending the owner's session as the assigned user",
    caller: 'assigned',
    method: 'DELETE',
    url: (world) => `/user/sessions/${world.ownerSecondSession.id}`,
    expect: error(404, 'U004'),
    untouched: ({ world, db }) => sessionLives(db, world.ownerSecondSession.id),
  },
  {
    name: 'removing a user assigned to another wallet',
    caller: 'owner',
    method: 'DELETE',
    url: (world) => `/wallet/users/${world.unrelated.id}`,
    expect: error(404, 'U003'),
    untouched: ({ world, db }) => assignedTo(db, world.walletX, world.unrelated.id),
  },
  {
    name: "removing W's assigned user from another wallet",
    caller: 'other',
    method: 'DELETE',
    url: (world) => `/wallet/users/${world.assigned.id}`,
    expect: error(404, 'U003'),
    untouched: ({ world, db }) => assignedTo(db, world.walletW, world.assigned.id),
  },
  {
    name: "revoking another wallet's key",
    caller: 'owner',
    method: 'DELETE',
    url: (world) => `/wallet/sessions/${world.keyOther.id}`,
    expect: error(404, 'W005'),
    untouched: ({ world, db }) => keyLives(db, world.keyOther.id),
  },
  {
    name: "revoking W's key from another wallet",
    caller: 'other',
    method: 'DELETE',
    url: (world) => `/wallet/sessions/${world.keyW.id}`,
    expect: error(404, 'W005'),
    untouched: ({ world, db }) => keyLives(db, world.keyW.id),
  },
  {
    name: "retrying another wallet's webhook delivery",
    caller: 'owner',
    method: 'POST',
    url: (world) => `/wallet/webhook/deliveries/${world.deliveryX}/retry`,
    expect: error(404, 'G006'),
    untouched: async ({ world, db }) => {
      const row = await db.selectFrom('webhook_deliveries').select('wallet_id').where('id', '=', world.deliveryX).executeTakeFirstOrThrow()
      assert.equal(row.wallet_id, world.walletX)
    },
  },
  {
    name: "retrying W's webhook delivery from another wallet",
    caller: 'other',
    method: 'POST',
    url: (world) => `/wallet/webhook/deliveries/${world.deliveryW}/retry`,
    expect: error(404, 'G006'),
    untouched: async ({ world, db }) => {
      const row = await db.selectFrom('webhook_deliveries').select('wallet_id').where('id', '=', world.deliveryW).executeTakeFirstOrThrow()
      assert.equal(row.wallet_id, world.walletW)
    },
  },
  {
    name: "making another user's wallet one's primary wallet",
    caller: 'owner',
    method: 'PUT',
    url: () => '/user/wallet',
    body: (world) => ({ wallet_id: world.walletX }),
    expect: error(404, 'W000'),
    untouched: ({ world, db }) => primaryOf(db, world.owner.id, world.owner.primaryWalletId),
  },
  {
    name: "making the mint one's primary wallet",
    caller: 'owner',
    method: 'PUT',
    url: () => '/user/wallet',
    body: () => ({ wallet_id: 1 }),
    expect: error(404, 'W000'),
    untouched: ({ world, db }) => primaryOf(db, world.owner.id, world.owner.primaryWalletId),
  },
  {
    name: "acting on another user's wallet",
    caller: 'owner',
    method: 'PUT',
    url: () => '/user/session/wallet',
    body: (world) => ({ wallet_id: world.walletX }),
    expect: error(404, 'W000'),
    untouched: async ({ world, db }) => {
      const row = await db
        .selectFrom('user_sessions')
        .select('id')
        .where('user_id', '=', world.owner.id)
        .where('wallet_id', '=', world.walletX)
        .executeTakeFirst()
      assert.equal(row, undefined)
    },
  },
  {
    name: 'acting on the mint wallet',
    caller: 'owner',
    method: 'PUT',
    url: () => '/user/session/wallet',
    body: () => ({ wallet_id: 1 }),
    expect: error(404, 'W000'),
    untouched: async ({ db }) => {
      const row = await db.selectFrom('user_sessions').select('id').where('wallet_id', '=', 1).executeTakeFirst()
      assert.equal(row, undefined)
    },
  },
  {
    name: 'handing W to a user who is not assigned to it',
    caller: 'owner',
    method: 'PUT',
    url: () => '/wallet/owner',
    body: (world) => ({ user_id: world.other.id }),
    expect: error(400, 'W007'),
    untouched: ({ world, db }) => ownedBy(db, world.walletW, world.owner.id),
  },
  {
    name: 'sending to the mint wallet by id',
    caller: 'owner',
    method: 'POST',
    url: () => '/wallet/transactions',
    body: (world) => ({ recipient: 1, type: 2, assets: { [world.goldName]: 1 } }),
    expect: error(404, 'W000'),
    untouched: async () => {},
  },
  {
    name: 'sending to the mint wallet by address',
    caller: 'owner',
    method: 'POST',
    url: () => '/wallet/transactions',
    body: (world) => ({ recipient: 'mint', type: 1, assets: { [world.goldName]: 1 } }),
    expect: error(404, 'W000'),
    untouched: async () => {},
  },
]
