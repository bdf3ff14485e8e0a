import crypto from 'node:crypto'
import { STATUS_CODES } from 'node:http'
import type { Socket } from 'node:net'
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest, FastifySchemaValidationError } from 'fastify'
import { describeStorageFault, isStorageUnavailable, RETRY_AFTER_SECONDS } from '../db/faults.ts'
import { SECURITY_HEADER_LINES, SECURITY_HEADERS } from './security-headers.ts'
import { AppError, errorBody, ERRORS, sendError, stacklessError, type ErrorCode } from './errors.ts'

/** Which code of the error table a failed schema check gets, by the part of the request that failed. */
const VALIDATION_CODES: Record<string, ErrorCode> = {
  body: 'G000',
  params: 'G001',
  querystring: 'G002',
  headers: 'G000',
}

/** Fastify's own errors by their code, for the error handler and the router's refusals alike. */
const FRAMEWORK_CODES: Record<string, { code: ErrorCode; detail: string }> = {
  FST_ERR_CTP_INVALID_JSON_BODY: { code: 'G000', detail: 'body is not valid JSON' },
  FST_ERR_CTP_EMPTY_JSON_BODY: { code: 'G000', detail: 'body is empty' },
  FST_ERR_CTP_INVALID_MEDIA_TYPE: { code: 'G000', detail: 'body must be application/json' },
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: { code: 'G000', detail: 'content-length does not match the body' },
  FST_ERR_CTP_BODY_TOO_LARGE: { code: 'G000', detail: 'body is too large' },
  FST_ERR_CTP_INVALID_TYPE: { code: 'G000', detail: 'invalid content type' },
  FST_ERR_BAD_URL: { code: 'G001', detail: 'malformed URL' },
  FST_ERR_MAX_PARAM_LENGTH: { code: 'G001', detail: 'a path parameter is too long' },
  // A route constraint that failed to decide is the server's fault, not the request's.
  FST_ERR_ASYNC_CONSTRAINT: { code: 'S000', detail: 'the route could not be chosen' },
}

/** A request the router refused before any hook ran, answered like every error. */
export function answerRouterError(error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  const { code, detail } = (error.code ? FRAMEWORK_CODES[error.code] : undefined) ?? FRAMEWORK_CODES.FST_ERR_BAD_URL
  sendError(reply.header('x-request-id', request.id).headers(SECURITY_HEADERS), code, detail)
}

/** The first schema error in words, naming a list's item first (`transfers[3]: …`) as the services do. */
function describeValidation(error: FastifyError): string {
  const first = error.validation?.[0]
  if (!first) return error.message
  const path = first.instancePath ? first.instancePath.slice(1).split('/') : []
  const item = path.findIndex((segment, index) => index > 0 && /^\d+$/.test(segment))
  const prefix = item > 0 ? `${path.slice(0, item).join('.')}[${path[item]}]: ` : ''
  const where = (item > 0 ? path.slice(item + 1) : path).join('.')
  const missing = (first.params as { missingProperty?: string } | undefined)?.missingProperty
  if (missing) return `${prefix}${where ? `${where}.` : ''}${missing} is required`
  return `${prefix}${where || 'value'} ${first.message ?? 'is invalid'}`
}

/** Fastify's `schemaErrorFormatter`: Fastify's own wording, without a stack trace. */
export function schemaError(errors: FastifySchemaValidationError[], dataVar: string): Error {
  const first = errors[0]
  return stacklessError(first ? `${dataVar}${first.instancePath ?? ''} ${first.message ?? 'is invalid'}` : `${dataVar} is invalid`)
}

/** One place that turns every failure into the error body of the error table (`errors.ts`). */
export function registerErrorHandler(app: FastifyInstance): void {
  app.setErrorHandler((error: FastifyError, request, reply) => {
    if (error instanceof AppError) {
      if (error.status >= 500) request.log.error({ err: error }, 'request failed')
      if (error.code === 'S001' && !error.headers['retry-after']) reply.header('retry-after', String(RETRY_AFTER_SECONDS))
      return sendError(reply.headers(error.headers), error.code, error.detail)
    }
    if (error.validation) {
      const code = VALIDATION_CODES[error.validationContext ?? 'body'] ?? 'G000'
      return sendError(reply, code, describeValidation(error))
    }
    const framework = error.code ? FRAMEWORK_CODES[error.code] : undefined
    if (framework) {
      return sendError(reply, framework.code, framework.detail)
    }
    if (error.statusCode === 429) {
      return sendError(reply, 'G005')
    }
    if (error.statusCode && error.statusCode >= 400 && error.statusCode < 500) {
      return sendError(reply, 'G000', 'malformed request')
    }
    if (isStorageUnavailable(error)) {
      // The log names the cause; the client is only told to come back with its Idempotency-Key.
      const cause = describeStorageFault(error)
      request.log.error(
        { cause: cause.code, reason: cause.message },
        `storage unavailable: ${cause.code ?? 'unknown cause'}: ${cause.message}`,
      )
      return sendError(reply.header('retry-after', String(RETRY_AFTER_SECONDS)), 'S001')
    }
    request.log.error({ err: error }, 'unexpected error')
    return sendError(reply, 'S000')
  })

  app.setNotFoundHandler((request, reply) => {
    sendError(reply, 'G006', `${request.method} ${request.url.split('?')[0]} does not exist`)
  })
}

/** A request Node's HTTP parser refused before Fastify saw it, answered `G000` like every error. */
export function answerClientError(error: Error & { code?: string }, socket: Socket): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return
  const detail =
    error.code === 'HPE_HEADER_OVERFLOW'
      ? 'the request headers are too large'
      : error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? 'the request took too long to arrive'
        : 'malformed HTTP request'
  const { status } = ERRORS.G000
  // As Node itself checks: nothing more may be written once a response to this request has begun.
  const response = (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage
  if (socket.writable && !response?.headersSent) {
    const requestId = crypto.randomUUID()
    const body = JSON.stringify(errorBody('G000', requestId, detail))
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\n` +
        `X-Request-Id: ${requestId}\r\n${SECURITY_HEADER_LINES}Connection: close\r\n\r\n${body}`,
    )
  }
  socket.destroy(error)
}
