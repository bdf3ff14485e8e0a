import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import type { Config } from '../config.ts'
import { clearCookie, setCookie } from './cookies.ts'
import { AppError } from './errors.ts'
import { isKeyScope, type KeyLimits, type KeyScope } from './key-scopes.ts'
import type { AttemptLimiter } from './rate-limit.ts'
import { hashToken, sameHash, tokenKind } from './tokens.ts'

/** Who is calling. A user session acts on its active wallet; a wallet key on its own wallet. */
export type Auth =
  | { kind: 'user'; userId: number; sessionId: number; walletId: number; viaCookie: boolean }
  | { kind: 'wallet'; walletId: number; walletSessionId: number; scopes: readonly KeyScope[]; limits: KeyLimits | undefined }
  | { kind: 'admin' }

export type UserAuth = Extract<Auth, { kind: 'user' }>

declare module 'fastify' {
  interface FastifyRequest {
    auth: Auth | undefined
  }
  interface FastifyInstance {
    /** `onRequest` guards, before the body is read, so a caller without credentials learns nothing of a route's rules. */
    requireUser: (request: FastifyRequest) => Promise<void>
    requireWalletAccess: (request: FastifyRequest) => Promise<void>
    requireAdmin: (request: FastifyRequest) => Promise<void>
    requireAnyCaller: (request: FastifyRequest) => Promise<void>
    /** Every route guarded by `requireWalletAccess`, with the scope a wallet key needs for it. */
    walletRoutes: { method: string; url: string; scope: KeyScope }[]
    /** `/metrics`: `METRICS_TOKEN` or the admin key, as a Bearer header; anything else A003. */
    requireMetricsReader: (request: FastifyRequest) => Promise<void>
  }
}

export interface AuthOptions {
  config: Config
  /** SHA-256 of the admin key. */
  adminKeyHash: string
  /** How tokens are looked up: handed in by `buildApp` from the accounts, wallets and admin services. */
  credentials: CredentialLookups
  /** Counts wrong admin keys per client address, whatever route or header carries them. */
  limiter: AttemptLimiter
}

/** Lookups by the token's SHA-256 answering only live credentials; what is live is decided in each credential's own domain. */
export interface CredentialLookups {
  userSession(tokenHash: string): Promise<{ sessionId: number; userId: number; walletId: number } | undefined>
  walletKey(
    tokenHash: string,
  ): Promise<{ keyId: number; walletId: number; scopes: readonly KeyScope[]; limits: KeyLimits | undefined } | undefined>
  /** True for a live (not ended, not expired) operator session of the console. */
  operatorSession(tokenHash: string): Promise<boolean>
}

/** The console's operator session cookie (`POST /admin/sessions`). */
export const OPERATOR_COOKIE = 'coffer_admin'
export const OPERATOR_SESSION_HOURS = 12

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS'])

interface Credential {
  token: string
  viaCookie: boolean
  /** Sent as `Authorization: Bearer <token>`, the only form the admin key is taken in (docs/decisions.md). */
  bearer: boolean
}

function hasHeader(request: FastifyRequest): boolean {
  const header = request.headers.authorization
  return header !== undefined && header.trim() !== ''
}

function readCredential(request: FastifyRequest, cookieName: string): Credential | undefined {
  const header = request.headers.authorization
  if (header !== undefined && header.trim() !== '') {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header.trim())
    return { token: match ? match[1] : header.trim(), viaCookie: false, bearer: match !== null }
  }
  const cookie = request.cookies?.[cookieName]
  if (cookie) return { token: cookie, viaCookie: true, bearer: false }
  return undefined
}

/** The current user; only call after `requireUser`. */
export function userAuth(request: FastifyRequest): UserAuth {
  const auth = request.auth
  if (auth?.kind !== 'user') throw new AppError('A001', 'this route needs a user session')
  return auth
}

/** The limits of the wallet key making the request; undefined for a user session or a key without limits. */
export function keyLimitsOf(request: FastifyRequest): KeyLimits | undefined {
  return request.auth?.kind === 'wallet' ? request.auth.limits : undefined
}

/** The wallet the caller acts on; only call after `requireWalletAccess`. */
export function walletOf(request: FastifyRequest): number {
  const auth = request.auth
  if (auth?.kind === 'user' || auth?.kind === 'wallet') return auth.walletId
  throw new AppError('A001')
}

function ownOrigin(request: FastifyRequest): string {
  return `${request.protocol}://${request.host}`
}

