import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { Ajv, type ValidateFunction } from 'ajv'
import addFormats from 'ajv-formats'
import fc from 'fast-check'
import { sql } from 'kysely'
import { insertUser, insertUserSession, updateUser } from '../../src/accounts/accounts.repository.ts'
import { inTransaction } from '../../src/db/dialect.ts'
import { ERRORS } from '../../src/http/errors.ts'
import { createToken, hashToken } from '../../src/http/tokens.ts'
import { verifyLedger } from '../../src/ledger/verify.ts'
import { createWalletFor } from '../../src/wallets/wallets.service.ts'
import { buildTestApp, type TestApp } from '../helpers/app.ts'
import { createUser, type TestUser } from '../helpers/factories.ts'

/**
 * Property-based tests (fast-check):
 *  1. random request bodies, path ids and queries against every route's schema: never a 500; a
 *     body the route's schema refuses gets 400 G000, and whatever else comes back is a contract
 *     code;
 *  2. random sequences of issue / transfer / burn / assign / delete-wallet / batch / issuance to
 *     many / hold / capture / void run against the
 *     service and a small in-memory model: identical outcomes, holdings never negative, each
 *     asset summing to zero with mint.
 * Runs are kept modest so that the suite stays fast; FC_RUNS scales them (e.g. FC_RUNS=1000).
 */

const SCALE = Number(process.env.FC_RUNS ?? 0) > 0 ? Number(process.env.FC_RUNS) / 100 : 1
const BODY_RUNS = Math.round(60 * SCALE)
const SEQUENCE_RUNS = Math.round(50 * SCALE)
const MAX = Number.MAX_SAFE_INTEGER
const MINT = 1

interface Answer {
  status: number
  code?: string
}

function answerOf(response: { statusCode: number; body: string }): Answer {
  if (response.statusCode < 400) return { status: response.statusCode }
  const body = JSON.parse(response.body) as { code: string; message: string; request_id: string }
  assert.equal(typeof body.message, 'string', response.body)
  assert.equal(typeof body.request_id, 'string', response.body)
  return { status: response.statusCode, code: body.code }
}

/** Strings neither storage can keep: the service refuses them in any body (G000). */
function hasUnstorableText(value: unknown): boolean {
  if (typeof value === 'string')
    return value.includes('\u0000') || /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(value)
  if (Array.isArray(value)) return value.some(hasUnstorableText)
  if (value !== null && typeof value === 'object')
    return Object.entries(value).some(([key, item]) => hasUnstorableText(key) || hasUnstorableText(item))
  return false
}

/** JSON literals that JSON.stringify never writes but clients do. */
const ODD_LITERALS = [
  '1e309',
  '-1e309',
  '-0',
  '0',
  '1.5',
  '1e3',
  '9007199254740992',
  '9007199254740993',
  '-1',
  '"5"',
  '""',
  'null',
  'true',
  '[]',
  '{}',
  '"\\u0000"',
  '"\\ud800"',
  '"gold"',
  '"a b"',
  `"${'x'.repeat(300)}"`,
]

/** A JSON text: anything at all, or an object with the route's own field names and odd values. */
function bodyText(fields: string[]): fc.Arbitrary<string> {
  const value = fc.oneof(
    { weight: 3, arbitrary: fc.jsonValue({ maxDepth: 2 }).map((item) => JSON.stringify(item) ?? 'null') },
    { weight: 2, arbitrary: fc.constantFrom(...ODD_LITERALS) },
    { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 40 }).map((text) => JSON.stringify(text)) },
    { weight: 2, arbitrary: fc.integer({ min: -5, max: 100_000 }).map(String) },
    {
      weight: 1,
      arbitrary: fc
        .dictionary(
          fc.constantFrom('gold', 'silver', 'GOLD', 'nope', 'x y', ''),
          fc.constantFrom('1', '2', '0', '-1', '1.5', '1e309', '"1"'),
        )
        .map(
          (map) =>
            `{${Object.entries(map)
              .map(([key, raw]) => `${JSON.stringify(key)}:${raw}`)
              .join(',')}}`,
        ),
    },
  )
  const shaped = fc
    .uniqueArray(fc.constantFrom(...fields, 'extra'), { maxLength: fields.length + 1 })
    .chain((keys) => fc.tuple(...keys.map((key) => value.map((raw) => `${JSON.stringify(key)}:${raw}`))))
    .map((entries) => `{${entries.join(',')}}`)
  return fc.oneof(
    { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 3 }).map((item) => JSON.stringify(item) ?? 'null') },
    { weight: 4, arbitrary: shaped },
  )
}

interface BodyRoute {
  method: 'POST' | 'PUT'
  /** As in the OpenAPI document. */
  path: string
  url: () => string
  headers: () => Record<string, string>
}

