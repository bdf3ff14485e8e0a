import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from '@sinclair/typebox'
import { walletOf } from '../http/auth.ts'
import { nextPageLink } from '../http/paging.ts'
import { IdParams, parseId, responses } from '../http/schemas.ts'
import { DEFAULT_EXPIRES_IN } from './holds.service.ts'
import { CursorId, Hold, HoldStatus, Quantity, SendBody, IdempotencyHeaders, Transaction } from './ledger.schemas.ts'
import type { Ledger } from './ledger.service.ts'

export interface HoldsRoutesOptions {
  ledger: Ledger
}

/** A transfer's body, and how long the hold lasts. */
const HoldBody = Type.Object(
  {
    ...SendBody.properties,
    expires_in: Type.Optional(
      Type.Integer({ minimum: 60, maximum: 2_592_000, default: DEFAULT_EXPIRES_IN, description: 'seconds until the hold expires' }),
    ),
  },
  { if: SendBody.if, else: SendBody.else },
)

const CaptureBody = Type.Object({
  assets: Type.Optional(
    Type.Record(Type.String(), Quantity, {
      minProperties: 1,
      maxProperties: 64,
      description: 'asset name → quantity to capture; everything when absent',
    }),
  ),
})

const HoldListQuery = Type.Object({
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 10 })),
  before: Type.Optional(CursorId),
  after: Type.Optional(CursorId),
  status: Type.Optional(HoldStatus),
  direction: Type.Optional(Type.Union([Type.Literal('sent'), Type.Literal('received')])),
})

/** Holds (two-phase transfers), wallet auth: create, list, read, capture, void (`holds.service.ts`). */
const holdsRoutes: FastifyPluginAsyncTypebox<HoldsRoutesOptions> = async (app, { ledger }) => {
  const tags = ['holds']
  const wallet = { onRequest: app.requireWalletAccess }

  app.post(
    '/wallet/holds',
    { ...wallet, schema: { tags, body: HoldBody, headers: IdempotencyHeaders, response: responses(201, Hold) } },
    async (request, reply) => {
      const result = await ledger.holds.create(walletOf(request), request.body, request.headers['idempotency-key'])
      if (result.replayed) reply.header('idempotent-replayed', 'true')
      return reply.status(result.status).send(result.body)
    },
  )

  app.get(
    '/wallet/holds',
    { ...wallet, schema: { tags, querystring: HoldListQuery, response: responses(200, Type.Array(Hold)) } },
    async (request, reply) => {
      const { holds, more } = await ledger.holds.list(walletOf(request), request.query)
      if (more && holds.length > 0) {
        const { limit, after, status, direction } = request.query
        reply.header(
          'link',
          nextPageLink('/wallet/holds', { before: holds[holds.length - 1].id, limit: limit ?? 10, after, status, direction }),
        )
      }
      return holds
    },
  )

  app.get('/wallet/holds/:id', { ...wallet, schema: { tags, params: IdParams('id'), response: responses(200, Hold) } }, async (request) =>
    ledger.holds.find(walletOf(request), parseId(request.params.id)),
  )

  app.post(
    '/wallet/holds/:id/capture',
    {
      ...wallet,
      schema: { tags, params: IdParams('id'), body: CaptureBody, headers: IdempotencyHeaders, response: responses(201, Transaction) },
    },
    async (request, reply) => {
      const result = await ledger.holds.capture(
        walletOf(request),
        parseId(request.params.id),
        request.body,
        request.headers['idempotency-key'],
      )
      if (result.replayed) reply.header('idempotent-replayed', 'true')
      return reply.status(result.status).send(result.body)
    },
  )

  app.post(
    '/wallet/holds/:id/void',
    { ...wallet, schema: { tags, params: IdParams('id'), response: responses(200, Hold) } },
    async (request) => ledger.holds.void(walletOf(request), parseId(request.params.id)),
  )
}

export default holdsRoutes