/** Cookie-authenticated writes must come from our own origin or CORS_ORIGINS (A004); headers cannot be forged cross-site. */
function checkCsrf(request: FastifyRequest, config: Config): void {
  if (SAFE_METHODS.has(request.method)) return
  const origin = request.headers.origin
  if (origin !== undefined) {
    if (origin === ownOrigin(request) || config.corsOrigins.includes(origin)) return
    throw new AppError('A004', 'the request comes from another site')
  }
  if (request.headers['sec-fetch-site'] === 'cross-site') throw new AppError('A004', 'the request comes from another site')
}

/** The limiter's key for admin-key attempts, shared with `POST /admin/sessions`. */
export function adminKeyAttempts(request: FastifyRequest): string {
  return `admin-key-ip:${request.ip}`
}

export default fp<AuthOptions>(async function authPlugin(app: FastifyInstance, { config, adminKeyHash, credentials, limiter }) {
  app.decorateRequest('auth', undefined)
  const metricsTokenHash = config.metricsToken === undefined ? undefined : hashToken(config.metricsToken)

  /** A wrong admin key counts as an attempt; past the limit even the right one is refused (G005), so a guess tells nothing. */
  async function isAdminKey(request: FastifyRequest, token: string | undefined): Promise<boolean> {
    const right = token !== undefined && sameHash(hashToken(token), adminKeyHash)
    if (right) await limiter.check(adminKeyAttempts(request))
    else await limiter.hit(adminKeyAttempts(request))
    return right
  }

  async function userFromToken(token: string, viaCookie: boolean): Promise<Auth | undefined> {
    const session = await credentials.userSession(hashToken(token))
    return session && { kind: 'user', ...session, viaCookie }
  }

  async function walletFromToken(token: string): Promise<Auth | undefined> {
    const key = await credentials.walletKey(hashToken(token))
    return key && { kind: 'wallet', walletId: key.walletId, walletSessionId: key.keyId, scopes: key.scopes, limits: key.limits }
  }

  /** A live operator session cookie; its writes must pass the CSRF guard (A004). */
  async function hasOperatorSession(request: FastifyRequest): Promise<boolean> {
    const token = request.cookies?.[OPERATOR_COOKIE]
    if (!token || tokenKind(token) !== 'operator') return false
    if (!(await credentials.operatorSession(hashToken(token)))) return false
    checkCsrf(request, config)
    return true
  }

  /** Resolves the caller from the request's credential; throws A000 / A001 when there is none or it is bad. */
  async function authenticate(request: FastifyRequest, accept: Set<Auth['kind']>): Promise<Auth> {
    // The console's operator cookie counts where the admin may call, unless a header says otherwise.
    if (accept.has('admin') && !hasHeader(request) && (await hasOperatorSession(request))) {
      request.auth = { kind: 'admin' }
      return request.auth
    }
    const credential = readCredential(request, config.sessionCookieName)
    if (!credential) throw new AppError('A000')
    const kind = tokenKind(credential.token)
    // ADMIN_API_KEY may be any secret, so it is compared first; an unknown token kind counts as a guess.
    if (accept.has('admin') && credential.bearer && (kind === undefined || sameHash(hashToken(credential.token), adminKeyHash))) {
      if (await isAdminKey(request, credential.token)) {
        request.auth = { kind: 'admin' }
        return request.auth
      }
    }
    if (kind === undefined) throw new AppError('A001', 'the token is malformed')
    if (kind === 'operator') throw new AppError('A001', 'an operator session is only taken as its cookie')
    if (!accept.has(kind)) throw new AppError('A001', `a ${kind} token cannot be used on this route`)
    if (kind === 'wallet' && credential.viaCookie) throw new AppError('A001', 'wallet keys go in the Authorization header')
    let auth: Auth | undefined
    // An admin key that got here is wrong (or not a Bearer header): it counts as an attempt.
    if (kind === 'admin') await limiter.hit(adminKeyAttempts(request))
    else if (kind === 'user') auth = await userFromToken(credential.token, credential.viaCookie)
    else auth = await walletFromToken(credential.token)
    if (!auth) throw new AppError('A001', 'the session is unknown, revoked or expired')
    if (auth.kind === 'user' && auth.viaCookie) checkCsrf(request, config)
    request.auth = auth
    return auth
  }

  const USER = new Set<Auth['kind']>(['user'])
  const WALLET = new Set<Auth['kind']>(['user', 'wallet'])
  const ANY = new Set<Auth['kind']>(['user', 'wallet', 'admin'])

  app.decorate('requireUser', async (request: FastifyRequest) => {
    await authenticate(request, USER)
  })
  // A wallet key may only do what its scopes allow: the route's declared scope (key-scopes.ts).
  const requireWalletAccess = async (request: FastifyRequest) => {
    const auth = await authenticate(request, WALLET)
    const scope = request.routeOptions.config.scope
    if (auth.kind === 'wallet' && (scope === undefined || !auth.scopes.includes(scope)))
      throw new AppError('K000', `this key's scopes do not include ${scope ?? 'this route'}`)
  }
  app.decorate('requireWalletAccess', requireWalletAccess)
  // A wallet-auth route must declare its scope: one that does not cannot be registered.
  const walletRoutes: { method: string; url: string; scope: KeyScope }[] = []
  app.decorate('walletRoutes', walletRoutes)
  app.addHook('onRoute', (route) => {
    const guards = [route.onRequest ?? []].flat()
    if (guards.includes(requireAnyCaller) && route.config?.scope !== undefined)
      for (const method of [route.method].flat())
        if (method !== 'HEAD') walletRoutes.push({ method, url: route.url, scope: route.config.scope })
    if (!guards.includes(requireWalletAccess)) return
    const scope = route.config?.scope
    if (scope === undefined || !isKeyScope(scope)) throw new Error(`${String(route.method)} ${route.url} needs a key scope in its config`)
    for (const method of [route.method].flat()) if (method !== 'HEAD') walletRoutes.push({ method, url: route.url, scope })
  })
  // Routes open to every kind of caller: a wallet key needs the scope the route declares, if any (the journal's reads).
  const requireAnyCaller = async (request: FastifyRequest) => {
    const auth = await authenticate(request, ANY)
    const scope = request.routeOptions.config.scope
    if (auth.kind === 'wallet' && scope !== undefined && !auth.scopes.includes(scope))
      throw new AppError('K000', `this key's scopes do not include ${scope}`)
  }
  app.decorate('requireAnyCaller', requireAnyCaller)
  // The admin key as a Bearer header, or else the console's operator session cookie.
  app.decorate('requireAdmin', async (request: FastifyRequest) => {
    if (hasHeader(request)) {
      const credential = readCredential(request, config.sessionCookieName)
      if (!(await isAdminKey(request, credential?.bearer ? credential.token : undefined))) throw new AppError('A003')
    } else if (!(await hasOperatorSession(request))) {
      throw new AppError('A003', request.cookies?.[OPERATOR_COOKIE] ? 'the operator session has ended or expired' : undefined)
    }
    request.auth = { kind: 'admin' }
  })
  // Scrapers hold METRICS_TOKEN rather than the admin key; a wrong token counts like a wrong admin key.
  app.decorate('requireMetricsReader', async (request: FastifyRequest) => {
    const credential = hasHeader(request) ? readCredential(request, config.sessionCookieName) : undefined
    if (!credential) throw new AppError('A003', 'send METRICS_TOKEN or the admin key as a Bearer header')
    const token = credential.bearer ? credential.token : undefined
    if (metricsTokenHash !== undefined && token !== undefined && sameHash(hashToken(token), metricsTokenHash)) {
      await limiter.check(adminKeyAttempts(request))
      return
    }
    if (!(await isAdminKey(request, token))) throw new AppError('A003')
  })
})

