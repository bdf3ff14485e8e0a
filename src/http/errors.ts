import type { FastifyReply } from 'fastify'
/** The error table; a code without status, message or meaning fails the type check. */
export const ERRORS = {
  G000: { status: 400, message: 'Invalid JSON Body' },
  G001: { status: 400, message: 'Invalid URL Parameter' },
  G002: { status: 400, message: 'Invalid URL Query' },
  G003: { status: 409, message: 'Idempotency Key Reused' },
  G004: { status: 409, message: 'Request In Progress' },
  G005: { status: 429, message: 'Too Many Requests' },
  G006: { status: 404, message: 'Route Not Found' },
  S000: { status: 500, message: 'Unexpected Server Error' },
  S001: { status: 503, message: 'Service Unavailable' },
  U000: { status: 409, message: 'Username Taken' },
  U001: { status: 401, message: 'Invalid Username or Password' },
  U003: { status: 404, message: 'User Not Found' },
  U004: { status: 404, message: 'Session Not Found' },
  W000: { status: 404, message: 'Wallet Not Found' },
  W002: { status: 404, message: 'Wallet or Asset Not Found' },
  W003: { status: 409, message: 'User Already Assigned To Wallet' },
  W005: { status: 404, message: 'Session Not Found' },
  W006: { status: 400, message: 'Wallet Not Owned' },
  W007: { status: 400, message: 'User Not Assigned' },
  W008: { status: 400, message: "Can't Delete Primary Wallet" },
  W010: { status: 400, message: 'Webhook URL Not Allowed' },
  W011: { status: 409, message: 'Address Taken' },
  W012: { status: 400, message: "Can't Transfer Primary Wallet" },
  W013: { status: 400, message: "Can't Send To Same Wallet" },
  A000: { status: 401, message: 'Session Required' },
  A001: { status: 401, message: 'Invalid Session' },
  A003: { status: 403, message: 'Invalid Admin Key' },
  A004: { status: 403, message: 'Cross-Site Request Refused' },
  I000: { status: 404, message: 'Asset Not Found' },
  I001: { status: 400, message: 'Invalid Asset' },
  I002: { status: 400, message: 'Insufficient Quantity' },
  I003: { status: 400, message: 'Quantity Overflow' },
  I004: { status: 409, message: 'Asset Name Taken' },
  I005: { status: 409, message: 'Asset In Use' },
  T000: { status: 404, message: 'Transaction Not Found' },
  T001: { status: 409, message: 'Transaction Not Reversible' },
  H000: { status: 404, message: 'Hold Not Found' },
  H001: { status: 409, message: 'Hold Not Pending' },
  H002: { status: 400, message: 'Capture Exceeds Hold' },
  J000: { status: 409, message: 'Not In Journal Yet' },
  K000: { status: 403, message: 'Key Scope Missing' },
  K001: { status: 403, message: 'Key Limit Reached' },
  K002: { status: 403, message: 'Recipient Not Allowed' },
  C000: { status: 409, message: 'Credit Not Allowed' },
  C001: { status: 409, message: 'Wallet In Debt' },
  R000: { status: 404, message: 'Schedule Not Found' },
  R001: { status: 409, message: 'Schedule Ended' },
  M000: { status: 404, message: 'Monitor Not Found' },
  M001: { status: 409, message: 'Too Many Monitors' },
} as const satisfies Record<string, { status: number; message: string }>

export type ErrorCode = keyof typeof ERRORS

