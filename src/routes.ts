import type { FastifyInstance, RouteOptions } from 'fastify'
import { ERROR_MEANINGS, ERRORS, type ErrorCode } from './http/errors.ts'
import { ErrorSchema } from './http/schemas.ts'

/**
 * The route index: one line per route with who may call it, the file that registers it, and the
 * codes of its own rules. Each route's summary and description sit with its schema in that file;
 * `documentRoutes` adds the error responses, each code with its meaning from `http/errors.ts`.
 * The guard's codes (`auth`), G000 / G001 / G002 for a body or header / path / query schema, and
 * S000 / S001 are added from what the route is. test/http/route-index.test.ts checks index and routes agree.
 */

/** Who may call: nobody in particular, a user session, a session or wallet key, the admin key or an operator session, anyone. */
export type RouteAuth = 'none' | 'user' | 'wallet' | 'admin' | 'any'

export interface RouteDoc {
  auth: RouteAuth
  file: string
  errors: ErrorCode[]
}

const ACCOUNTS = 'src/accounts/accounts.routes.ts'
const FLOWS = 'src/flows/flows.routes.ts'
const WALLETS = 'src/wallets/wallets.routes.ts'
const TRANSACTIONS = 'src/ledger/transactions.routes.ts'
const ASSETS = 'src/ledger/assets.routes.ts'
const HOLDS = 'src/ledger/holds.routes.ts'
const WEBHOOKS = 'src/events/webhooks.routes.ts'
const STREAM = 'src/events/stream.routes.ts'
const OPERATIONS = 'src/http/observability.ts'
const ADMIN = 'src/admin/admin.routes.ts'
const JOURNAL = 'src/journal/journal.routes.ts'
const SCHEDULES = 'src/schedules/schedules.routes.ts'
const MONITORS = 'src/monitors/monitors.routes.ts'

