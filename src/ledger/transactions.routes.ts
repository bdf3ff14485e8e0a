import { Readable } from 'node:stream'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type, type TSchema } from '@sinclair/typebox'
import { arrivalMark } from '../db/commit-state.ts'
import type { Database } from '../db/database.ts'
import { keyLimitsOf, walletOf } from '../http/auth.ts'
import { nextPageLink } from '../http/paging.ts'
import { ErrorSchema, IdParams, JSON_TYPE, parseId, Timestamp } from '../http/schemas.ts'
import { metadataFilters, metadataParameters } from './history.service.ts'
import {
  CursorId,
  DryRunAnswer,
  DryRunQuery,
  Holding,
  IdempotencyHeaders,
  Kind,
  ReversalBody,
  SendBody,
  Transaction,
  UnrecordedTransaction,
} from './ledger.schemas.ts'
import type { Ledger } from './ledger.service.ts'

export interface TransactionsRoutesOptions {
  database: Database
  ledger: Ledger
}

/** The most transfers in one batch request. */
const MAX_BATCH_TRANSFERS = 100

const BatchBody = Type.Object({
  transfers: Type.Array(SendBody, {
    minItems: 1,
    maxItems: MAX_BATCH_TRANSFERS,
    description: `1-${MAX_BATCH_TRANSFERS} transfers, each the body of POST /wallet/transactions`,
  }),
  atomic: Type.Optional(Type.Boolean({ default: true, description: 'true: all commit or none does; false: each commits or fails alone' })),
})

/** One transfer's outcome in a batch that is not atomic; `transaction` as the batch records it (or a dry run shows it). */
function BatchResult<T extends TSchema>(transaction: T) {
  return Type.Union([
    Type.Object({ status: Type.Literal(201), transaction }),
    Type.Object({ status: Type.Integer({ minimum: 400, maximum: 499 }), error: Type.Pick(ErrorSchema, ['code', 'message', 'detail']) }),
  ])
}

/** What a batch answers: `transactions` (atomic, 201) or `results` (not atomic, 200). */
function BatchAnswers<T extends TSchema>(transaction: T) {
  return {
    transactions: Type.Object({ transactions: Type.Array(transaction) }),
    results: Type.Object({ results: Type.Array(BatchResult(transaction)) }),
  }
}
const Batch = BatchAnswers(Transaction)
const UnrecordedBatch = BatchAnswers(UnrecordedTransaction)

/**
 * A batch's body may be far larger than a transfer's: 100 transfers, each with up to 64 assets
 * (and metadata). The service-wide limit (BODY_LIMIT_BYTES) still applies when it is larger.
 */
const BATCH_BODY_LIMIT = 2 * 1024 * 1024

const ListQuery = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 10 })),
    offset: Type.Optional(Type.Integer({ minimum: 0, maximum: 10_000, default: 0 })),
    before: Type.Optional(CursorId),
    after: Type.Optional(CursorId),
    asset: Type.Optional(Type.String({ minLength: 1, maxLength: 32 })),
    direction: Type.Optional(Type.Union([Type.Literal('sent'), Type.Literal('received')])),
    since: Type.Optional(Timestamp),
    until: Type.Optional(Timestamp),
    kind: Type.Optional(Kind),
    schedule_id: Type.Optional(
      Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER, description: 'only the runs of this schedule' }),
    ),
    format: Type.Optional(
      Type.Union([Type.Literal('json'), Type.Literal('csv')], {
        description:
          '`csv`: every matching transaction as a text/csv statement, one row per transaction and asset (paging parameters ignored)',
      }),
    ),
  },
  { description: 'also `metadata[KEY]=VALUE`, at most 5, all matching exactly' },
)

const HoldingsQuery = Type.Object({
  as_of: Type.Optional(
    Type.String({ ...Timestamp, description: 'the holdings as they were at this instant, recomputed from the journal' }),
  ),
})