describe('random requests against every route schema', () => {
  let t: TestApp
  let alice: TestUser
  let renamer: TestUser
  let hooker: TestUser
  let signedOut: TestUser
  let goldId: number
  let spareId: number
  let runs = 0

  before(async () => {
    t = await buildTestApp()
    if (t.database.dialect === 'sqlite') await sql`pragma synchronous = off`.execute(t.database.db)
    alice = await createUser(t.app)
    renamer = await createUser(t.app)
    hooker = await createUser(t.app)
    signedOut = await createUser(t.app)
    goldId = (await t.app.inject({ method: 'POST', url: '/assets', headers: t.admin, payload: { name: 'gold', value: 1 } })).json().id
    spareId = (await t.app.inject({ method: 'POST', url: '/assets', headers: t.admin, payload: { name: 'spare', value: 1 } })).json().id
    await t.app.inject({
      method: 'POST',
      url: `/wallets/${alice.walletId}/assets`,
      headers: t.admin,
      payload: { id: goldId, quantity: 1_000_000 },
    })
  })
  after(async () => {
    await t.close()
  })

  function bodySchema(path: string, method: string): object {
    const doc = t.app.swagger() as {
      paths: Record<string, Record<string, { requestBody?: { content: Record<string, { schema: object }> } }>>
    }
    const schema = doc.paths[path]?.[method.toLowerCase()]?.requestBody?.content['application/json']?.schema
    assert.ok(schema, `no body schema for ${method} ${path}`)
    return schema
  }

  it('never answers a 500; bodies the schema refuses get 400 G000; everything else is a contract answer', async () => {
    const ajv = new Ajv({ coerceTypes: false, removeAdditional: true, useDefaults: true, allErrors: false, strict: false })
    addFormats.default(ajv)
    // Users whose password or name may change get routes of their own; so does the webhook, on a
    // wallet that receives nothing while a random URL is set, so no delivery leaves 127.0.0.1.
    const as = (user: TestUser) => () => user.auth
    const routes: BodyRoute[] = [
      { method: 'POST', path: '/users', url: () => '/users', headers: () => ({}) },
      { method: 'POST', path: '/users/{username}/sessions', url: () => `/users/${alice.username}/sessions`, headers: () => ({}) },
      { method: 'PUT', path: '/user/username', url: () => '/user/username', headers: as(renamer) },
      { method: 'PUT', path: '/user/password', url: () => '/user/password', headers: as(renamer) },
      { method: 'PUT', path: '/user/wallet', url: () => '/user/wallet', headers: as(renamer) },
      { method: 'POST', path: '/user/wallets', url: () => '/user/wallets', headers: as(renamer) },
      { method: 'PUT', path: '/user/session/wallet', url: () => '/user/session/wallet', headers: as(renamer) },
      { method: 'POST', path: '/wallet/users', url: () => '/wallet/users', headers: as(renamer) },
      { method: 'PUT', path: '/wallet/owner', url: () => '/wallet/owner', headers: as(renamer) },
      { method: 'POST', path: '/wallet/sessions', url: () => '/wallet/sessions', headers: as(renamer) },
      { method: 'POST', path: '/wallet/transactions', url: () => '/wallet/transactions', headers: as(alice) },
      { method: 'POST', path: '/assets', url: () => '/assets', headers: () => t.admin },
      { method: 'PUT', path: '/assets/{id}/value', url: () => `/assets/${spareId}/value`, headers: () => t.admin },
      { method: 'PUT', path: '/assets/{id}/name', url: () => `/assets/${spareId}/name`, headers: () => t.admin },
      { method: 'POST', path: '/wallets/{walletid}/assets', url: () => `/wallets/${alice.walletId}/assets`, headers: () => t.admin },
      // Last, and removed right after: while a random URL is set, no event may reach it.
      { method: 'PUT', path: '/wallet/webhook', url: () => '/wallet/webhook', headers: as(hooker) },
    ]
    for (const route of routes) {
      const schema = bodySchema(route.path, route.method) as { properties?: Record<string, unknown> }
      const validate: ValidateFunction = ajv.compile(schema)
      const fields = Object.keys(schema.properties ?? {})
      await fc.assert(
        fc.asyncProperty(bodyText(fields), async (text) => {
          runs++
          const response = await t.app.inject({
            method: route.method,
            url: route.url(),
            headers: { ...route.headers(), 'content-type': 'application/json' },
            payload: text,
          })
          const where = `${route.method} ${route.path} with ${text.slice(0, 200)} → ${response.statusCode} ${response.body.slice(0, 200)}`
          assert.ok(response.statusCode < 500, where)
          const answer = answerOf(response)
          if (answer.code !== undefined) assert.ok(answer.code in ERRORS, where)
          const parsed: unknown = JSON.parse(text)
          const refused = hasUnstorableText(parsed) || !validate(structuredClone(parsed))
          if (refused) assert.deepEqual(answer, { status: 400, code: 'G000' }, where)
        }),
        { numRuns: BODY_RUNS },
      )
    }
    assert.equal((await t.app.inject({ method: 'DELETE', url: '/wallet/webhook', headers: hooker.auth })).statusCode, 204)
  })

  it('answers random path ids with G001 or a contract code, never a 500', async () => {
    const segment = fc.oneof(
      fc.string({ unit: 'binary', minLength: 1, maxLength: 24 }),
      fc.constantFrom('1e3', '99999999999999999999', '9007199254740993', '0', '-1', '01', '1.0', ' 1', '%', '%00', '..', '1/2'),
      fc.integer({ min: 1, max: 100 }).map(String),
      fc.bigInt({ min: 1n, max: 10n ** 30n }).map(String),
    )
    const routes: {
      method: 'PUT' | 'POST' | 'DELETE'
      url: (id: string) => string
      headers: () => Record<string, string>
      payload?: object
    }[] = [
      { method: 'PUT', url: (id) => `/assets/${id}/value`, headers: () => t.admin, payload: { value: 1 } },
      { method: 'DELETE', url: (id) => `/assets/${id}`, headers: () => t.admin },
      { method: 'POST', url: (id) => `/wallets/${id}/assets`, headers: () => t.admin, payload: { id: goldId, quantity: 1 } },
      { method: 'DELETE', url: (id) => `/wallets/${id}/assets/${goldId}?quantity=1`, headers: () => t.admin },
      // A random id may be the caller's own session: it signs in again after ending it.
      { method: 'DELETE', url: (id) => `/user/sessions/${id}`, headers: () => signedOut.auth },
      { method: 'DELETE', url: (id) => `/wallet/users/${id}`, headers: () => hooker.auth },
      { method: 'DELETE', url: (id) => `/wallet/sessions/${id}`, headers: () => hooker.auth },
      { method: 'POST', url: (id) => `/wallet/webhook/deliveries/${id}/retry`, headers: () => hooker.auth },
      { method: 'POST', url: (id) => `/users/${id}/sessions`, headers: () => ({}), payload: { password: 'not the password' } },
    ]
    for (const route of routes) {
      await fc.assert(
        fc.asyncProperty(segment, async (raw) => {
          runs++
          const id = /^[0-9]+$/.test(raw) ? raw : encodeURIComponent(raw)
          const response = await t.app.inject({
            method: route.method,
            url: route.url(id),
            headers: route.headers(),
            payload: route.payload,
          })
          const where = `${route.method} ${route.url(id)} → ${response.statusCode} ${response.body.slice(0, 200)}`
          if (response.statusCode === 204 && route.url(id).startsWith('/user/sessions/')) {
            const login = await t.app.inject({
              method: 'POST',
              url: `/users/${signedOut.username}/sessions`,
              payload: { password: signedOut.password, return_token: true },
            })
            signedOut = { ...signedOut, auth: { authorization: `Bearer ${login.json().token}` } }
          }
          assert.ok(response.statusCode < 500, where)
          const answer = answerOf(response)
          if (answer.code !== undefined) assert.ok(answer.code in ERRORS, where)
          const valid = /^[1-9][0-9]{0,15}$/.test(raw) && Number.isSafeInteger(Number(raw))
          // `.` and `..` are path navigation, not ids: the URL names another route (or none).
          if (!valid && !route.url('x').startsWith('/users/') && raw !== '.' && raw !== '..')
            assert.deepEqual(answer, { status: 400, code: 'G001' }, where)
        }),
        { numRuns: BODY_RUNS },
      )
    }
  })

  it('answers random queries with 200 or G002, never a 500', async () => {
    const key = fc.constantFrom('limit', 'offset', 'before', 'after', 'asset', 'direction', 'since', 'until', 'status', 'quantity', 'other')
    const value = fc.oneof(
      fc.string({ unit: 'binary', maxLength: 30 }),
      fc.constantFrom(
        '1',
        '0',
        '-1',
        '100',
        '101',
        '1e3',
        '10001',
        'sent',
        'received',
        'pending',
        '2026-11-21T22:25:29.123Z',
        '2026-13-01',
        'gold',
        '99999999999999999999',
      ),
    )
    const query = fc.array(fc.tuple(key, value), { maxLength: 4 }).map((pairs) => new URLSearchParams(pairs).toString())
    for (const [path, headers] of [
      ['/wallet/transactions', () => alice.auth],
      ['/wallet/webhook/deliveries', () => hooker.auth],
    ] as const) {
      await fc.assert(
        fc.asyncProperty(query, async (search) => {
          runs++
          const response = await t.app.inject({ method: 'GET', url: `${path}?${search}`, headers: headers() })
          const where = `GET ${path}?${search} → ${response.statusCode} ${response.body.slice(0, 200)}`
          assert.ok(response.statusCode === 200 || (response.statusCode === 400 && response.json().code === 'G002'), where)
        }),
        { numRuns: BODY_RUNS },
      )
    }
  })

  after(() => {
    console.log(`${runs} random requests`)
  })
})

