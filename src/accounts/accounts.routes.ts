import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from '@sinclair/typebox'
import type { Config } from '../config.ts'
import type { Database } from '../db/database.ts'
import { clearSessionCookie, setSessionCookie, userAuth } from '../http/auth.ts'
import type { AttemptLimiter } from '../http/rate-limit.ts'
import { Empty, IdParams, parseId, responses } from '../http/schemas.ts'
import * as S from './accounts.schemas.ts'
import * as accounts from './accounts.service.ts'
import type { SessionEndings } from './session-endings.ts'

export interface AccountsRoutesOptions {
  database: Database
  config: Config
  limiter: AttemptLimiter
  /** Told of every session these routes end, for the event streams opened with them. */
  sessionEndings: SessionEndings
}

/** Login and the `/user` routes about the user and their sessions (registration is in `flows/`). */
const accountsRoutes: FastifyPluginAsyncTypebox<AccountsRoutesOptions> = async (app, { database, config, limiter, sessionEndings }) => {
  const { db } = database
  const tags = ['accounts']

  app.post(
    '/users/:username/sessions',
    {
      schema: {
        summary: 'Log in',
        description:
          'Checks the password and opens a user session on the primary wallet. Sets the session cookie, or ' +
          'with `return_token: true` answers the token instead (`Authorization: Bearer <token>`). An ' +
          'unknown username and a wrong password get the same answer. Limited per client address and per ' +
          'username.',
        tags,
        params: S.LoginParams,
        body: S.LoginBody,
        response: responses(201, S.LoginResult),
      },
    },
    async (request, reply) => {
      await limiter.hit(`login-ip:${request.ip}`, `login-user:${request.params.username.toLowerCase()}`)
      const { session, token } = await accounts.logIn(
        db,
        config,
        request.params.username,
        request.body.password,
        request.headers['user-agent'],
      )
      if (request.body.return_token) return reply.status(201).send({ ...session, token })
      setSessionCookie(reply, config, token)
      return reply.status(201).send(session)
    },
  )

  const user = { onRequest: app.requireUser }

  app.put(
    '/user/username',
    {
      ...user,
      schema: {
        summary: 'Change your username',
        description: 'Renames the caller; the old name becomes free.',
        tags,
        body: S.UsernameBody,
        response: responses(200, S.UsernameResult),
      },
    },
    async (request) => accounts.changeUsername(db, userAuth(request), request.body.username),
  )

  app.put(
    '/user/password',
    {
      ...user,
      schema: {
        summary: 'Change your password',
        description: "Sets a new password and ends every other session of the caller's; this one stays.",
        tags,
        body: S.PasswordBody,
        response: responses(200, Empty),
      },
    },
    async (request) => {
      const auth = userAuth(request)
      await accounts.changePassword(db, auth, request.body.password)
      sessionEndings.announce({ userId: auth.userId, except: auth.sessionId })
      return {}
    },
  )

  app.get(
    '/user/session',
    {
      ...user,
      schema: {
        summary: 'The current session',
        description: 'The session, its user and its active wallet (the wallet the `/wallet` routes act on).',
        tags,
        response: responses(200, S.CurrentSession),
      },
    },
    async (request) => accounts.describeSession(db, userAuth(request)),
  )

  app.get(
    '/user/sessions',
    {
      ...user,
      schema: {
        summary: 'Your live sessions',
        description: 'Every session of the caller that has neither expired nor been idle too long, the current one ' + 'marked.',
        tags,
        response: responses(200, Type.Array(S.SessionSummary)),
      },
    },
    async (request) => accounts.listSessions(db, config, userAuth(request)),
  )

  app.delete(
    '/user/session',
    { ...user, schema: { summary: 'Log out', description: 'Ends the current session and clears its cookie.', tags } },
    async (request, reply) => {
      const auth = userAuth(request)
      await accounts.endSession(db, auth, auth.sessionId)
      sessionEndings.announce({ sessionId: auth.sessionId })
      clearSessionCookie(reply, config)
      return reply.status(204).send()
    },
  )

  app.delete(
    '/user/sessions/:sessionid',
    {
      ...user,
      schema: {
        summary: 'End one of your sessions',
        description: "Ends one session of the caller's (this one too, clearing its cookie).",
        tags,
        params: IdParams('sessionid'),
      },
    },
    async (request, reply) => {
      const auth = userAuth(request)
      const sessionId = parseId(request.params.sessionid)
      await accounts.endSession(db, auth, sessionId)
      sessionEndings.announce({ sessionId })
      if (sessionId === auth.sessionId) clearSessionCookie(reply, config)
      return reply.status(204).send()
    },
  )

  app.delete(
    '/user/sessions',
    { ...user, schema: { summary: 'Log out everywhere', description: 'Ends every session of the caller, this one included.', tags } },
    async (request, reply) => {
      const auth = userAuth(request)
      await accounts.endAllSessions(db, auth)
      sessionEndings.announce({ userId: auth.userId })
      clearSessionCookie(reply, config)
      return reply.status(204).send()
    },
  )
}

export default accountsRoutes