/** The general wallet routes (wallet auth): holdings, sending, history. */
const transactionsRoutes: FastifyPluginAsyncTypebox<TransactionsRoutesOptions> = async (app, { database, ledger }) => {
  const { db } = database
  const tags = ['wallet']
  // Each wallet-auth route names the scope a wallet key needs for it (http/key-scopes.ts).
  const read = { onRequest: app.requireWalletAccess, config: { scope: 'read' as const } }
  const send = { onRequest: app.requireWalletAccess, config: { scope: 'send' as const } }
  const { history } = ledger
  if (app.hasDecorator('metrics')) app.metrics.registerMetric(history.pageLookups)
  // Taken before the credential lookup, so the page can use the commit state that lookup read.
  const arrivals = new WeakMap<object, number>()
  const markArrival = (request: object, _reply: unknown, done: () => void) => {
    arrivals.set(request, arrivalMark(db))
    done()
  }
  const historyPage = { onRequest: [markArrival, app.requireWalletAccess], config: { scope: 'read' as const } }

  app.get(
    '/wallet/assets',
    {
      ...read,
      schema: {
        summary: 'What the wallet holds',
        description:
          'Every asset the wallet holds more than zero of, by asset name (case-insensitively), with what ' +
          'pending holds reserve of it (`held`; `quantity - held` may be spent). With `as_of` (a ' +
          'timestamp), the holdings as they were at that instant, from running balances (`held` 0 there; ' +
          "`[]` before the wallet's first transaction).",
        tags,
        querystring: HoldingsQuery,
        response: { 200: Type.Array(Holding), '4xx': ErrorSchema },
      },
    },
    async (request) =>
      request.query.as_of === undefined
        ? history.listHoldings(walletOf(request))
        : history.listHoldingsAsOf(walletOf(request), request.query.as_of),
  )

  app.post(
    '/wallet/transactions',
    {
      ...send,
      schema: {
        summary: 'Send assets',
        description:
          'Moves every listed asset to the recipient (a username, an address with `type: 1`, or a wallet id ' +
          'with `type: 2`) as one transaction: all of it or nothing. With an `Idempotency-Key`, a repeat of ' +
          'the same request answers the first response (`Idempotent-Replayed: true`) and moves nothing. ' +
          'Checked in this order: key, recipient, own wallet, asset names, quantities. With `dry_run=true`, ' +
          'every check and nothing written: 200 with the transaction it would record and the holdings after it.',
        tags,
        querystring: DryRunQuery,
        body: SendBody,
        headers: IdempotencyHeaders,
        response: { 200: DryRunAnswer(UnrecordedTransaction), 201: Transaction, '4xx': ErrorSchema },
      },
    },
    async (request, reply) => {
      if (request.query.dry_run)
        return reply.status(200).send(await ledger.transfers.dryRun(walletOf(request), request.body, keyLimitsOf(request)))
      const result = await ledger.transfers.send(walletOf(request), request.body, request.headers['idempotency-key'], keyLimitsOf(request))
      if (result.replayed) reply.header('idempotent-replayed', 'true')
      return reply.status(result.status).send(result.body)
    },
  )

  app.post(
    '/wallet/transactions/:id/refund',
    {
      ...send,
      schema: {
        summary: 'Refund a transaction you received',
        description:
          'Moves back to the sender what the wallet received in a transfer or capture, as a transaction of ' +
          'kind `reversal` naming it in `reverses`: the listed quantities, or by default all that is not ' +
          'yet refunded. All refunds of a transaction together never move back more of an asset than it ' +
          'moved. `Idempotency-Key` as for transfers. Checked in this order: key, transaction, asset names, ' +
          'deleted sides, what is left, quantities. With `dry_run=true`, every check and nothing written: 200 ' +
          'with the reversal it would record and the holdings after it.',
        tags,
        params: IdParams('id'),
        querystring: DryRunQuery,
        body: ReversalBody,
        headers: IdempotencyHeaders,
        response: { 200: DryRunAnswer(UnrecordedTransaction), 201: Transaction, '4xx': ErrorSchema },
      },
    },
    async (request, reply) => {
      if (request.query.dry_run) {
        const id = parseId(request.params.id)
        return reply.status(200).send(await ledger.reversals.dryRunRefund(walletOf(request), id, request.body, keyLimitsOf(request)))
      }
      const result = await ledger.reversals.refund(
        walletOf(request),
        parseId(request.params.id),
        request.body,
        request.headers['idempotency-key'],
        keyLimitsOf(request),
      )
      if (result.replayed) reply.header('idempotent-replayed', 'true')
      return reply.status(result.status).send(result.body)
    },
  )

  app.post(
    '/wallet/transactions/batch',
    {
      ...send,
      bodyLimit: Math.max(BATCH_BODY_LIMIT, app.initialConfig.bodyLimit ?? 0),
      schema: {
        summary: 'Send a batch of transfers',
        description:
          'Up to 100 transfers (each the body of `POST /wallet/transactions`) from the wallet in one ' +
          'request. `atomic: true` (the default): all commit together or none does; 201 `{transactions}` in ' +
          "request order, or the first failing transfer's error, its `detail` starting `transfers[i]: `. " +
          '`atomic: false`: each commits or fails alone; 200 `{results}` in request order, each `{status: ' +
          '201, transaction}` or `{status, error}`. One `Idempotency-Key` covers the whole batch. With ' +
          '`dry_run=true`, every check and nothing written: 200 `{dry_run, result, holdings_after}`, `result` the ' +
          'body the batch would answer.',
        tags,
        querystring: DryRunQuery,
        body: BatchBody,
        headers: IdempotencyHeaders,
        response: {
          200: Type.Union([Batch.results, DryRunAnswer(Type.Union([UnrecordedBatch.transactions, UnrecordedBatch.results]))]),
          201: Batch.transactions,
          '4xx': ErrorSchema,
        },
      },
    },
    async (request, reply) => {
      if (request.query.dry_run)
        return reply.status(200).send(await ledger.batches.dryRun(walletOf(request), request.body, keyLimitsOf(request)))
      const result = await ledger.batches.send(walletOf(request), request.body, request.headers['idempotency-key'], keyLimitsOf(request))
      if (result.replayed) reply.header('idempotent-replayed', 'true')
      return reply.status(result.status).send(result.body)
    },
  )

  app.get(
    '/wallet/transactions',
    {
      ...historyPage,
      schema: {
        summary: "The wallet's history",
        description:
          'Transactions sent or received by the wallet, newest first, filtered by asset, direction, time, ' +
          '`kind` and `metadata[KEY]=VALUE` (at most 5, all matching exactly). The `Link` header ' +
          '(`rel="next"`) gives the next page; `after` lists what committed since a known id. With ' +
          '`format=csv`, every matching transaction as a streamed `text/csv` statement (paging ignored).',
        tags,
        querystring: ListQuery,
        response: { 200: Type.Array(Transaction), '4xx': ErrorSchema },
      },
    },
    async (request, reply) => {
      if (request.query.format === 'csv') {
        const walletId = walletOf(request)
        const rows = history.exportWalletTransactions(walletId, { ...request.query, metadata: metadataFilters(request.query) })
        // The header row is read before anything is sent, so a bad filter is still a G002.
        const first = await rows.next()
        const date = new Date().toISOString().slice(0, 10)
        return (
          reply
            .type('text/csv; charset=utf-8')
            .header('content-disposition', `attachment; filename="statement-wallet-${walletId}-${date}.csv"`)
            // A stream is sent as it is, past the JSON schema of the page (which the type insists on).
            .send(Readable.from(prepend(first.value ?? '', rows)) as never)
        )
      }
      const metadata = metadataFilters(request.query)
      const page = await history.answerWalletTransactions(
        walletOf(request),
        { ...request.query, metadata },
        (transactions) => String(reply.serialize(transactions)),
        arrivals.get(request),
      )
      if (page.more && page.lastId !== undefined) {
        // The next page continues below this one's last id, with the same filters; offset is spent.
        const { limit, after, asset, direction, since, until, kind, schedule_id } = request.query
        reply.header(
          'link',
          nextPageLink('/wallet/transactions', {
            before: page.lastId,
            limit: limit ?? 10,
            after,
            asset,
            direction,
            since,
            until,
            kind,
            schedule_id,
            ...metadataParameters(metadata),
          }),
        )
      }
      // Already in the schema's layout: not serialized again.
      return reply.type(JSON_TYPE).send(page.body as never)
    },
  )
}

export default transactionsRoutes

async function* prepend(first: string, rest: AsyncIterable<string>): AsyncGenerator<string> {
  yield first
  yield* rest
}