export const ROUTES: Record<string, RouteDoc> = {
  // Accounts: registration, login, the user and their sessions.
  'POST /users': { auth: 'none', file: FLOWS, errors: ['U000', 'G005'] },
  'POST /users/:username/sessions': { auth: 'none', file: ACCOUNTS, errors: ['U001', 'G005'] },
  'PUT /user/username': { auth: 'user', file: ACCOUNTS, errors: ['U000'] },
  'PUT /user/password': { auth: 'user', file: ACCOUNTS, errors: [] },
  'GET /user/session': { auth: 'user', file: ACCOUNTS, errors: [] },
  'DELETE /user/session': { auth: 'user', file: ACCOUNTS, errors: ['U004'] },
  'GET /user/sessions': { auth: 'user', file: ACCOUNTS, errors: [] },
  'DELETE /user/sessions': { auth: 'user', file: ACCOUNTS, errors: [] },
  'DELETE /user/sessions/:sessionid': { auth: 'user', file: ACCOUNTS, errors: ['U004'] },
  // The user's wallets.
  'GET /user/wallets': { auth: 'user', file: WALLETS, errors: [] },
  'POST /user/wallets': { auth: 'user', file: WALLETS, errors: ['W011'] },
  'GET /user/assigned_wallets': { auth: 'user', file: WALLETS, errors: [] },
  'PUT /user/wallet': { auth: 'user', file: WALLETS, errors: ['W000'] },
  'PUT /user/session/wallet': { auth: 'user', file: WALLETS, errors: ['W000'] },
  // The active wallet: users, ownership, keys, deletion.
  'POST /wallet/users': { auth: 'user', file: WALLETS, errors: ['W000', 'W006', 'U003', 'W003'] },
  'GET /wallet/users': { auth: 'user', file: WALLETS, errors: ['W000'] },
  'DELETE /wallet/users/:userid': { auth: 'user', file: WALLETS, errors: ['W000', 'W006', 'U003'] },
  'PUT /wallet/owner': { auth: 'user', file: WALLETS, errors: ['W000', 'W006', 'W012', 'W007'] },
  'POST /wallet/sessions': { auth: 'user', file: WALLETS, errors: ['W000', 'I001'] },
  'GET /wallet/sessions': { auth: 'user', file: WALLETS, errors: ['W000'] },
  'DELETE /wallet/sessions': { auth: 'user', file: WALLETS, errors: ['W000'] },
  'DELETE /wallet/sessions/:sessionid': { auth: 'user', file: WALLETS, errors: ['W000', 'W005'] },
  'DELETE /wallet': { auth: 'user', file: FLOWS, errors: ['W000', 'W006', 'W008', 'C001', 'I003'] },
  // Holdings and transfers (a user session acts on its active wallet; a wallet key on its wallet).
  'GET /wallet/assets': { auth: 'wallet', file: TRANSACTIONS, errors: [] },
  'POST /wallet/transactions': {
    auth: 'wallet',
    file: TRANSACTIONS,
    errors: ['G003', 'G004', 'U003', 'W000', 'W013', 'K002', 'I001', 'I002', 'I003', 'K001'],
  },
  'POST /wallet/transactions/batch': {
    auth: 'wallet',
    file: TRANSACTIONS,
    errors: ['G003', 'G004', 'U003', 'W000', 'W013', 'K002', 'I001', 'I002', 'I003', 'K001'],
  },
  'GET /wallet/transactions': { auth: 'wallet', file: TRANSACTIONS, errors: [] },
  'POST /wallet/transactions/:id/refund': {
    auth: 'wallet',
    file: TRANSACTIONS,
    errors: ['G003', 'G004', 'T000', 'I001', 'K002', 'K001', 'W000', 'T001', 'I002', 'I003'],
  },
  // Holds: assets reserved for a recipient, captured (whole or in part), voided or expired.
  'POST /wallet/holds': {
    auth: 'wallet',
    file: HOLDS,
    errors: ['G003', 'G004', 'U003', 'W000', 'W013', 'K002', 'I001', 'I002', 'I003', 'K001'],
  },
  'GET /wallet/holds': { auth: 'wallet', file: HOLDS, errors: [] },
  'GET /wallet/holds/:id': { auth: 'wallet', file: HOLDS, errors: ['H000'] },
  'POST /wallet/holds/:id/capture': { auth: 'wallet', file: HOLDS, errors: ['G003', 'G004', 'H000', 'H001', 'H002', 'I003'] },
  'POST /wallet/holds/:id/void': { auth: 'wallet', file: HOLDS, errors: ['H000', 'H001'] },
  // Scheduled and recurring transfers.
  'POST /wallet/schedules': { auth: 'wallet', file: SCHEDULES, errors: ['U003', 'W000', 'W013', 'K002', 'I001', 'I003', 'K001'] },
  'GET /wallet/schedules': { auth: 'wallet', file: SCHEDULES, errors: [] },
  'GET /wallet/schedules/:id': { auth: 'wallet', file: SCHEDULES, errors: ['R000'] },
  'GET /wallet/schedules/:id/upcoming': { auth: 'wallet', file: SCHEDULES, errors: ['R000'] },
  'GET /wallet/schedules/:id/runs': { auth: 'wallet', file: SCHEDULES, errors: ['R000'] },
  'POST /wallet/schedules/:id/pause': { auth: 'wallet', file: SCHEDULES, errors: ['R000', 'R001'] },
  'POST /wallet/schedules/:id/resume': { auth: 'wallet', file: SCHEDULES, errors: ['R000', 'R001'] },
  'DELETE /wallet/schedules/:id': { auth: 'wallet', file: SCHEDULES, errors: ['R000', 'R001'] },
  'GET /admin/schedules': { auth: 'admin', file: SCHEDULES, errors: [] },
  // Balance monitors.
  'POST /wallet/monitors': { auth: 'wallet', file: MONITORS, errors: ['I001', 'M001'] },
  'GET /wallet/monitors': { auth: 'wallet', file: MONITORS, errors: [] },
  'DELETE /wallet/monitors/:id': { auth: 'wallet', file: MONITORS, errors: ['M000'] },
  // Assets and issuance.
  'GET /assets': { auth: 'any', file: ASSETS, errors: [] },
  'POST /assets': { auth: 'admin', file: ASSETS, errors: ['I004'] },
  'PUT /assets/:id/value': { auth: 'admin', file: ASSETS, errors: ['I000'] },
  'PUT /assets/:id/name': { auth: 'admin', file: ASSETS, errors: ['I000', 'I004'] },
  'DELETE /assets/:id': { auth: 'admin', file: ASSETS, errors: ['I000', 'I005'] },
  'POST /wallets/:walletid/assets': { auth: 'admin', file: ASSETS, errors: ['W002', 'C000', 'I003'] },
  'POST /transactions/:id/reversal': {
    auth: 'admin',
    file: ASSETS,
    errors: ['G003', 'G004', 'T000', 'T001', 'I001', 'W000', 'I002', 'I003'],
  },
  'POST /issuances': { auth: 'admin', file: ASSETS, errors: ['W002', 'C000', 'I003'] },
  'DELETE /wallets/:walletid/assets/:assetid': { auth: 'admin', file: ASSETS, errors: ['W002', 'I002'] },
  'PUT /wallets/:walletid/credit': { auth: 'admin', file: ASSETS, errors: ['W002', 'C000'] },
  // Events: webhooks and the event stream.
  'PUT /wallet/webhook': { auth: 'user', file: WEBHOOKS, errors: ['W010', 'W000'] },
  'GET /wallet/webhook': { auth: 'user', file: WEBHOOKS, errors: [] },
  'DELETE /wallet/webhook': { auth: 'user', file: WEBHOOKS, errors: [] },
  'GET /wallet/webhook/deliveries': { auth: 'user', file: WEBHOOKS, errors: [] },
  'POST /wallet/webhook/deliveries/:id/retry': { auth: 'user', file: WEBHOOKS, errors: ['G006'] },
  'GET /wallet/events': { auth: 'wallet', file: STREAM, errors: [] },
  // Operations.
  'GET /healthz': { auth: 'none', file: OPERATIONS, errors: [] },
  'GET /readyz': { auth: 'none', file: OPERATIONS, errors: [] },
  // The operator (the console's admin pages).
  'POST /admin/sessions': { auth: 'none', file: ADMIN, errors: ['A003', 'G005'] },
  'DELETE /admin/session': { auth: 'admin', file: ADMIN, errors: [] },
  'GET /admin/overview': { auth: 'admin', file: ADMIN, errors: [] },
  'GET /admin/wallets': { auth: 'admin', file: ADMIN, errors: [] },
  'GET /admin/wallets/:id': { auth: 'admin', file: ADMIN, errors: ['W002'] },
  'GET /admin/transactions': { auth: 'admin', file: ADMIN, errors: [] },
  'GET /admin/verification': { auth: 'admin', file: ADMIN, errors: [] },
  // The journal: its feed (admin), the signing key, checkpoints and proofs.
  'GET /admin/journal': { auth: 'admin', file: JOURNAL, errors: [] },
  'GET /admin/journal/stream': { auth: 'admin', file: JOURNAL, errors: [] },
  'GET /journal/key': { auth: 'none', file: JOURNAL, errors: [] },
  'GET /journal/checkpoint': { auth: 'any', file: JOURNAL, errors: ['J000'] },
  'GET /journal/consistency': { auth: 'any', file: JOURNAL, errors: [] },
  'GET /wallet/transactions/:id/proof': { auth: 'wallet', file: JOURNAL, errors: ['T000', 'J000'] },
}