// ---------------------------------------------------------------------------------------------
// Model-based sequences.

const USERS = 3
/** Wallets 0-2 are the users' primary wallets, 3-5 a second wallet of each user. */
const WALLETS = 6
const ASSETS = 2

type Op =
  | { kind: 'issue'; wallet: number; asset: number; quantity: number }
  | { kind: 'burn'; wallet: number; asset: number; quantity: number | undefined }
  | { kind: 'transfer'; actor: number | 'owner'; from: number; to: number; by: 0 | 1 | 2; lines: { asset: number; quantity: number }[] }
  | { kind: 'assign'; actor: number | 'owner'; wallet: number; user: number }
  | { kind: 'delete'; actor: number | 'owner'; wallet: number }
  | RefundOp
  | BatchOp
  | IssuancesOp
  | HoldOp
  | CaptureOp
  | VoidOp

/** POST /wallet/transactions/batch from one wallet: 1-4 transfers, atomic or not. */
interface BatchOp {
  kind: 'batch'
  actor: number | 'owner'
  from: number
  atomic: boolean
  transfers: { to: number; by: 0 | 1 | 2; lines: { asset: number; quantity: number }[] }[]
}

/** POST /issuances: one asset to 1-4 wallets. */
interface IssuancesOp {
  kind: 'issuances'
  asset: number
  entries: { wallet: number; quantity: number }[]
}

const quantity = fc.oneof(
  { weight: 12, arbitrary: fc.integer({ min: 1, max: 60 }) },
  { weight: 1, arbitrary: fc.integer({ min: MAX - 100, max: MAX }) },
)
const walletIndex = fc.integer({ min: 0, max: WALLETS - 1 })
const assetIndex = fc.integer({ min: 0, max: ASSETS - 1 })
const actor = fc.oneof(
  { weight: 4, arbitrary: fc.constant('owner' as const) },
  { weight: 1, arbitrary: fc.integer({ min: 0, max: USERS - 1 }) },
)

const op: fc.Arbitrary<Op> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('issue' as const), wallet: walletIndex, asset: assetIndex, quantity }) },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('burn' as const),
      wallet: walletIndex,
      asset: assetIndex,
      quantity: fc.option(quantity, { nil: undefined }),
    }),
  },
  {
    weight: 6,
    arbitrary: fc.record({
      kind: fc.constant('transfer' as const),
      actor,
      from: walletIndex,
      to: walletIndex,
      by: fc.constantFrom(0 as const, 1 as const, 2 as const),
      lines: fc.uniqueArray(fc.record({ asset: assetIndex, quantity }), {
        minLength: 1,
        maxLength: ASSETS,
        selector: (line) => line.asset,
      }),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('assign' as const),
      actor,
      wallet: walletIndex,
      user: fc.integer({ min: 0, max: USERS - 1 }),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('delete' as const), actor, wallet: walletIndex }) },
  { weight: 2, arbitrary: refundOp() },
  { weight: 2, arbitrary: batchOp() },
  { weight: 1, arbitrary: issuancesOp() },
  { weight: 3, arbitrary: holdOp() },
  { weight: 2, arbitrary: captureOp() },
  { weight: 1, arbitrary: voidOp() },
)

function batchOp(): fc.Arbitrary<BatchOp> {
  const transfer = fc.record({
    to: walletIndex,
    by: fc.constantFrom(0 as const, 1 as const, 2 as const),
    lines: fc.uniqueArray(fc.record({ asset: assetIndex, quantity }), { minLength: 1, maxLength: ASSETS, selector: (line) => line.asset }),
  })
  return fc.record({
    kind: fc.constant('batch' as const),
    actor,
    from: walletIndex,
    atomic: fc.boolean(),
    transfers: fc.array(transfer, { minLength: 1, maxLength: 4 }),
  })
}

