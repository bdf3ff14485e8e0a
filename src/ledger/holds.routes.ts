import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from '@sinclair/typebox'
import { keyLimitsOf, walletOf } from '../http/auth.ts'
import { nextPageLink } from '../http/paging.ts'
import { IdParams, parseId, responses } from '../http/schemas.ts'
import { DEFAULT_EXPIRES_IN } from './holds.service.ts'
import {
  CursorId,
  DryRunAnswer,
  DryRunQuery,
  Hold,
  HoldStatus,
  Quantity,
  SendBody,
  IdempotencyHeaders,
  Transaction,
  UnrecordedHold,
} from './ledger.schemas.ts'
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
  // Each wallet-auth route names the scope a wallet key needs for it (http/key-scopes.ts).
  const read = { onRequest: app.requireWalletAccess, config: { scope: 'read' as const } }
  const hold = { onRequest: app.requireWalletAccess, config: { scope: 'hold' as const } }

  app.post(
    '/wallet/holds',
    {
      ...hold,
      schema: {
        summary: 'Hold assets for a recipient',
        description:
          'Reserves the listed assets in the wallet for the recipient (the body of a transfer, plus ' +
          '`metadata` and `expires_in`: 60 to 2,592,000 seconds, a week by default). Nothing moves yet: the ' +
          'assets stay in the wallet as `held` and cannot be spent until the hold is captured, voided or ' +
          'expires. The same errors, in the same order, as a transfer; only what is free (`quantity - ' +
          'held`) may be held. `Idempotency-Key` as for a transfer. With `dry_run=true`, every check and ' +
          'nothing written: 200 with the hold it would place and the holdings after it.',
        tags,
        querystring: DryRunQuery,
        body: HoldBody,
        headers: IdempotencyHeaders,
        response: { ...responses(201, Hold), 200: DryRunAnswer(UnrecordedHold) },
      },
    },
    async (request, reply) => {
      if (request.query.dry_run)
        return reply.status(200).send(await ledger.holds.dryRun(walletOf(request), request.body, keyLimitsOf(request)))
      const result = await ledger.holds.create(walletOf(request), request.body, request.headers['idempotency-key'], keyLimitsOf(request))
      if (result.replayed) reply.header('idempotent-replayed', 'true')
      return reply.status(result.status).send(result.body)
    },
  )

  app.get(
    '/wallet/holds',
    {
      ...read,
      schema: {
        summary: "The wallet's holds",
        description:
          'Holds the wallet sent or receives, newest first, filtered by `status` and `direction`. A pending ' +
          'hold past its expiry is listed as expired. The `Link` header (`rel="next"`) gives the next page.',
        tags,
        querystring: HoldListQuery,
        response: responses(200, Type.Array(Hold)),
      },
    },
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

  app.get(
    '/wallet/holds/:id',
    {
      ...read,
      schema: {
        summary: 'One hold',
        description: 'A hold the wallet sent or receives.',
        tags,
        params: IdParams('id'),
        response: responses(200, Hold),
      },
    },
    async (request) => ledger.holds.find(walletOf(request), parseId(request.params.id)),
  )

  app.post(
    '/wallet/holds/:id/capture',
    {
      ...hold,
      schema: {
        summary: 'Capture a hold',
        description:
          'The sending wallet settles its hold: everything it holds (no body), or the quantities in ' +
          '`assets` (each at most what is held), moves to the recipient as one transaction of kind ' +
          '`capture`; the rest is released. `Idempotency-Key` as for a transfer. Checked in this order: ' +
          'key, hold, status, quantities.',
        tags,
        params: IdParams('id'),
        body: CaptureBody,
        headers: IdempotencyHeaders,
        response: responses(201, Transaction),
      },
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
    {
      ...hold,
      schema: {
        summary: 'Void a hold',
        description: 'Either side releases a pending hold: nothing moves, the sending wallet may spend it all again.',
        tags,
        params: IdParams('id'),
        response: responses(200, Hold),
      },
    },
    async (request) => ledger.holds.void(walletOf(request), parseId(request.params.id)),
  )
}

export default holdsRoutes