/** Sets the session cookie: HttpOnly, SameSite=Lax, Secure with COOKIE_SECURE, for the session's lifetime. */
export function setSessionCookie(reply: FastifyReply, config: Config, token: string): void {
  setCookie(reply, config.sessionCookieName, token, {
    httpOnly: true,
    sameSite: 'lax',
    path: '/',
    secure: config.cookieSecure,
    maxAge: config.sessionLifetimeDays * 86_400,
  })
}

export function clearSessionCookie(reply: FastifyReply, config: Config): void {
  clearCookie(reply, config.sessionCookieName, { httpOnly: true, sameSite: 'lax', path: '/', secure: config.cookieSecure })
}

/** Sets the operator session cookie: HttpOnly, SameSite=Strict, 12 hours, never extended. */
export function setOperatorCookie(reply: FastifyReply, config: Config, token: string): void {
  setCookie(reply, OPERATOR_COOKIE, token, {
    httpOnly: true,
    sameSite: 'strict',
    path: '/',
    secure: config.cookieSecure,
    maxAge: OPERATOR_SESSION_HOURS * 3600,
  })
}

export function clearOperatorCookie(reply: FastifyReply, config: Config): void {
  clearCookie(reply, OPERATOR_COOKIE, { httpOnly: true, sameSite: 'strict', path: '/', secure: config.cookieSecure })
}