function issuancesOp(): fc.Arbitrary<IssuancesOp> {
  return fc.record({
    kind: fc.constant('issuances' as const),
    asset: assetIndex,
    entries: fc.array(fc.record({ wallet: walletIndex, quantity }), { minLength: 1, maxLength: 4 }),
  })
}

// Refunds: an op, and what the model remembers of transfers to predict them.

/** A refund by the receiving wallet of the `pick`-th successful transfer so far: of `lines`, or of everything left. */
type RefundOp = { kind: 'refund'; pick: number; lines: { asset: number; quantity: number }[] | undefined }

function refundOp(): fc.Arbitrary<RefundOp> {
  const small = fc.integer({ min: 1, max: 40 })
  return fc.record({
    kind: fc.constant('refund' as const),
    pick: fc.nat({ max: 1000 }),
    lines: fc.option(
      fc.uniqueArray(fc.record({ asset: assetIndex, quantity: small }), {
        minLength: 1,
        maxLength: ASSETS,
        selector: (line) => line.asset,
      }),
      { nil: undefined },
    ),
  })
}

/** The successful transfers of a sequence and what has been refunded of each. */
class RefundBook {
  transfers: { id: number; from: number; to: number; lines: Map<number, number>; refunded: Map<number, number> }[] = []

  record(id: number, from: number, to: number, lines: { asset: number; quantity: number }[]): void {
    this.transfers.push({ id, from, to, lines: new Map(lines.map((line) => [line.asset, line.quantity])), refunded: new Map() })
  }

  /**
   * The answer a refund gets, in the service's order: nothing left by default (T001), a deleted
   * sender (W000), more than is left (T001), then the move's own checks; applied to the model when 201.
   */
  refund(model: Model, entry: RefundBook['transfers'][number], requested: RefundOp['lines'], walletIds: number[]): Answer {
    const left = (asset: number) => (entry.lines.get(asset) ?? 0) - (entry.refunded.get(asset) ?? 0)
    const lines = requested ?? [...entry.lines.keys()].filter((asset) => left(asset) > 0).map((asset) => ({ asset, quantity: left(asset) }))
    if (lines.length === 0) return { status: 409, code: 'T001' }
    if (model.deleted.has(entry.from)) return { status: 404, code: 'W000' }
    if (lines.some((line) => line.quantity > left(line.asset))) return { status: 409, code: 'T001' }
    const failed = model.move(entry.to, entry.from, lines, walletIds)
    if (failed) return failed
    for (const line of lines) entry.refunded.set(line.asset, (entry.refunded.get(line.asset) ?? 0) + line.quantity)
    return { status: 201 }
  }
}

// Holds: ops, and what the model remembers of them.

/** POST /wallet/holds: the body of a transfer, reserved in the sender instead of moved. */
type HoldOp = {
  kind: 'hold'
  actor: number | 'owner'
  from: number
  to: number
  by: 0 | 1 | 2
  lines: { asset: number; quantity: number }[]
}
/** A capture by the sender of the `pick`-th hold so far: of `lines`, or of everything held. */
type CaptureOp = { kind: 'capture'; pick: number; lines: { asset: number; quantity: number }[] | undefined }
/** A void of the `pick`-th hold so far, by its sender or its recipient. */
type VoidOp = { kind: 'void'; pick: number; by: 'sender' | 'recipient' }

function holdOp(): fc.Arbitrary<HoldOp> {
  return fc.record({
    kind: fc.constant('hold' as const),
    actor,
    from: walletIndex,
    to: walletIndex,
    by: fc.constantFrom(0 as const, 1 as const, 2 as const),
    lines: fc.uniqueArray(fc.record({ asset: assetIndex, quantity }), { minLength: 1, maxLength: ASSETS, selector: (line) => line.asset }),
  })
}

function captureOp(): fc.Arbitrary<CaptureOp> {
  const small = fc.integer({ min: 1, max: 40 })
  return fc.record({
    kind: fc.constant('capture' as const),
    pick: fc.nat({ max: 1000 }),
    lines: fc.option(
      fc.uniqueArray(fc.record({ asset: assetIndex, quantity: small }), {
        minLength: 1,
        maxLength: ASSETS,
        selector: (line) => line.asset,
      }),
      { nil: undefined },
    ),
  })
}

function voidOp(): fc.Arbitrary<VoidOp> {
  return fc.record({
    kind: fc.constant('void' as const),
    pick: fc.nat({ max: 1000 }),
    by: fc.constantFrom('sender' as const, 'recipient' as const),
  })
}

interface ModelHold {
  id: number
  from: number
  to: number
  lines: Map<number, number>
  status: 'pending' | 'captured' | 'voided'
}

/** The holds of a sequence, and what they reserve in their senders (`Model.reserved`). */
class HoldBook {
  holds: ModelHold[] = []

  /** POST /wallet/holds: checked as the transfer it may become (I002 against what is free, I003), then reserved. */
  create(model: Model, from: number, to: number, lines: { asset: number; quantity: number }[], walletIds: number[]): Answer {
    const failed = model.check(from, to, lines, walletIds)
    if (failed) return failed
    for (const line of lines) model.reserve(from, line.asset, line.quantity)
    return { status: 201 }
  }

  record(id: number, from: number, to: number, lines: { asset: number; quantity: number }[]): void {
    this.holds.push({ id, from, to, lines: new Map(lines.map((line) => [line.asset, line.quantity])), status: 'pending' })
  }

  release(model: Model, hold: ModelHold, status: 'captured' | 'voided'): void {
    for (const [asset, quantity] of hold.lines) model.reserve(hold.from, asset, -quantity)
    hold.status = status
  }