/** The codes of a guard. A cookie-authenticated write must also come from this site (A004). */
function authCodes(auth: RouteAuth, method: string): ErrorCode[] {
  const write = method !== 'GET' && method !== 'HEAD'
  switch (auth) {
    case 'none':
      return []
    case 'admin':
      return write ? ['A003', 'A004'] : ['A003']
    case 'any':
      return ['A000', 'A001']
    case 'wallet':
      return write ? ['A000', 'A001', 'A004', 'K000'] : ['A000', 'A001', 'K000']
    default:
      return write ? ['A000', 'A001', 'A004'] : ['A000', 'A001']
  }
}

/** Every code a route may answer: its guard's, its schemas', its own rules', and S000 / S001. */
export function routeErrorCodes(doc: RouteDoc, method: string, schema: RouteOptions['schema']): ErrorCode[] {
  const codes = new Set<ErrorCode>(authCodes(doc.auth, method))
  if (schema?.body || schema?.headers) codes.add('G000')
  if (schema?.params) codes.add('G001')
  if (schema?.querystring) codes.add('G002')
  for (const code of doc.errors) codes.add(code)
  codes.add('S000')
  codes.add('S001')
  return [...codes].sort((a, b) => ERRORS[a].status - ERRORS[b].status || (a < b ? -1 : 1))
}

/** One response per status, listing each code with its message and meaning. */
function errorResponses(codes: ErrorCode[]): Record<string, unknown> {
  const byStatus = new Map<number, ErrorCode[]>()
  for (const code of codes) byStatus.set(ERRORS[code].status, [...(byStatus.get(ERRORS[code].status) ?? []), code])
  const responses: Record<string, unknown> = {}
  for (const [status, list] of byStatus) {
    const description = list.map((code) => `- \`${code}\` ${ERRORS[code].message}: ${ERROR_MEANINGS[code]}`).join('\n')
    responses[String(status)] = { description, content: { 'application/json': { schema: ErrorSchema } } }
  }
  return responses
}

/**
 * Writes the error responses into each indexed route's schema as it is registered (routes hidden
 * from the reference are left alone). Call before the routes.
 */
export function documentRoutes(app: FastifyInstance): void {
  app.addHook('onRoute', (route) => {
    if (!route.schema || route.schema.hide || route.method === 'HEAD') return
    const method = String(route.method)
    const doc = ROUTES[`${method} ${route.url}`]
    if (!doc) return
    const response = { ...((route.schema.response as Record<string, unknown> | undefined) ?? {}) }
    delete response['4xx']
    delete response['5xx']
    // A delete answers 204 without a body.
    if (method === 'DELETE' && !Object.keys(response).some((status) => status.startsWith('2')))
      response['204'] = { description: 'done', type: 'null' }
    route.schema = {
      ...route.schema,
      response: { ...response, ...errorResponses(routeErrorCodes(doc, method, route.schema)) },
    }
  })
}
