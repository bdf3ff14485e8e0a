import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'

export interface CorsOptions {
  /** The exact origins (scheme, host and port) whose pages may read the API with the user's cookie; none: no CORS at all. */
  origins: string[]
  methods: string[]
  /** Response headers a page on an allowed origin may read. */
  exposedHeaders: string[]
}

/**
 * CORS for the configured origins, with credentials: `@fastify/cors`'s headers byte for byte, computed
 * once, and no hook at all without `CORS_ORIGINS`.
 */
export default fp<CorsOptions>(async function cors(app: FastifyInstance, { origins, methods, exposedHeaders }) {
  // Reached only when CORS is off: a preflight gets the API's 404.
  app.options('*', { schema: { hide: true } }, (_request, reply) => reply.callNotFound())
  if (origins.length === 0) return

  const allowed = new Set(origins)
  const exposed = exposedHeaders.join(', ')
  const allowedMethods = methods.join(', ')
  // Every response varies by Origin, so a cache never hands one origin's answer to another.
  app.addHook('onRequest', (request, reply, done) => {
    const origin = request.headers.origin
    reply.header('vary', 'Origin')
    if (origin !== undefined && allowed.has(origin)) reply.header('access-control-allow-origin', origin)
    reply.header('access-control-allow-credentials', 'true')
    reply.header('access-control-expose-headers', exposed)
    if (request.method !== 'OPTIONS') return done()

    // Preflights come without credentials, so they are answered before any guard.
    if (!origin || !request.headers['access-control-request-method']) {
      reply.status(400).type('text/plain').send('Invalid Preflight Request')
      return
    }
    reply.header('access-control-allow-methods', allowedMethods)
    reply.header('vary', 'Origin, Access-Control-Request-Headers')
    const requested = request.headers['access-control-request-headers']
    if (requested !== undefined) reply.header('access-control-allow-headers', requested)
    reply.code(204).header('content-length', '0').send()
  })
})