  /** A capture, in the service's order: H001 (settled), H002 (more than held, or an asset it lacks), then the move of what is captured. */
  capture(model: Model, hold: ModelHold, requested: CaptureOp['lines'], walletIds: number[]): Answer {
    if (hold.status !== 'pending') return { status: 409, code: 'H001' }
    const lines = requested ?? [...hold.lines].map(([asset, quantity]) => ({ asset, quantity }))
    if (lines.some((line) => line.quantity > (hold.lines.get(line.asset) ?? 0))) return { status: 400, code: 'H002' }
    this.release(model, hold, 'captured')
    const failed = model.move(hold.from, hold.to, lines, walletIds)
    if (!failed) return { status: 201 }
    // Refused (I003 at the recipient): nothing changes, the hold stays pending.
    for (const [asset, quantity] of hold.lines) model.reserve(hold.from, asset, quantity)
    hold.status = 'pending'
    return failed
  }

  void(model: Model, hold: ModelHold): Answer {
    if (hold.status !== 'pending') return { status: 409, code: 'H001' }
    this.release(model, hold, 'voided')
    return { status: 200 }
  }

  /** Wallet deletion voids the wallet's pending holds, both directions, before its sweep; `undo` puts them back. */
  voidAllOf(model: Model, wallet: number): () => void {
    const voided = this.holds.filter((hold) => hold.status === 'pending' && (hold.from === wallet || hold.to === wallet))
    for (const hold of voided) this.release(model, hold, 'voided')
    return () => {
      for (const hold of voided) {
        for (const [asset, quantity] of hold.lines) model.reserve(hold.from, asset, quantity)
        hold.status = 'pending'
      }
    }
  }
}

/** The rules of the ledger and of wallet access, as a user reads them in the contract. */
class Model {
  holdings = new Map<string, number>()
  /** What pending holds reserve of each holding (`held`): only the rest may be spent. */
  reserved = new Map<string, number>()

  reservedOf(wallet: number, asset: number): number {
    return this.reserved.get(`${wallet}:${asset}`) ?? 0
  }

  reserve(wallet: number, asset: number, delta: number): void {
    this.reserved.set(`${wallet}:${asset}`, this.reservedOf(wallet, asset) + delta)
  }

  owner: number[] = []
  primary: number[] = []
  assigned: Set<number>[] = []
  deleted = new Set<number>()

  constructor() {
    for (let wallet = 0; wallet < WALLETS; wallet++) {
      this.owner.push(wallet % USERS)
      this.assigned.push(new Set())
    }
    for (let user = 0; user < USERS; user++) this.primary.push(user)
  }

  held(wallet: number, asset: number): number {
    return this.holdings.get(`${wallet}:${asset}`) ?? 0
  }

  add(wallet: number, asset: number, delta: number): void {
    this.holdings.set(`${wallet}:${asset}`, this.held(wallet, asset) + delta)
  }

  canUse(user: number, wallet: number): boolean {
    return !this.deleted.has(wallet) && (this.owner[wallet] === user || this.assigned[wallet].has(user))
  }

  actorOf(actor: number | 'owner', wallet: number): number {
    return actor === 'owner' ? this.owner[wallet] : actor
  }

  /** Units of the asset in circulation: what mint owes, which no more than any holding may pass 2^53-1. */
  supply = new Map<number, number>()

  issue(wallet: number, asset: number, quantity: number): Answer {
    if (this.deleted.has(wallet)) return { status: 404, code: 'W002' }
    const supply = this.supply.get(asset) ?? 0
    if (this.held(wallet, asset) + quantity > MAX || supply + quantity > MAX) return { status: 400, code: 'I003' }
    this.add(wallet, asset, quantity)
    this.supply.set(asset, supply + quantity)
    return { status: 201 }
  }

  burn(wallet: number, asset: number, quantity: number | undefined): Answer {
    if (this.deleted.has(wallet)) return { status: 404, code: 'W002' }
    // Without a quantity, what is free; more than is free is refused.
    const free = this.held(wallet, asset) - this.reservedOf(wallet, asset)
    const amount = quantity ?? free
    if (free < amount) return { status: 400, code: 'I002' }
    this.add(wallet, asset, -amount)
    this.supply.set(asset, (this.supply.get(asset) ?? 0) - amount)
    return { status: 204 }
  }

  /** Undoes whatever happens in `work` when it answers an error (an atomic batch, an issuance to many). */
  allOrNothing<T extends { status: number }>(work: () => T): T {
    const holdings = new Map(this.holdings)
    const supply = new Map(this.supply)
    const reserved = new Map(this.reserved)
    const answer = work()
    if (answer.status >= 400) {
      this.holdings = holdings
      this.supply = supply
      this.reserved = reserved
    }
    return answer
  }

  /** POST /issuances: W002 for the first entry's unknown wallet, then each entry in order, all or none. */
  issueMany(entries: IssuancesOp['entries'], asset: number): Answer & { index?: number } {
    const gone = entries.findIndex((entry) => this.deleted.has(entry.wallet))
    if (gone >= 0) return { status: 404, code: 'W002', index: gone }
    return this.allOrNothing(() => {
      for (const [index, entry] of entries.entries()) {
        const answer = this.issue(entry.wallet, asset, entry.quantity)
        if (answer.status !== 201) return { ...answer, index }
      }
      return { status: 201 }
    })
  }

  /**
   * A batch's transfer: the recipient's wallet, or the error of resolving it (W000 for a deleted
   * wallet by address or id, W013 for the sending wallet itself).
   */
  recipientOf(from: number, transfer: BatchOp['transfers'][number]): { wallet: number } | Answer {
    const to = transfer.by === 0 ? this.primary[transfer.to % USERS] : transfer.to
    if (transfer.by !== 0 && this.deleted.has(to)) return { status: 404, code: 'W000' }
    if (to === from) return { status: 400, code: 'W013' }
    return { wallet: to }
  }

