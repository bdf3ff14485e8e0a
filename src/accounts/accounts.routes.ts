import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { Deps } from '../deps.ts'
import { clearSessionCookie, setSessionCookie, userAuth } from '../http/auth.ts'
import { RateLimiter } from '../http/rate-limit.ts'
import { Empty, IdParams, parseId, responses } from '../http/schemas.ts'
import { Type } from '@sinclair/typebox'
import * as wallets from '../wallets/wallets.service.ts'
import * as S from './accounts.schemas.ts'
import * as accounts from './accounts.service.ts'

/** Registration, login (contract §3) and every `/user` route of the interface (§7). */
const accountsRoutes: FastifyPluginAsyncTypebox<Deps> = async (app, { database, config }) => {
  const { db } = database
  const limiter = new RateLimiter(config.authRateLimit)
  const tags = ['accounts']

  app.post('/users', { schema: { tags, body: S.RegisterBody, response: responses(201, S.RegisteredUser) } }, async (request, reply) => {
    limiter.hit(`register-ip:${request.ip}`, `register-user:${request.body.username.toLowerCase()}`)
    const user = await accounts.registerUser(db, request.body.username, request.body.password)
    return reply.status(201).send(user)
  })

  app.post(
    '/users/:username/sessions',
    { schema: { tags, params: S.LoginParams, body: S.LoginBody, response: responses(201, S.LoginResult) } },
    async (request, reply) => {
      limiter.hit(`login-ip:${request.ip}`, `login-user:${request.params.username.toLowerCase()}`)
      const { session, token } = await accounts.logIn(db, config, request.params.username, request.body.password)
      if (request.body.return_token) return reply.status(201).send({ ...session, token })
      setSessionCookie(reply, config, token)
      return reply.status(201).send(session)
    },
  )

  const user = { onRequest: app.requireUser }

  app.put('/user/username', { ...user, schema: { tags, body: S.UsernameBody, response: responses(200, S.UsernameResult) } }, async (request) =>
    accounts.changeUsername(db, userAuth(request), request.body.username),
  )

  app.put('/user/password', { ...user, schema: { tags, body: S.PasswordBody, response: responses(200, Empty) } }, async (request) => {
    await accounts.changePassword(db, userAuth(request), request.body.password)
    return {}
  })

  app.put('/user/wallet', { ...user, schema: { tags, body: S.WalletIdBody, response: responses(200, S.PrimaryWalletResult) } }, async (request) =>
    accounts.setPrimaryWallet(db, userAuth(request), request.body.wallet_id),
  )

  app.get('/user/wallets', { ...user, schema: { tags, response: responses(200, Type.Array(S.OwnedWallet)) } }, async (request) =>
    wallets.listOwnedWallets(db, userAuth(request).userId),
  )

  app.get('/user/assigned_wallets', { ...user, schema: { tags, response: responses(200, Type.Array(S.WalletSummary)) } }, async (request) =>
    wallets.listAssignedWallets(db, userAuth(request).userId),
  )

  app.post('/user/wallets', { ...user, schema: { tags, body: S.NewWalletBody, response: responses(201, S.WalletSummary) } }, async (request, reply) => {
    const wallet = await wallets.createWallet(db, userAuth(request).userId, request.body.address)
    return reply.status(201).send(wallet)
  })

  app.put('/user/session/wallet', { ...user, schema: { tags, body: S.WalletIdBody, response: responses(200, S.CurrentSession) } }, async (request) =>
    accounts.setActiveWallet(db, userAuth(request), request.body.wallet_id),
  )

  app.get('/user/session', { ...user, schema: { tags, response: responses(200, S.CurrentSession) } }, async (request) =>
    accounts.describeSession(db, userAuth(request)),
  )

  app.get('/user/sessions', { ...user, schema: { tags, response: responses(200, Type.Array(S.SessionSummary)) } }, async (request) =>
    accounts.listSessions(db, config, userAuth(request)),
  )

  app.delete('/user/session', { ...user, schema: { tags } }, async (request, reply) => {
    const auth = userAuth(request)
    await accounts.endSession(db, auth, auth.sessionId)
    clearSessionCookie(reply, config)
    return reply.status(204).send()
  })

  app.delete('/user/sessions/:sessionid', { ...user, schema: { tags, params: IdParams('sessionid') } }, async (request, reply) => {
    const auth = userAuth(request)
    const sessionId = parseId(request.params.sessionid)
    await accounts.endSession(db, auth, sessionId)
    if (sessionId === auth.sessionId) clearSessionCookie(reply, config)
    return reply.status(204).send()
  })

  app.delete('/user/sessions', { ...user, schema: { tags } }, async (request, reply) => {
    await accounts.endAllSessions(db, userAuth(request))
    clearSessionCookie(reply, config)
    return reply.status(204).send()
  })
}

export default accountsRoutes
