import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from '@sinclair/typebox'
import type { Deps } from '../deps.ts'
import { adminKeyAttempts, clearOperatorCookie, OPERATOR_COOKIE, setOperatorCookie } from '../http/auth.ts'
import { AppError } from '../http/errors.ts'
import { nextPageLink } from '../http/paging.ts'
import { IdParams, parseId, responses } from '../http/schemas.ts'
import { metadataFilters, metadataParameters } from '../ledger/history.service.ts'
import { Transaction } from '../ledger/ledger.schemas.ts'
import { NoContent } from '../wallets/wallets.schemas.ts'
import * as S from './admin.schemas.ts'
import type { AdminService } from './admin.service.ts'

/** The console's operator sessions and the operator's read routes. */
const adminRoutes: FastifyPluginAsyncTypebox<Deps & { admin: AdminService }> = async (app, { config, limiter, admin }) => {
  // Key attempts here are limited per client address like logins (AUTH_RATE_LIMIT), wrong or right,
  // counted with the wrong admin keys of every other route (`http/auth.ts`).
  const tags = ['admin']
  const operator = { onRequest: app.requireAdmin }

  app.post(
    '/admin/sessions',
    {
      schema: {
        summary: 'Open an operator session with the admin key',
        description:
          'Exchanges the admin key for an operator session cookie (12 hours, never extended), for the ' +
          'console. Limited per client address.',
        tags,
        body: S.OperatorLoginBody,
        response: responses(201, S.OperatorSession),
      },
    },
    async (request, reply) => {
      await limiter.hit(adminKeyAttempts(request))
      const session = await admin.openOperatorSession(request.body.key)
      setOperatorCookie(reply, config, session.token)
      return reply.status(201).send({ expires_at: session.expiresAt })
    },
  )

  app.delete(
    '/admin/session',
    {
      ...operator,
      schema: {
        summary: 'End the operator session',
        description: 'Ends the operator session and clears its cookie.',
        tags,
        response: NoContent,
      },
    },
    async (request, reply) => {
      const token = request.cookies[OPERATOR_COOKIE]
      if (token) await admin.endOperatorSession(token)
      clearOperatorCookie(reply, config)
      return reply.status(204).send(null)
    },
  )

  app.get(
    '/admin/overview',
    {
      ...operator,
      schema: {
        summary: 'Counts and what circulates of each asset',
        description: 'Counts of users, wallets and transactions, and per asset what circulates and how many wallets ' + 'hold it.',
        tags,
        response: responses(200, S.Overview),
      },
    },
    async () => admin.describeOverview(),
  )

  app.get(
    '/admin/wallets',
    {
      ...operator,
      schema: {
        summary: 'Find wallets by id, address or owner',
        description: 'A page of user wallets matching the search (deleted ones included, marked).',
        tags,
        querystring: S.WalletSearchQuery,
        response: responses(200, Type.Array(S.AdminWallet)),
      },
    },
    async (request, reply) => {
      const { q, limit = 20, offset = 0 } = request.query
      const { wallets, more } = await admin.searchWallets({ q, limit, offset })
      if (more) reply.header('link', nextPageLink('/admin/wallets', { q, limit, offset: offset + limit }))
      return wallets
    },
  )

  app.get(
    '/admin/wallets/:id',
    {
      ...operator,
      schema: {
        summary: 'A wallet with its owner, users and holdings',
        description: 'One user wallet as the operator sees it.',
        tags,
        params: IdParams('id'),
        response: responses(200, S.AdminWalletDetail),
      },
    },
    async (request) => admin.describeWallet(parseId(request.params.id)),
  )

  app.get(
    '/admin/transactions',
    {
      ...operator,
      schema: {
        summary: 'The whole journal, newest first',
        description: "Every transaction, or one wallet's, filtered as a wallet's history is; the `Link` header gives " + 'the next page.',
        tags,
        querystring: S.JournalQuery,
        response: responses(200, Type.Array(Transaction)),
      },
    },
    async (request, reply) => {
      const { direction, wallet, ...filters } = request.query
      if (direction !== undefined) throw new AppError('G002', 'the journal has no direction')
      const metadata = metadataFilters(request.query)
      const { transactions, more } = await admin.listJournal({ ...filters, metadata, walletId: wallet })
      if (more && transactions.length > 0) {
        const { limit, after, asset, since, until, kind } = filters
        const before = transactions[transactions.length - 1].id
        reply.header(
          'link',
          nextPageLink('/admin/transactions', {
            before,
            limit: limit ?? 10,
            after,
            asset,
            since,
            until,
            kind,
            wallet,
            ...metadataParameters(metadata),
          }),
        )
      }
      return transactions
    },
  )

  app.get(
    '/admin/verification',
    {
      ...operator,
      schema: {
        summary: 'Check the whole ledger as `coffer verify` does',
        description: 'Recomputes every holding from the journal and checks the ledger rules; lists any problem found.',
        tags,
        response: responses(200, S.VerifyReport),
      },
    },
    async () => admin.verifyLedgerNow(),
  )
}

export default adminRoutes