  /**
   * POST /wallet/transactions/batch. Atomic: the first transfer that fails to resolve, else the
   * first the ledger refuses (nothing moves), else 201. Not atomic: 200 and each transfer's answer.
   */
  batch(op: BatchOp, walletIds: number[]): { answer: Answer & { index?: number }; results?: Answer[] } {
    const recipients = op.transfers.map((transfer) => this.recipientOf(op.from, transfer))
    const move = (index: number): Answer => {
      const recipient = recipients[index]
      if (!('wallet' in recipient)) return recipient
      return this.move(op.from, recipient.wallet, op.transfers[index].lines, walletIds) ?? { status: 201 }
    }
    if (!op.atomic) return { answer: { status: 200 }, results: op.transfers.map((_, index) => move(index)) }
    const unresolved = recipients.findIndex((recipient) => !('wallet' in recipient))
    if (unresolved >= 0) return { answer: { ...(recipients[unresolved] as Answer), index: unresolved } }
    return {
      answer: this.allOrNothing(() => {
        for (const index of op.transfers.keys()) {
          const answer = move(index)
          if (answer.status !== 201) return { ...answer, index }
        }
        return { status: 201 }
      }),
    }
  }

  /** Both sides of every line, in the service's order (the lowest wallet id first, then asset). */
  changes(from: number, to: number, lines: { asset: number; quantity: number }[], walletIds: number[]) {
    return lines
      .flatMap((line) => [
        { wallet: from, asset: line.asset, delta: -line.quantity },
        { wallet: to, asset: line.asset, delta: line.quantity },
      ])
      .sort((a, b) => walletIds[a.wallet] - walletIds[b.wallet] || a.asset - b.asset)
  }

  /** A move's checks: the sender may spend only what is free (quantity − held), no holding may pass 2^53-1. */
  check(from: number, to: number, lines: { asset: number; quantity: number }[], walletIds: number[]): Answer | undefined {
    for (const change of this.changes(from, to, lines, walletIds)) {
      const held = this.held(change.wallet, change.asset)
      if (change.delta < 0 && held - this.reservedOf(change.wallet, change.asset) < -change.delta) return { status: 400, code: 'I002' }
      if (change.delta > 0 && held + change.delta > MAX) return { status: 400, code: 'I003' }
    }
    return undefined
  }

  /** Moves every line or nothing. */
  move(from: number, to: number, lines: { asset: number; quantity: number }[], walletIds: number[]): Answer | undefined {
    const failed = this.check(from, to, lines, walletIds)
    if (failed) return failed
    for (const change of this.changes(from, to, lines, walletIds)) this.add(change.wallet, change.asset, change.delta)
    return undefined
  }
}

