import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from '@sinclair/typebox'
import type { Deps } from '../deps.ts'
import { userAuth } from '../http/auth.ts'
import { IdParams, parseId, responses } from '../http/schemas.ts'
import * as S from './wallets.schemas.ts'
import * as wallets from './wallets.service.ts'

/**
 * The user-auth `/wallet` routes: assigned users, ownership, wallet keys and deletion. Each acts
 * on the session's active wallet. The wallet-auth routes (assets, transactions) are in ledger/.
 */
const walletsRoutes: FastifyPluginAsyncTypebox<Deps> = async (app, { database }) => {
  const { db } = database
  const tags = ['wallet']
  const user = { onRequest: app.requireUser }

  app.post('/wallet/users', { ...user, schema: { tags, body: S.AssignUserBody, response: responses(201, S.AssignedUser) } }, async (request, reply) => {
    const assigned = await wallets.assignUser(db, userAuth(request), request.body.username)
    return reply.status(201).send(assigned)
  })

  app.get('/wallet/users', { ...user, schema: { tags, response: responses(200, Type.Array(S.AssignedUser)) } }, async (request) =>
    wallets.listAssignedUsers(db, userAuth(request)),
  )

  app.delete('/wallet/users/:userid', { ...user, schema: { tags, params: IdParams('userid'), response: S.NoContent } }, async (request, reply) => {
    await wallets.removeUser(db, userAuth(request), parseId(request.params.userid))
    return reply.status(204).send(null)
  })

  app.put('/wallet/owner', { ...user, schema: { tags, body: S.OwnerBody, response: responses(200, S.Wallet) } }, async (request) =>
    wallets.transferOwnership(db, userAuth(request), request.body.user_id),
  )

  app.post(
    '/wallet/sessions',
    { ...user, schema: { tags, body: Type.Optional(S.NewWalletSessionBody), response: responses(201, S.NewWalletSession) } },
    async (request, reply) => {
      const key = await wallets.createWalletSession(db, userAuth(request), request.body?.name ?? '')
      return reply.status(201).send(key)
    },
  )

  app.get('/wallet/sessions', { ...user, schema: { tags, response: responses(200, Type.Array(S.WalletSession)) } }, async (request) =>
    wallets.listWalletSessions(db, userAuth(request)),
  )

  app.delete('/wallet/sessions/:sessionid', { ...user, schema: { tags, params: IdParams('sessionid'), response: S.NoContent } }, async (request, reply) => {
    await wallets.revokeWalletSession(db, userAuth(request), parseId(request.params.sessionid))
    return reply.status(204).send(null)
  })

  app.delete('/wallet/sessions', { ...user, schema: { tags, response: S.NoContent } }, async (request, reply) => {
    await wallets.revokeWalletSessions(db, userAuth(request))
    return reply.status(204).send(null)
  })

  app.delete('/wallet', { ...user, schema: { tags, response: S.NoContent } }, async (request, reply) => {
    await wallets.deleteWallet(db, userAuth(request))
    return reply.status(204).send(null)
  })
}

export default walletsRoutes
