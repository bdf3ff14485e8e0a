import { Type } from '@sinclair/typebox'
import { AppError, ERRORS, type ErrorCode } from './errors.ts'

/** Shapes shared by every domain. */

/** The content type Fastify gives the JSON it serializes: for a body sent as JSON text already. */
export const JSON_TYPE = 'application/json; charset=utf-8'

export const ErrorSchema = Type.Object(
  {
    // An enum, so that typed clients know every code (client/openapi.d.ts).
    code: Type.Unsafe<ErrorCode>({ type: 'string', enum: Object.keys(ERRORS), examples: ['I002'] }),
    message: Type.String(),
    detail: Type.Optional(Type.String()),
    request_id: Type.String(),
  },
  {
    description:
      'The body of every error: `code` from the error table, its `message`, an optional human-readable `detail`, and the request id',
  },
)

/** Path ids are strings of digits: `1e3`, `-1` or `abc` are G001, not coerced. */
export const IdString = Type.String({ pattern: '^[1-9][0-9]{0,15}$', description: 'positive integer id' })

export function IdParams<K extends string>(name: K) {
  return Type.Object({ [name]: IdString } as { [P in K]: typeof IdString })
}

/** Turns a validated id string into a number; ids beyond 2^53-1 are G001. */
export function parseId(raw: string): number {
  const id = Number(raw)
  if (!Number.isSafeInteger(id)) throw new AppError('G001', `${raw} is not a valid id`)
  return id
}

export const Id = Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER })
export const Timestamp = Type.String({ format: 'date-time', examples: ['2026-11-21T22:25:29.123Z'] })
export const Username = Type.String({ pattern: '^[A-Za-z0-9]{2,32}$', description: '2-32 ASCII letters or digits' })
export const Password = Type.String({ minLength: 8, maxLength: 32 })
export const Address = Type.String({ pattern: '^[a-z]{3,24}$', description: '3-24 lowercase letters' })
export const Empty = Type.Object({})

/** Responses of a route: the success shape plus the error body for every failure status. */
export function responses<S extends number, T>(status: S, schema: T) {
  return { [status]: schema, '4xx': ErrorSchema, '5xx': ErrorSchema } as { [K in S]: T } & {
    '4xx': typeof ErrorSchema
    '5xx': typeof ErrorSchema
  }
}