describe('random operation sequences against a model', () => {
  let t: TestApp
  let sequences = 0
  let operations = 0
  const outcomes = new Map<string, number>()
  let passwordHash: string

  before(async () => {
    t = await buildTestApp()
    if (t.database.dialect === 'sqlite') await sql`pragma synchronous = off`.execute(t.database.db)
    // One real registration gives a password hash the fixture users reuse (Argon2 is slow on purpose).
    const seed = await createUser(t.app)
    passwordHash = (await t.database.db.selectFrom('users').select('password_hash').where('id', '=', seed.id).executeTakeFirstOrThrow())
      .password_hash
  })
  after(async () => {
    const seen = [...outcomes.entries()].sort().map(([outcome, count]) => `${outcome}: ${count}`)
    console.log(`${sequences} sequences, ${operations} operations (${seen.join(', ')})`)
    await t.close()
  })

  /** Users with their primary wallet, a second wallet and a session; two fresh assets. */
  async function setUp(run: number) {
    const users: { id: number; username: string; token: string }[] = []
    const walletIds: number[] = new Array(WALLETS)
    const addresses: string[] = new Array(WALLETS)
    for (let user = 0; user < USERS; user++) {
      const username = `pb${process.pid}r${run}u${user}`
      const token = createToken('user')
      await inTransaction(t.database.db, async (trx) => {
        const row = await insertUser(trx, username, passwordHash)
        const primary = await createWalletFor(trx, row.id)
        const second = await createWalletFor(trx, row.id)
        await updateUser(trx, row.id, { primary_wallet_id: primary.id })
        await insertUserSession(trx, {
          userId: row.id,
          walletId: primary.id,
          tokenHash: hashToken(token),
          expiresAt: new Date(Date.now() + 86_400_000).toISOString(),
        })
        users.push({ id: row.id, username, token })
        walletIds[user] = primary.id
        addresses[user] = primary.address
        walletIds[user + USERS] = second.id
        addresses[user + USERS] = second.address
      })
    }
    const assets: { id: number; name: string }[] = []
    for (let asset = 0; asset < ASSETS; asset++) {
      const created = await t.app.inject({
        method: 'POST',
        url: '/assets',
        headers: t.admin,
        payload: { name: `pb${process.pid}r${run}a${asset}`, value: 1 },
      })
      assert.equal(created.statusCode, 201, created.body)
      assets.push(created.json())
    }
    return { users, walletIds, addresses, assets }
  }

  interface Fixture {
    walletIds: number[]
    addresses: string[]
    users: { username: string }[]
    assets: { id: number; name: string }[]
    auth: Record<string, string>
  }

  /** A batch step: the answer, each transfer's outcome when not atomic, and the failing transfer named in `detail` when atomic. */
  async function runBatch(step: BatchOp, model: Model, fixture: Fixture, where: string) {
    const transfers = step.transfers.map((transfer) => {
      const to = transfer.by === 0 ? model.primary[transfer.to % USERS] : transfer.to
      const recipient =
        transfer.by === 0 ? fixture.users[transfer.to % USERS].username : transfer.by === 1 ? fixture.addresses[to] : fixture.walletIds[to]
      return {
        recipient,
        type: transfer.by,
        assets: Object.fromEntries(transfer.lines.map((line) => [fixture.assets[line.asset].name, line.quantity])),
      }
    })
    const response = await t.app.inject({
      method: 'POST',
      url: '/wallet/transactions/batch',
      headers: fixture.auth,
      payload: { atomic: step.atomic, transfers },
    })
    const { answer, results } = model.batch(step, fixture.walletIds)
    if (results) {
      const body = response.json() as { results?: { status: number; error?: { code: string } }[] }
      assert.deepEqual(
        body.results?.map((result) => (result.error ? { status: result.status, code: result.error.code } : { status: result.status })),
        results,
        `${where}: ${response.body.slice(0, 300)}`,
      )
    }
    if (answer.index !== undefined && response.statusCode === answer.status)
      assert.match(response.json().detail, new RegExp(`^transfers\\[${answer.index}\\]: `), where)
    return { response, expected: { status: answer.status, ...(answer.code ? { code: answer.code } : {}) } }
  }

  /** An issuance to many wallets: the answer, and the failing entry named in `detail`. */
  async function runIssuances(step: IssuancesOp, model: Model, fixture: Pick<Fixture, 'walletIds' | 'assets'>, where: string) {
    const entries = step.entries.map((entry) => ({ wallet_id: fixture.walletIds[entry.wallet], quantity: entry.quantity }))
    const response = await t.app.inject({
      method: 'POST',
      url: '/issuances',
      headers: t.admin,
      payload: { asset_id: fixture.assets[step.asset].id, entries },
    })
    const answer = model.issueMany(step.entries, step.asset)
    if (answer.index !== undefined && response.statusCode === answer.status)
      assert.match(response.json().detail, new RegExp(`^entries\\[${answer.index}\\]: `), where)
    return { response, expected: { status: answer.status, ...(answer.code ? { code: answer.code } : {}) } }
  }

  it('gives the outcome the model predicts, never a negative holding, and every asset sums to zero with mint', async () => {
    let run = 0
    await fc.assert(
      fc.asyncProperty(fc.array(op, { minLength: 1, maxLength: 30, size: 'medium' }), async (ops) => {
        run++
        sequences++
        const { users, walletIds, addresses, assets } = await setUp(run)
        const model = new Model()
        const refunds = new RefundBook()
        const holds = new HoldBook()
        // Every primary wallet starts with some of each asset, so that transfers have something to move.
        for (let wallet = 0; wallet < USERS; wallet++) {
          for (let asset = 0; asset < ASSETS; asset++) {
            const issued = await t.app.inject({
              method: 'POST',
              url: `/wallets/${walletIds[wallet]}/assets`,
              headers: t.admin,
              payload: { id: assets[asset].id, quantity: 100 },
            })
            assert.deepEqual(answerOf(issued), model.issue(wallet, asset, 100))
          }
        }
        const active = users.map((_user, index) => index)
        const auth = (user: number) => ({ authorization: `Bearer ${users[user].token}` })

        /** Makes `wallet` the user's active wallet; the model says whether that is allowed. */
        async function activate(user: number, wallet: number, step: string): Promise<boolean> {
          if (active[user] === wallet && model.canUse(user, wallet)) return true
          const response = await t.app.inject({
            method: 'PUT',
            url: '/user/session/wallet',
            headers: auth(user),
            payload: { wallet_id: walletIds[wallet] },
          })
          const allowed = model.canUse(user, wallet)
          assert.deepEqual(
            answerOf(response),
            allowed ? { status: 200 } : { status: 404, code: 'W000' },
            `${step}: activate wallet ${wallet} for user ${user}`,
          )
          if (allowed) active[user] = wallet
          return allowed
        }

        for (const [index, step] of ops.entries()) {
          operations++
          const where = `step ${index} ${JSON.stringify(step)}`
          let expected: Answer
          let response
          if (step.kind === 'issue') {
            response = await t.app.inject({
              method: 'POST',
              url: `/wallets/${walletIds[step.wallet]}/assets`,
              headers: t.admin,
              payload: { id: assets[step.asset].id, quantity: step.quantity },
            })
            expected = model.issue(step.wallet, step.asset, step.quantity)
          } else if (step.kind === 'burn') {
            const query = step.quantity === undefined ? '' : `?quantity=${step.quantity}`
            response = await t.app.inject({
              method: 'DELETE',
              url: `/wallets/${walletIds[step.wallet]}/assets/${assets[step.asset].id}${query}`,
              headers: t.admin,
            })
            expected = model.burn(step.wallet, step.asset, step.quantity)
          } else if (step.kind === 'transfer') {
            const user = model.actorOf(step.actor, step.from)
            if (!(await activate(user, step.from, where))) continue
            // By username the money goes to that user's primary wallet.
            const to = step.by === 0 ? model.primary[step.to % USERS] : step.to
            const recipient = step.by === 0 ? users[step.to % USERS].username : step.by === 1 ? addresses[to] : walletIds[to]
            const payload = {
              recipient,
              type: step.by,
              assets: Object.fromEntries(step.lines.map((line) => [assets[line.asset].name, line.quantity])),
            }
            response = await t.app.inject({ method: 'POST', url: '/wallet/transactions', headers: auth(user), payload })
            if (step.by !== 0 && model.deleted.has(to)) expected = { status: 404, code: 'W000' }
            else if (to === step.from) expected = { status: 400, code: 'W013' }
            else expected = model.move(step.from, to, step.lines, walletIds) ?? { status: 201 }
            if (response.statusCode === 201) refunds.record(response.json().id, step.from, to, step.lines)
          } else if (step.kind === 'refund') {
            const entry = refunds.transfers[step.pick % Math.max(1, refunds.transfers.length)]
            if (!entry) continue
            const user = model.owner[entry.to]
            if (!(await activate(user, entry.to, where))) continue
            const payload =
              step.lines === undefined
                ? undefined
                : { assets: Object.fromEntries(step.lines.map((line) => [assets[line.asset].name, line.quantity])) }
            response = await t.app.inject({
              method: 'POST',
              url: `/wallet/transactions/${entry.id}/refund`,
              headers: auth(user),
              ...(payload ? { payload } : {}),
            })
            expected = refunds.refund(model, entry, step.lines, walletIds)
          } else if (step.kind === 'hold') {
            const user = model.actorOf(step.actor, step.from)
            if (!(await activate(user, step.from, where))) continue
            const to = step.by === 0 ? model.primary[step.to % USERS] : step.to
            const recipient = step.by === 0 ? users[step.to % USERS].username : step.by === 1 ? addresses[to] : walletIds[to]
            const payload = {
              recipient,
              type: step.by,
              assets: Object.fromEntries(step.lines.map((line) => [assets[line.asset].name, line.quantity])),
            }
            response = await t.app.inject({ method: 'POST', url: '/wallet/holds', headers: auth(user), payload })
            if (step.by !== 0 && model.deleted.has(to)) expected = { status: 404, code: 'W000' }
            else if (to === step.from) expected = { status: 400, code: 'W013' }
            else expected = holds.create(model, step.from, to, step.lines, walletIds)
            if (response.statusCode === 201) holds.record(response.json().id, step.from, to, step.lines)
          } else if (step.kind === 'capture' || step.kind === 'void') {
            const hold = holds.holds[step.pick % Math.max(1, holds.holds.length)]
            if (!hold) continue
            const side = step.kind === 'void' && step.by === 'recipient' ? hold.to : hold.from
            const user = model.owner[side]
            if (!(await activate(user, side, where))) continue
            if (step.kind === 'capture') {
              const payload =
                step.lines === undefined
                  ? undefined
                  : { assets: Object.fromEntries(step.lines.map((line) => [assets[line.asset].name, line.quantity])) }
              response = await t.app.inject({
                method: 'POST',
                url: `/wallet/holds/${hold.id}/capture`,
                headers: auth(user),
                ...(payload ? { payload } : {}),
              })
              expected = holds.capture(model, hold, step.lines, walletIds)
            } else {
              response = await t.app.inject({ method: 'POST', url: `/wallet/holds/${hold.id}/void`, headers: auth(user) })
              expected = holds.void(model, hold)
            }
          } else if (step.kind === 'batch') {
            const user = model.actorOf(step.actor, step.from)
            if (!(await activate(user, step.from, where))) continue
            ;({ response, expected } = await runBatch(step, model, { auth: auth(user), walletIds, addresses, users, assets }, where))
          } else if (step.kind === 'issuances') {
            ;({ response, expected } = await runIssuances(step, model, { walletIds, assets }, where))
          } else if (step.kind === 'assign') {
            const user = model.actorOf(step.actor, step.wallet)
            if (!(await activate(user, step.wallet, where))) continue
            response = await t.app.inject({
              method: 'POST',
              url: '/wallet/users',
              headers: auth(user),
              payload: { username: users[step.user].username },
            })
            if (model.owner[step.wallet] !== user) expected = { status: 400, code: 'W006' }
            else if (step.user === user || model.assigned[step.wallet].has(step.user)) expected = { status: 409, code: 'W003' }
            else {
              model.assigned[step.wallet].add(step.user)
              expected = { status: 201 }
            }
          } else {
            const user = model.actorOf(step.actor, step.wallet)
            if (!(await activate(user, step.wallet, where))) continue
            response = await t.app.inject({ method: 'DELETE', url: '/wallet', headers: auth(user) })
            const primary = model.primary[user]
            if (model.owner[step.wallet] !== user) expected = { status: 400, code: 'W006' }
            else if (primary === step.wallet) expected = { status: 400, code: 'W008' }
            else {
              // Its pending holds, both directions, are voided first; all of it is then swept.
              const restore = holds.voidAllOf(model, step.wallet)
              const lines = [...Array(ASSETS).keys()]
                .filter((asset) => model.held(step.wallet, asset) > 0)
                .map((asset) => ({ asset, quantity: model.held(step.wallet, asset) }))
              const failed = lines.length > 0 ? model.move(step.wallet, primary, lines, walletIds) : undefined
              if (failed) restore()
              if (failed) expected = failed
              else {
                model.deleted.add(step.wallet)
                model.assigned[step.wallet].clear()
                // Sessions that had the wallet active are moved to their user's primary wallet.
                for (let other = 0; other < USERS; other++) if (active[other] === step.wallet) active[other] = model.primary[other]
                expected = { status: 204 }
              }
            }
          }
          assert.deepEqual(answerOf(response), expected, `${where}: ${response.body.slice(0, 300)}`)
          const outcome = `${step.kind} ${expected.status}${expected.code ? ` ${expected.code}` : ''}`
          outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1)
        }

        // The stored holdings are the model's, none negative, and every asset sums to zero with mint.
        const assetIds = assets.map((asset) => asset.id)
        const rows = await t.database.db
          .selectFrom('holdings')
          .select(['wallet_id', 'asset_id', 'quantity', 'held'])
          .where('asset_id', 'in', assetIds)
          .execute()
        const stored = new Map(rows.map((row) => [`${row.wallet_id}:${row.asset_id}`, row.quantity]))
        const storedHeld = new Map(rows.map((row) => [`${row.wallet_id}:${row.asset_id}`, Number(row.held)]))
        for (let wallet = 0; wallet < WALLETS; wallet++) {
          for (let asset = 0; asset < ASSETS; asset++) {
            assert.equal(
              stored.get(`${walletIds[wallet]}:${assetIds[asset]}`) ?? 0,
              model.held(wallet, asset),
              `wallet ${wallet} asset ${asset}`,
            )
            assert.equal(
              storedHeld.get(`${walletIds[wallet]}:${assetIds[asset]}`) ?? 0,
              model.reservedOf(wallet, asset),
              `held: wallet ${wallet} asset ${asset}`,
            )
          }
        }
        for (const row of rows) if (row.wallet_id !== MINT) assert.ok(row.quantity >= 0, `wallet ${row.wallet_id} holds ${row.quantity}`)
        for (const assetId of assetIds) {
          const sum = rows.filter((row) => row.asset_id === assetId).reduce((total, row) => total + row.quantity, 0)
          assert.equal(sum, 0, `asset ${assetId} sums to ${sum} with mint`)
        }
        // Deleted wallets are gone from their owner's list and hold nothing.
        for (const wallet of model.deleted) {
          for (let asset = 0; asset < ASSETS; asset++) assert.equal(stored.get(`${walletIds[wallet]}:${assetIds[asset]}`) ?? 0, 0)
        }
      }),
      { numRuns: SEQUENCE_RUNS },
    )
    const report = await verifyLedger(t.database.db)
    assert.deepEqual(report.problems, [])
  })
})
