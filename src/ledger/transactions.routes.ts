import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from '@sinclair/typebox'
import type { Database } from '../db/database.ts'
import { walletOf } from '../http/auth.ts'
import { ErrorSchema, Timestamp } from '../http/schemas.ts'
import * as history from './history.service.ts'
import { CursorId, Holding, SendBody, SendHeaders, Transaction } from './ledger.schemas.ts'
import type { Ledger } from './ledger.service.ts'

export interface TransactionsRoutesOptions {
  database: Database
  ledger: Ledger
}

const ListQuery = Type.Object({
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 10 })),
  offset: Type.Optional(Type.Integer({ minimum: 0, maximum: 10_000, default: 0 })),
  before: Type.Optional(CursorId),
  after: Type.Optional(CursorId),
  asset: Type.Optional(Type.String({ minLength: 1, maxLength: 32 })),
  direction: Type.Optional(Type.Union([Type.Literal('sent'), Type.Literal('received')])),
  since: Type.Optional(Timestamp),
  until: Type.Optional(Timestamp),
})

/** The general wallet routes (wallet auth): holdings, sending, history. */
const transactionsRoutes: FastifyPluginAsyncTypebox<TransactionsRoutesOptions> = async (app, { database, ledger }) => {
  const { db } = database
  const tags = ['wallet']
  const wallet = { onRequest: app.requireWalletAccess }

  app.get('/wallet/assets', { ...wallet, schema: { tags, response: { 200: Type.Array(Holding), '4xx': ErrorSchema } } }, async (request) =>
    history.listHoldings(db, walletOf(request)),
  )

  app.post(
    '/wallet/transactions',
    { ...wallet, schema: { tags, body: SendBody, headers: SendHeaders, response: { 201: Transaction, '4xx': ErrorSchema } } },
    async (request, reply) => {
      const result = await ledger.send(walletOf(request), request.body, request.headers['idempotency-key'])
      if (result.replayed) reply.header('idempotent-replayed', 'true')
      return reply.status(result.status).send(result.body)
    },
  )

  app.get('/wallet/transactions', { ...wallet, schema: { tags, querystring: ListQuery, response: { 200: Type.Array(Transaction), '4xx': ErrorSchema } } }, async (request, reply) => {
    const { transactions, more } = await history.listWalletTransactions(db, walletOf(request), request.query)
    if (more && transactions.length > 0) {
      // The next page continues below this one's last id, with the same filters; offset is spent.
      const { limit, after, asset, direction, since, until } = request.query
      const next = new URLSearchParams({ before: String(transactions[transactions.length - 1].id), limit: String(limit ?? 10) })
      for (const [key, value] of Object.entries({ after, asset, direction, since, until })) if (value !== undefined) next.set(key, String(value))
      reply.header('link', `</wallet/transactions?${next.toString()}>; rel="next"`)
    }
    return transactions
  })
}

export default transactionsRoutes
