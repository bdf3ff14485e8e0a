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

/**
 * Cookies with `@fastify/cookie`'s parser and serializer, without its hooks. `request.cookies`
 * parses the `Cookie` header the first time a route reads it (only the guards do, and only for a
 * request without an `Authorization` header); a cookie is set with `setCookie` / `clearCookie`
 * below, which write the `Set-Cookie` value the plugin wrote, byte for byte
 * (test/http/plugins.test.ts). Registered as a plugin, `@fastify/cookie` parsed the header (or made an
 * empty object and a map) in an `onRequest` hook and looked for cookies to write in an `onSend`
 * hook on every request: two hook steps of every response (0.1-0.2 µs of their own in CPU
 * profiles under HTTP load, besides the hook runner's turns), most of which carry no cookie.
 * (Set here in the handler, `Set-Cookie` comes before `Content-Type` among the headers rather
 * than after it; the order of different header fields means nothing in HTTP.)
 */
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
