import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { RegisterBody, RegisteredUser } from '../accounts/accounts.schemas.ts'
import type { Database } from '../db/database.ts'
import { userAuth } from '../http/auth.ts'
import type { AttemptLimiter } from '../http/rate-limit.ts'
import { responses } from '../http/schemas.ts'
import type { Ledger } from '../ledger/ledger.service.ts'
import { NoContent } from '../wallets/wallets.schemas.ts'
import { registerUser } from './registration.ts'
import { deleteWallet } from './wallet-deletion.ts'

export interface FlowsRoutesOptions {
  database: Database
  ledger: Ledger
  limiter: AttemptLimiter
}

/** The routes whose work spans domains: registration (accounts and wallets) and wallet deletion (wallets, ledger, events). */
const flowsRoutes: FastifyPluginAsyncTypebox<FlowsRoutesOptions> = async (app, { database, ledger, limiter }) => {
  const { db } = database

  app.post(
    '/users',
    {
      schema: {
        summary: 'Register a user',
        description:
          'Creates the user and their primary wallet (a random address) in one step. Usernames are 2-32 ' +
          'letters or digits, unique case-insensitively; passwords 8-32 characters. Limited per client ' +
          'address and per username.',
        tags: ['accounts'],
        body: RegisterBody,
        response: responses(201, RegisteredUser),
      },
    },
    async (request, reply) => {
      await limiter.hit(`register-ip:${request.ip}`, `register-user:${request.body.username.toLowerCase()}`)
      const user = await registerUser(db, request.body.username, request.body.password)
      return reply.status(201).send(user)
    },
  )

  app.delete(
    '/wallet',
    {
      onRequest: app.requireUser,
      schema: {
        summary: 'Delete the wallet',
        description:
          'Deletes the active wallet: its pending holds, sent and received, are voided; then what it holds ' +
          "moves to the caller's primary wallet as one transaction (memo `wallet deleted`); its keys, " +
          'webhook and assignments go. Its address stays taken and its history keeps naming it. Owner only; ' +
          'not the primary wallet.',
        tags: ['wallet'],
        response: NoContent,
      },
    },
    async (request, reply) => {
      await deleteWallet(db, ledger, userAuth(request))
      return reply.status(204).send(null)
    },
  )
}

export default flowsRoutes
