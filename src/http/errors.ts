import type { FastifyReply } from 'fastify'
/**
 * Every error code of the contract (§2), with its status and message. Adding a code without a
 * status or message fails the type check; test/errors.test.ts walks the whole table.
 */
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
} as const satisfies Record<string, { status: number; message: string }>

export type ErrorCode = keyof typeof ERRORS

export interface ErrorBody {
  code: ErrorCode
  message: string
  detail?: string
  request_id: string
}

/** A rule broken by the request; the error handler turns it into the contract's error body. */
export class AppError extends Error {
  /** Always the table's status for the code: one status per code (contract §2). */
  readonly status: number
  readonly headers: Record<string, string>

  constructor(
    readonly code: ErrorCode,
    readonly detail?: string,
    options: { headers?: Record<string, string> } = {},
  ) {
    super(detail ? `${code} ${ERRORS[code].message}: ${detail}` : `${code} ${ERRORS[code].message}`)
    this.status = ERRORS[code].status
    this.headers = options.headers ?? {}
  }
}

/**
 * Answers with the contract's error body (§2) and the table's status for the code. The body is
 * written here, in the contract's field order: a route's response serializer would put the
 * optional `detail` after `request_id`.
 */
export function sendError(reply: FastifyReply, code: ErrorCode, detail?: string): FastifyReply {
  return reply.status(ERRORS[code].status).type('application/json; charset=utf-8').send(JSON.stringify(errorBody(code, reply.request.id, detail)))
}

export function errorBody(code: ErrorCode, requestId: string, detail?: string): ErrorBody {
  return detail === undefined
    ? { code, message: ERRORS[code].message, request_id: requestId }
    : { code, message: ERRORS[code].message, detail, request_id: requestId }
}