/** What each code means for a client, as the API reference explains it under each route's errors. */
export const ERROR_MEANINGS: Record<ErrorCode, string> = {
  G000:
    'the body is not valid JSON, not an object, lacks a required field, or has a field of the wrong type or out of range ' +
    '(also a malformed header)',
  G001: 'a path parameter is malformed, e.g. an id that is not a positive integer',
  G002: 'a query parameter is malformed or out of range, e.g. `limit=1000`',
  G003: 'this Idempotency-Key was used before for a different request',
  G004: 'the first request with this Idempotency-Key is still running; retry later',
  G005: 'too many attempts from this address or for this name; retry after the `Retry-After` seconds',
  G006: 'no such route, or (where named) no such item on it',
  S000: 'an unexpected server error, logged with the request id (a transfer is safely retried with the same Idempotency-Key)',
  S001: 'the storage is unreachable or the service is shutting down; retry (with the same Idempotency-Key for a transfer)',
  U000: 'the username is taken (usernames are unique case-insensitively)',
  U001: 'the username or the password is wrong (the same answer for both)',
  U003: 'no user has this username or id (or the user is not assigned to the wallet)',
  U004: 'the caller has no user session with this id',
  W000: 'no such wallet, or a wallet the caller may not use (deleted, or access removed)',
  W002: 'no such user wallet or asset (admin routes; mint is not a user wallet)',
  W003: 'the user is already assigned to the wallet, or is its owner',
  W005: 'the wallet has no key (wallet session) with this id',
  W006: 'only the owner of the wallet may do this',
  W007: 'the new owner must be a user assigned to the wallet',
  W008: 'a primary wallet cannot be deleted; make another wallet primary first',
  W010: 'the webhook URL is not an absolute http(s) URL of at most 512 characters reaching a public address',
  W011: 'the address is taken (by any wallet, deleted ones included)',
  W012: 'a primary wallet cannot change hands; make another wallet primary first',
  W013: 'a wallet cannot send to itself',
  A000: 'no credential was sent',
  A001: 'the token is unknown, revoked, expired, idle too long or malformed, or of a kind this route does not take',
  A003: 'the admin key (or the operator session) is missing or wrong',
  A004: 'a cookie-authenticated write came from another site (CSRF guard)',
  I000: 'no such asset',
  I001: 'an asset name in the transfer names no asset',
  I002: 'the wallet holds less of an asset than requested',
  I003: 'a quantity or a resulting holding would exceed 2^53-1',
  I004: 'an asset with this name exists (names are unique case-insensitively)',
  I005: 'the asset is still held; burn every holding of it first',
  T000: 'no such transaction, or not one the caller may refund (only the receiving wallet of a transfer or capture may)',
  T001: 'a reversal cannot be reversed, and all reversals of a transaction together never move back more of an asset than it moved',
  H000: 'no such hold, or a hold the wallet is not a side of (a capture: not the sending wallet)',
  H001: 'the hold is captured, voided or expired already',
  H002: 'the capture asks for more of an asset than the hold holds, or for an asset the hold lacks',
  J000: 'no signed checkpoint covers the transaction yet; retry after the `Retry-After` seconds',
  K000: "the wallet key's scopes do not include what this route needs (`read`, `send`, `hold`, ...)",
  K001: 'the request would take the wallet key past one of its caps; `detail` names the cap (`per_transfer` or `per_day`)',
  K002: "the wallet key's `recipients` do not include this recipient",
  C000:
    'credit and expiry do not mix: a credit limit on an asset ever issued with `expires_at`, ' +
    'or an expiring issuance of an asset with credit',
  C001: 'the wallet owes on credit (a holding below zero): it cannot be deleted until the debt is paid',
  R000: 'no such schedule, or a schedule of another wallet',
  R001: 'the schedule is finished or cancelled: it can no longer be paused, resumed or cancelled',
  M000: 'no such monitor on this wallet',
  M001: 'a wallet has at most 20 monitors',
}

export interface ErrorBody {
  code: ErrorCode
  message: string
  detail?: string
  request_id: string
}

/** For refusals never logged with a stack, which would cost more than answering the 4xx; 5xx keep theirs. */
export function stacklessError(message: string): Error {
  const limit = Error.stackTraceLimit
  Error.stackTraceLimit = 0
  const error = new Error(message)
  Error.stackTraceLimit = limit
  return error
}

/** A rule broken by the request; the error handler turns it into the error body. */
export class AppError extends Error {
  /** Always the table's status for the code: one status per code. */
  readonly status: number
  readonly code: ErrorCode
  readonly detail: string | undefined
  readonly headers: Record<string, string>

  constructor(code: ErrorCode, detail?: string, options: { headers?: Record<string, string> } = {}) {
    // A refusal (4xx) is answered, never logged with its stack: no stack is captured (`stacklessError`).
    const limit = Error.stackTraceLimit
    if (ERRORS[code].status < 500) Error.stackTraceLimit = 0
    super(detail ? `${code} ${ERRORS[code].message}: ${detail}` : `${code} ${ERRORS[code].message}`)
    Error.stackTraceLimit = limit
    this.code = code
    this.detail = detail
    this.status = ERRORS[code].status
    this.headers = options.headers ?? {}
  }
}

/** The error body in the documented field order (a route's serializer would put `detail` last). */
export function sendError(reply: FastifyReply, code: ErrorCode, detail?: string): FastifyReply {
  return reply
    .status(ERRORS[code].status)
    .type('application/json; charset=utf-8')
    .send(JSON.stringify(errorBody(code, reply.request.id, detail)))
}

export function errorBody(code: ErrorCode, requestId: string, detail?: string): ErrorBody {
  return detail === undefined
    ? { code, message: ERRORS[code].message, request_id: requestId }
    : { code, message: ERRORS[code].message, detail, request_id: requestId }
}
