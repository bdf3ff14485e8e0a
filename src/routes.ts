import type { FastifyInstance, RouteOptions } from 'fastify'
import { ERROR_MEANINGS, ERRORS, type ErrorCode } from './http/errors.ts'
import { ErrorSchema } from './http/schemas.ts'

/**
 * The route index: every route of the API, with who may call it, the file that defines it, and
 * what the API reference (`/docs`, `/openapi.json`) says of it. `documentRoutes` writes the
 * summary, the description and the error responses (each code with its meaning from the error
 * table, `http/errors.ts`) into every route's schema as it is registered; test/routes.test.ts
 * checks that this index and the routes agree, both ways.
 *
 * `errors` lists the codes of the route's own rules. The rest are added from what the route is:
 * its guard's codes (`auth`), G000 / G001 / G002 for a body (or header) / path / query schema,
 * and S000 / S001, which any route may answer.
 */

/** Who may call: no credential, a user session, a user session or wallet key, the admin key (or an operator session), or any of them. */
export type RouteAuth = 'none' | 'user' | 'wallet' | 'admin' | 'any'

export interface RouteDoc {
  auth: RouteAuth
  file: string
  summary: string
  description: string
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

export const ROUTES: Record<string, RouteDoc> = {
  // Accounts: registration, login, the user and their sessions.
  'POST /users': {
    auth: 'none',
    file: FLOWS,
    summary: 'Register a user',
    description:
      'Creates the user and their primary wallet (a random address) in one step. Usernames are 2-32 letters or digits, unique case-insensitively; passwords 8-32 characters. Limited per client address and per username.',
    errors: ['U000', 'G005'],
  },
  'POST /users/:username/sessions': {
    auth: 'none',
    file: ACCOUNTS,
    summary: 'Log in',
    description:
      'Checks the password and opens a user session on the primary wallet. Sets the session cookie, or with `return_token: true` answers the token instead (`Authorization: Bearer <token>`). An unknown username and a wrong password get the same answer. Limited per client address and per username.',
    errors: ['U001', 'G005'],
  },
  'PUT /user/username': {
    auth: 'user',
    file: ACCOUNTS,
    summary: 'Change your username',
    description: 'Renames the caller; the old name becomes free.',
    errors: ['U000'],
  },
  'PUT /user/password': {
    auth: 'user',
    file: ACCOUNTS,
    summary: 'Change your password',
    description: "Sets a new password and ends every other session of the caller's; this one stays.",
    errors: [],
  },
  'GET /user/session': {
    auth: 'user',
    file: ACCOUNTS,
    summary: 'The current session',
    description: 'The session, its user and its active wallet (the wallet the `/wallet` routes act on).',
    errors: [],
  },
  'DELETE /user/session': {
    auth: 'user',
    file: ACCOUNTS,
    summary: 'Log out',
    description: 'Ends the current session and clears its cookie.',
    errors: ['U004'],
  },
  'GET /user/sessions': {
    auth: 'user',
    file: ACCOUNTS,
    summary: 'Your live sessions',
    description: 'Every session of the caller that has neither expired nor been idle too long, the current one marked.',
    errors: [],
  },
  'DELETE /user/sessions': {
    auth: 'user',
    file: ACCOUNTS,
    summary: 'Log out everywhere',
    description: 'Ends every session of the caller, this one included.',
    errors: [],
  },
  'DELETE /user/sessions/:sessionid': {
    auth: 'user',
    file: ACCOUNTS,
    summary: 'End one of your sessions',
    description: "Ends one session of the caller's (this one too, clearing its cookie).",
    errors: ['U004'],
  },

  // The user's wallets.
  'GET /user/wallets': {
    auth: 'user',
    file: WALLETS,
    summary: 'Wallets you own',
    description: 'The live wallets the caller owns, each with its webhook when one is set.',
    errors: [],
  },
  'POST /user/wallets': {
    auth: 'user',
    file: WALLETS,
    summary: 'Create a wallet',
    description:
      'A new wallet owned by the caller, at the given address (3-24 lowercase letters) or a random one. Addresses are never reused.',
    errors: ['W011'],
  },
  'GET /user/assigned_wallets': {
    auth: 'user',
    file: WALLETS,
    summary: 'Wallets you are assigned to',
    description: 'The live wallets of other owners the caller may use.',
    errors: [],
  },
  'PUT /user/wallet': {
    auth: 'user',
    file: WALLETS,
    summary: 'Choose your primary wallet',
    description: 'Makes a live wallet the caller owns their primary wallet: the one transfers to their username reach.',
    errors: ['W000'],
  },
  'PUT /user/session/wallet': {
    auth: 'user',
    file: WALLETS,
    summary: 'Switch the active wallet',
    description: 'The session acts on another wallet the caller owns or is assigned to; answers the session as `GET /user/session` does.',
    errors: ['W000'],
  },

  // The active wallet: users, ownership, keys, deletion.
  'POST /wallet/users': {
    auth: 'user',
    file: WALLETS,
    summary: 'Assign a user to the wallet',
    description: 'Gives a user read and write access to the active wallet. Owner only.',
    errors: ['W000', 'W006', 'U003', 'W003'],
  },
  'GET /wallet/users': {
    auth: 'user',
    file: WALLETS,
    summary: 'Users assigned to the wallet',
    description: 'The users assigned to the active wallet (the owner not included).',
    errors: ['W000'],
  },
  'DELETE /wallet/users/:userid': {
    auth: 'user',
    file: WALLETS,
    summary: 'Remove a user from the wallet',
    description:
      "Ends the user's access at once: their sessions on the wallet move to their primary wallet and the wallet keys they made for it are revoked. Owner only.",
    errors: ['W000', 'W006', 'U003'],
  },
  'PUT /wallet/owner': {
    auth: 'user',
    file: WALLETS,
    summary: 'Hand the wallet to another user',
    description:
      'Makes an assigned user the owner; the caller becomes an assigned user in their place. Owner only; not for a primary wallet.',
    errors: ['W000', 'W006', 'W012', 'W007'],
  },
  'POST /wallet/sessions': {
    auth: 'user',
    file: WALLETS,
    summary: 'Create a wallet key',
    description:
      'A key (`cfw_…`) with read and write access to the active wallet, for a program. The token is shown only here; present it as `Authorization: Bearer <token>`.',
    errors: ['W000'],
  },
  'GET /wallet/sessions': {
    auth: 'user',
    file: WALLETS,
    summary: "The wallet's keys",
    description: 'Every key of the active wallet, whoever made it, without tokens.',
    errors: ['W000'],
  },
  'DELETE /wallet/sessions': {
    auth: 'user',
    file: WALLETS,
    summary: "Revoke all of the wallet's keys",
    description: 'Revokes every key of the active wallet at once.',
    errors: ['W000'],
  },
  'DELETE /wallet/sessions/:sessionid': {
    auth: 'user',
    file: WALLETS,
    summary: 'Revoke a wallet key',
    description: 'Revokes one key of the active wallet.',
    errors: ['W000', 'W005'],
  },
  'DELETE /wallet': {
    auth: 'user',
    file: FLOWS,
    summary: 'Delete the wallet',
    description:
      "Deletes the active wallet: its pending holds, sent and received, are voided; then what it holds moves to the caller's primary wallet as one transaction (memo `wallet deleted`); its keys, webhook and assignments go. Its address stays taken and its history keeps naming it. Owner only; not the primary wallet.",
    errors: ['W000', 'W006', 'W008', 'I003'],
  },

  // Holdings and transfers (a user session acts on its active wallet; a wallet key on its wallet).
  'GET /wallet/assets': {
    auth: 'wallet',
    file: TRANSACTIONS,
    summary: 'What the wallet holds',
    description:
      'Every asset the wallet holds more than zero of, by asset name (case-insensitively), with what pending holds reserve of it (`held`; `quantity - held` may be spent). ' +
      "With `as_of` (a timestamp), the holdings as they were at that instant, from running balances (`held` 0 there; `[]` before the wallet's first transaction).",
    errors: [],
  },
  'POST /wallet/transactions': {
    auth: 'wallet',
    file: TRANSACTIONS,
    summary: 'Send assets',
    description:
      'Moves every listed asset to the recipient (a username, an address with `type: 1`, or a wallet id with `type: 2`) as one transaction: all of it or nothing. ' +
      'With an `Idempotency-Key`, a repeat of the same request answers the first response (`Idempotent-Replayed: true`) and moves nothing. Checked in this order: key, recipient, own wallet, asset names, quantities.',
    errors: ['G003', 'G004', 'U003', 'W000', 'W013', 'I001', 'I002', 'I003'],
  },
  'POST /wallet/transactions/batch': {
    auth: 'wallet',
    file: TRANSACTIONS,
    summary: 'Send a batch of transfers',
    description:
      'Up to 100 transfers (each the body of `POST /wallet/transactions`) from the wallet in one request. ' +
      "`atomic: true` (the default): all commit together or none does; 201 `{transactions}` in request order, or the first failing transfer's error, its `detail` starting `transfers[i]: `. " +
      '`atomic: false`: each commits or fails alone; 200 `{results}` in request order, each `{status: 201, transaction}` or `{status, error}`. ' +
      'One `Idempotency-Key` covers the whole batch.',
    errors: ['G003', 'G004', 'U003', 'W000', 'W013', 'I001', 'I002', 'I003'],
  },
  'GET /wallet/transactions': {
    auth: 'wallet',
    file: TRANSACTIONS,
    summary: "The wallet's history",
    description:
      'Transactions sent or received by the wallet, newest first, filtered by asset, direction, time, `kind` and `metadata[KEY]=VALUE` (at most 5, all matching exactly). The `Link` header (`rel="next"`) gives the next page; `after` lists what committed since a known id. With `format=csv`, every matching transaction as a streamed `text/csv` statement (paging ignored).',
    errors: [],
  },
  'POST /wallet/transactions/:id/refund': {
    auth: 'wallet',
    file: TRANSACTIONS,
    summary: 'Refund a transaction you received',
    description:
      'Moves back to the sender what the wallet received in a transfer or capture, as a transaction of kind `reversal` naming it in `reverses`: the listed quantities, or by default all that is not yet refunded. ' +
      'All refunds of a transaction together never move back more of an asset than it moved. `Idempotency-Key` as for transfers. Checked in this order: key, transaction, asset names, deleted sides, what is left, quantities.',
    errors: ['G003', 'G004', 'T000', 'I001', 'W000', 'T001', 'I002', 'I003'],
  },

  // Holds: assets reserved for a recipient, captured (whole or in part), voided or expired.
  'POST /wallet/holds': {
    auth: 'wallet',
    file: HOLDS,
    summary: 'Hold assets for a recipient',
    description:
      'Reserves the listed assets in the wallet for the recipient (the body of a transfer, plus `metadata` and `expires_in`: 60 to 2,592,000 seconds, a week by default). Nothing moves yet: the assets stay in the wallet as `held` and cannot be spent until the hold is captured, voided or expires. ' +
      'The same errors, in the same order, as a transfer; only what is free (`quantity - held`) may be held. `Idempotency-Key` as for a transfer.',
    errors: ['G003', 'G004', 'U003', 'W000', 'W013', 'I001', 'I002', 'I003'],
  },
  'GET /wallet/holds': {
    auth: 'wallet',
    file: HOLDS,
    summary: "The wallet's holds",
    description:
      'Holds the wallet sent or receives, newest first, filtered by `status` and `direction`. A pending hold past its expiry is listed as expired. The `Link` header (`rel="next"`) gives the next page.',
    errors: [],
  },
  'GET /wallet/holds/:id': {
    auth: 'wallet',
    file: HOLDS,
    summary: 'One hold',
    description: 'A hold the wallet sent or receives.',
    errors: ['H000'],
  },
  'POST /wallet/holds/:id/capture': {
    auth: 'wallet',
    file: HOLDS,
    summary: 'Capture a hold',
    description:
      'The sending wallet settles its hold: everything it holds (no body), or the quantities in `assets` (each at most what is held), moves to the recipient as one transaction of kind `capture`; the rest is released. `Idempotency-Key` as for a transfer. Checked in this order: key, hold, status, quantities.',
    errors: ['G003', 'G004', 'H000', 'H001', 'H002', 'I003'],
  },
  'POST /wallet/holds/:id/void': {
    auth: 'wallet',
    file: HOLDS,
    summary: 'Void a hold',
    description: 'Either side releases a pending hold: nothing moves, the sending wallet may spend it all again.',
    errors: ['H000', 'H001'],
  },

  // Assets and issuance.
  'GET /assets': { auth: 'any', file: ASSETS, summary: 'List assets', description: 'Every live asset, for any caller.', errors: [] },
  'POST /assets': {
    auth: 'admin',
    file: ASSETS,
    summary: 'Create an asset',
    description: 'A new asset: a name of 1-32 letters, digits, `_` or `-`, unique case-insensitively, and a display value per unit.',
    errors: ['I004'],
  },
  'PUT /assets/:id/value': {
    auth: 'admin',
    file: ASSETS,
    summary: "Change an asset's value",
    description: 'Sets the display value per unit; holdings do not change.',
    errors: ['I000'],
  },
  'PUT /assets/:id/name': {
    auth: 'admin',
    file: ASSETS,
    summary: 'Rename an asset',
    description: 'Renames the asset; history shows the new name.',
    errors: ['I000', 'I004'],
  },
  'DELETE /assets/:id': {
    auth: 'admin',
    file: ASSETS,
    summary: 'Delete an asset',
    description: 'Deletes an asset nobody holds; its name becomes free and history keeps it.',
    errors: ['I000', 'I005'],
  },
  'POST /wallets/:walletid/assets': {
    auth: 'admin',
    file: ASSETS,
    summary: 'Issue units into a wallet',
    description: 'Issues new units of an asset from `mint` into a user wallet, recorded as a transaction.',
    errors: ['W002', 'I003'],
  },
  'POST /transactions/:id/reversal': {
    auth: 'admin',
    file: ASSETS,
    summary: 'Reverse a transaction',
    description:
      "The operator's correction: moves back what any transaction but a reversal moved (an issuance back to `mint`, a burn out of it again), as a transaction of kind `reversal` naming it in `reverses`: the listed quantities, or by default all that is not yet reversed. " +
      'All reversals of a transaction together never move back more of an asset than it moved. `Idempotency-Key` as for transfers.',
    errors: ['G003', 'G004', 'T000', 'T001', 'I001', 'W000', 'I002', 'I003'],
  },
  'POST /issuances': {
    auth: 'admin',
    file: ASSETS,
    summary: 'Issue units into many wallets',
    description:
      'Issues new units of one asset from `mint` into up to 1,000 user wallets, all or nothing: one transaction per entry, in order. An entry refused names itself in `detail` (`entries[i]: `).',
    errors: ['W002', 'I003'],
  },
  'DELETE /wallets/:walletid/assets/:assetid': {
    auth: 'admin',
    file: ASSETS,
    summary: 'Burn units of a wallet',
    description:
      'Moves `quantity` units (or all that pending holds leave free) back to `mint`, recorded as a transaction; nothing free to burn is a 204 that changes nothing, more than is free `I002`.',
    errors: ['W002', 'I002'],
  },

  // Events: webhooks and the event stream.
  'PUT /wallet/webhook': {
    auth: 'user',
    file: WEBHOOKS,
    summary: 'Set the wallet webhook',
    description:
      "Sets (or replaces) the active wallet's webhook with a new signing secret, shown only here; events still waiting go to the new URL. Each event is POSTed signed (Standard Webhooks) and retried on failure.",
    errors: ['W010', 'W000'],
  },
  'GET /wallet/webhook': {
    auth: 'user',
    file: WEBHOOKS,
    summary: 'The wallet webhook',
    description: 'The URL and when it was set, or `{"webhook": null}`. The secret is never shown again.',
    errors: [],
  },
  'DELETE /wallet/webhook': {
    auth: 'user',
    file: WEBHOOKS,
    summary: 'Remove the wallet webhook',
    description: 'Removes the webhook and cancels every delivery still waiting.',
    errors: [],
  },
  'GET /wallet/webhook/deliveries': {
    auth: 'user',
    file: WEBHOOKS,
    summary: 'Webhook deliveries',
    description: "The active wallet's deliveries, newest first, each with its attempts.",
    errors: [],
  },
  'POST /wallet/webhook/deliveries/:id/retry': {
    auth: 'user',
    file: WEBHOOKS,
    summary: 'Retry a delivery',
    description: "Makes a delivery due now, whatever its status, to the wallet's current webhook.",
    errors: ['G006'],
  },
  'GET /wallet/events': {
    auth: 'wallet',
    file: STREAM,
    summary: 'Stream the wallet events',
    description:
      'Server-Sent Events: `id` is the event sequence number, `event` the type, `data` the event JSON (as delivered to webhooks). ' +
      'Send `Last-Event-ID` to receive what followed that event first. Comment lines keep the stream alive; a revoked credential ends it.',
    errors: [],
  },

  // Operations.
  'GET /healthz': {
    auth: 'none',
    file: OPERATIONS,
    summary: 'Liveness',
    description: 'Answers while the process runs, with its version.',
    errors: [],
  },
  'GET /readyz': {
    auth: 'none',
    file: OPERATIONS,
    summary: 'Readiness',
    description: 'Answers once the storage answers; S001 while it does not (take the instance out of the balancer).',
    errors: [],
  },

  // The operator (the console's admin pages).
  'POST /admin/sessions': {
    auth: 'none',
    file: ADMIN,
    summary: 'Open an operator session with the admin key',
    description:
      'Exchanges the admin key for an operator session cookie (12 hours, never extended), for the console. Limited per client address.',
    errors: ['A003', 'G005'],
  },
  'DELETE /admin/session': {
    auth: 'admin',
    file: ADMIN,
    summary: 'End the operator session',
    description: 'Ends the operator session and clears its cookie.',
    errors: [],
  },
  // The journal: one order of every transaction, its feed, checkpoints and proofs.
  'GET /admin/journal': {
    auth: 'admin',
    file: JOURNAL,
    summary: 'Follow the journal',
    description:
      "Every transaction after position `after` (default 0), in position order, each once: `{entries, next}` with `next` the last entry's position (or `after`). With `wait` (seconds, up to 30) it answers as soon as there is an entry, or empty when the time is up.",
    errors: [],
  },
  'GET /admin/journal/stream': {
    auth: 'admin',
    file: JOURNAL,
    summary: 'The journal as Server-Sent Events',
    description:
      'The feed as Server-Sent Events: `id` is the position, `data` the Transaction. Resumes after `Last-Event-ID` (or `after`).',
    errors: [],
  },
  'GET /journal/key': {
    auth: 'none',
    file: JOURNAL,
    summary: 'The checkpoint signing key',
    description: 'The Ed25519 public key that signs checkpoints, base64 of its raw 32 bytes.',
    errors: [],
  },
  'GET /journal/checkpoint': {
    auth: 'any',
    file: JOURNAL,
    summary: 'The latest signed checkpoint',
    description:
      "The latest checkpoint: the journal's size, its RFC 9162 Merkle root, when it was signed, and the Ed25519 signature of `coffer-checkpoint/v1\\n{size}\\n{root}\\n{signed_at}\\n`.",
    errors: ['J000'],
  },
  'GET /journal/consistency': {
    auth: 'any',
    file: JOURNAL,
    summary: 'Prove the journal only grew',
    description:
      "The RFC 9162 consistency proof between the trees of sizes `from` and `to` (1 ≤ from ≤ to ≤ the latest checkpoint's size).",
    errors: [],
  },
  'GET /wallet/transactions/:id/proof': {
    auth: 'wallet',
    file: JOURNAL,
    summary: 'Prove a transaction is in the journal',
    description:
      "The transaction (sent or received by the wallet), its leaf index (position - 1), the latest signed checkpoint and the RFC 9162 audit path from its leaf to that checkpoint's root. `J000` with `Retry-After` until a checkpoint covers it.",
    errors: ['T000', 'J000'],
  },
  'GET /admin/overview': {
    auth: 'admin',
    file: ADMIN,
    summary: 'Counts and what circulates of each asset',
    description: 'Counts of users, wallets and transactions, and per asset what circulates and how many wallets hold it.',
    errors: [],
  },
  'GET /admin/wallets': {
    auth: 'admin',
    file: ADMIN,
    summary: 'Find wallets by id, address or owner',
    description: 'A page of user wallets matching the search (deleted ones included, marked).',
    errors: [],
  },
  'GET /admin/wallets/:id': {
    auth: 'admin',
    file: ADMIN,
    summary: 'A wallet with its owner, users and holdings',
    description: 'One user wallet as the operator sees it.',
    errors: ['W002'],
  },
  'GET /admin/transactions': {
    auth: 'admin',
    file: ADMIN,
    summary: 'The whole journal, newest first',
    description: "Every transaction, or one wallet's, filtered as a wallet's history is; the `Link` header gives the next page.",
    errors: [],
  },
  'GET /admin/verification': {
    auth: 'admin',
    file: ADMIN,
    summary: 'Check the whole ledger as `coffer verify` does',
    description: 'Recomputes every holding from the journal and checks the ledger rules; lists any problem found.',
    errors: [],
  },
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
 * Writes the index's summary, description and error responses into each API route's schema as it
 * is registered (routes hidden from the reference are left alone). Call before the routes.
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
      summary: doc.summary,
      description: doc.description,
      response: { ...response, ...errorResponses(routeErrorCodes(doc, method, route.schema)) },
    }
  })
}
