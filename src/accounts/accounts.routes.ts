import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from '@sinclair/typebox'
import type { Config } from '../config.ts'
import type { Database } from '../db/database.ts'
import { clearSessionCookie, setSessionCookie, userAuth } from '../http/auth.ts'
import type { AttemptLimiter } from '../http/rate-limit.ts'
import { Empty, IdParams, parseId, responses } from '../http/schemas.ts'
import * as S from './accounts.schemas.ts'
import * as accounts from './accounts.service.ts'

export interface AccountsRoutesOptions {
  database: Database
  config: Config
  limiter: AttemptLimiter
}

/**
 * Login and the `/user` routes about the user and their sessions. (Registration is in
 * `flows/flows.routes.ts`; the `/user` routes about wallets in `wallets/wallets.routes.ts`.)
 */
const accountsRoutes: FastifyPluginAsyncTypebox<AccountsRoutesOptions> = async (app, { database, config, limiter }) => {
  const { db } = database
  const tags = ['accounts']

  app.post(
    '/users/:username/sessions',
    { schema: { tags, params: S.LoginParams, body: S.LoginBody, response: responses(201, S.LoginResult) } },
    async (request, reply) => {
      await limiter.hit(`login-ip:${request.ip}`, `login-user:${request.params.username.toLowerCase()}`)
      const { session, token } = await accounts.logIn(db, config, request.params.username, request.body.password)
      if (request.body.return_token) return reply.status(201).send({ ...session, token })
      setSessionCookie(reply, config, token)
      return reply.status(201).send(session)
    },
  )

  const user = { onRequest: app.requireUser }

  app.put(
    '/user/username',
    { ...user, schema: { tags, body: S.UsernameBody, response: responses(200, S.UsernameResult) } },
    async (request) => accounts.changeUsername(db, userAuth(request), request.body.username),
  )

  app.put('/user/password', { ...user, schema: { tags, body: S.PasswordBody, response: responses(200, Empty) } }, async (request) => {
    await accounts.changePassword(db, userAuth(request), request.body.password)
    return {}
  })

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
