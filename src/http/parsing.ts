import { Ajv } from 'ajv'
import addFormats from 'ajv-formats'
import type { FastifyInstance, FastifyRequest, preValidationHookHandler } from 'fastify'
import { AppError, stacklessError } from './errors.ts'

const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false })
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/

/** Text without NUL or unpaired surrogates, which neither storage can keep as they came. */
function isCleanText(text: string): boolean {
  return !text.includes('\u0000') && !LONE_SURROGATE.test(text)
}

/** For `JSON.parse`: drops `__proto__` keys, refuses keys and strings that are not clean text. */
function refuseUnstorable(key: string, value: unknown): unknown {
  if (key === '__proto__') return undefined
  if (!isCleanText(key) || (typeof value === 'string' && !isCleanText(value))) throw new Error('unstorable text')
  return value
}

/**
 * True when plain `JSON.parse` gives what `refuseUnstorable` would, so the costly reviver can be
 * left out. NUL or a lone surrogate can only come from a `\u` escape (the text is valid UTF-8 and
 * JSON refuses raw control characters), and `__proto__` needs the word or an escape.
 */
function canParsePlainly(text: string): boolean {
  return !text.includes('\\u') && !text.includes('__proto__')
}

function buildAjv(coerceTypes: boolean) {
  const ajv = new Ajv({ coerceTypes, removeAdditional: true, useDefaults: true, allErrors: false, strict: false })
  addFormats.default(ajv)
  return ajv
}

/** The fields a query schema declares as integers. */
function integerFields(schema: unknown): string[] {
  if (typeof schema !== 'object' || schema === null) return []
  const properties = (schema as { properties?: Record<string, { type?: unknown }> }).properties ?? {}
  return Object.keys(properties).filter((name) => properties[name].type === 'integer')
}

/**
 * How requests are read: JSON bodies (strict UTF-8, no `__proto__`, no text either storage cannot
 * keep), schema validation with bodies never coerced ("5" is not 5) while paths and queries are,
 * and a missing body read as `{}`.
 */
export function registerParsing(app: FastifyInstance): void {
  const bodyAjv = buildAjv(false)
  const urlAjv = buildAjv(true)
  app.setValidatorCompiler(({ schema, httpPart }) => (httpPart === 'body' ? bodyAjv : urlAjv).compile(schema))
  app.removeContentTypeParser('application/json')
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (_request, body, done) => {
    // A bodiless DELETE (or POST with an empty body) is accepted; the schema decides if a body was needed.
    if ((body as Buffer).length === 0) return done(null, undefined)
    try {
      // JSON is UTF-8: invalid bytes are refused, not silently replaced; NUL and lone surrogates
      // cannot be stored as PostgreSQL text, so no string may carry them.
      const text = UTF8.decode(body as Buffer)
      done(null, canParsePlainly(text) ? JSON.parse(text) : JSON.parse(text, refuseUnstorable))
    } catch {
      const error = Object.assign(stacklessError('invalid JSON'), { statusCode: 400, code: 'FST_ERR_CTP_INVALID_JSON_BODY' })
      done(error, undefined)
    }
  })
  // One hook, taking a callback rather than returning a promise: every request runs it, and an
  // async hook costs a promise and a turn of the microtask queue each.
  app.addHook('preValidation', (request, _reply, done) => {
    // A missing body reads as `{}`: routes whose fields are all optional (POST /user/wallets)
    // accept a bodiless request, and the others name the missing field.
    if (request.body === undefined && (request.method === 'POST' || request.method === 'PUT')) request.body = {}
    done(refusedUrlValue(request))
  })
  // Query integers are coerced from text, which would also take `0x10`, `1e1`, ` 2` or `2.0`:
  // only decimal digits are a number here. Checked by a hook of each route whose query has
  // integers (history, holds, the lists), after the hook above, with the fields found once when
  // the route is registered: in the hook above it read `request.routeOptions` (an object Fastify
  // builds per call) on every request with a query.
  app.addHook('onRoute', (route) => {
    const fields = integerFields(route.schema?.querystring)
    if (fields.length === 0) return
    const checkIntegers: preValidationHookHandler = (request, _reply, done) =>
      done(refusedInteger(request.query as Record<string, unknown> | undefined, fields))
    route.preValidation = [...[route.preValidation ?? []].flat(), checkIntegers]
  })
}

/** True when a path or query value (or one of a repeated query field's values) is not clean text. */
function hasUncleanValue(part: Record<string, unknown>): boolean {
  for (const key in part) {
    const value = part[key]
    if (
      typeof value === 'string'
        ? !isCleanText(value)
        : Array.isArray(value) && value.some((item) => typeof item === 'string' && !isCleanText(item))
    )
      return true
  }
  return false
}

/**
 * G001 / G002 for a path or query value that is not clean text; undefined when every value
 * passes. Every request runs this, so it allocates nothing.
 */
function refusedUrlValue(request: FastifyRequest): AppError | undefined {
  // Path and query values decode %00 and %ED%A0%80 too: refused like malformed ids and queries.
  if (request.params && hasUncleanValue(request.params as Record<string, unknown>))
    return new AppError('G001', 'contains a NUL or malformed character')
  const query = request.query as Record<string, unknown> | undefined
  if (query && hasUncleanValue(query)) return new AppError('G002', 'contains a NUL or malformed character')
  return undefined
}

const DIGITS = /^[0-9]+$/

/** G002 for a query integer that is not written as plain decimal digits. */
function refusedInteger(query: Record<string, unknown> | undefined, fields: string[]): AppError | undefined {
  for (const name of fields) {
    const value = query?.[name]
    if (typeof value === 'string' && !DIGITS.test(value)) return new AppError('G002', `${name} must be a whole number`)
  }
  return undefined
}
