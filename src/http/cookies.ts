import { fastifyCookie } from '@fastify/cookie'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'

type CookieOptions = NonNullable<Parameters<typeof fastifyCookie.serialize>[2]>

const PARSED = Symbol('coffer.cookies')

declare module 'fastify' {
  interface FastifyRequest {
    [PARSED]: Record<string, string | undefined> | null
  }
}

/** `@fastify/cookie`'s parser and serializer without its hooks on every request: cookies are parsed when first read. */
export default fp(async function cookies(app: FastifyInstance) {
  app.decorateRequest(PARSED, null)
  app.decorateRequest('cookies', {
    getter(this: FastifyRequest) {
      const header = this.headers.cookie
      return (this[PARSED] ??= header ? fastifyCookie.parse(header) : {})
    },
  })
})

/** Sets a cookie on the response (`SameSite=Lax` unless the options say otherwise). */
export function setCookie(reply: FastifyReply, name: string, value: string, options: CookieOptions): void {
  reply.header('set-cookie', fastifyCookie.serialize(name, value, { sameSite: 'lax', ...options }))
}

/** Tells the browser to drop a cookie: empty, expired, with the attributes it was set with. */
export function clearCookie(reply: FastifyReply, name: string, options: CookieOptions): void {
  setCookie(reply, name, '', { path: '/', ...options, expires: new Date(0), maxAge: 0 })
}
