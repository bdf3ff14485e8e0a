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
 * CORS for the configured origins only, with credentials: byte for byte the headers `@fastify/cors`
 * writes with `{origin: origins, credentials: true, methods, exposedHeaders}` (test/http/plugins.test.ts
 * compares them). Our own hook because the plugin's general path ran on every request; here the
 * headers are computed once, and with no `CORS_ORIGINS` no hook runs at all.
 */
export default fp<CorsOptions>(async function cors(app: FastifyInstance, { origins, methods, exposedHeaders }) {
  // Preflights reach this route only when CORS is off (the hook below answers them otherwise):
  // they get the API's 404 like any unknown route.
  app.options('*', { schema: { hide: true } }, (_request, reply) => reply.callNotFound())
  if (origins.length === 0) return

  const allowed = new Set(origins)
  const exposed = exposedHeaders.join(', ')
  const allowedMethods = methods.join(', ')
  // Every response, Origin or not, says it varies by Origin: a cache must not hand one origin's
  // answer (with its Access-Control-Allow-Origin) to another.
  app.addHook('onRequest', (request, reply, done) => {
    const origin = request.headers.origin
    reply.header('vary', 'Origin')
    if (origin !== undefined && allowed.has(origin)) reply.header('access-control-allow-origin', origin)
    reply.header('access-control-allow-credentials', 'true')
    reply.header('access-control-expose-headers', exposed)
    if (request.method !== 'OPTIONS') return done()

    // A preflight is answered here, before any guard: the browser sends it without credentials.
    // An empty Origin or method counts as none.
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
