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

/** True when the costly reviver can be left out: NUL and lone surrogates need a `\u` escape, `__proto__` the word. */
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

/** Strict UTF-8 JSON bodies storable on both storages, never coerced ("5" is not 5); paths and queries are. */
export function registerParsing(app: FastifyInstance): void {
  const bodyAjv = buildAjv(false)
  const urlAjv = buildAjv(true)
  app.setValidatorCompiler(({ schema, httpPart }) => (httpPart === 'body' ? bodyAjv : urlAjv).compile(schema))
  app.removeContentTypeParser('application/json')
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (_request, body, done) => {
    // A bodiless DELETE (or POST with an empty body) is accepted; the schema decides if a body was needed.
    if ((body as Buffer).length === 0) return done(null, undefined)
    try {
      // Invalid bytes are refused, not replaced; PostgreSQL text cannot store NUL or lone surrogates.
      const text = UTF8.decode(body as Buffer)
      done(null, canParsePlainly(text) ? JSON.parse(text) : JSON.parse(text, refuseUnstorable))
    } catch {
      const error = Object.assign(stacklessError('invalid JSON'), { statusCode: 400, code: 'FST_ERR_CTP_INVALID_JSON_BODY' })
      done(error, undefined)
    }
  })
  // A callback hook: an async one costs every request a promise.
  app.addHook('preValidation', (request, _reply, done) => {
    // A missing body reads as `{}`, so the schema names the missing field.
    if (request.body === undefined && (request.method === 'POST' || request.method === 'PUT')) request.body = {}
    done(refusedUrlValue(request))
  })
  // Coercion would take `0x10`, `1e1` or `2.0`: only decimal digits are a query integer here.
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

/** G001 / G002 for a path or query value that is not clean text; allocates nothing, as every request runs it. */
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
