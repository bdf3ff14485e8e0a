import type { FastifyInstance, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import client from 'prom-client'
import type { Database } from '../db/database.ts'
import { describeStorageFault } from '../db/faults.ts'
import { VERSION } from '../version.ts'
import { AppError } from './errors.ts'

/** Request ids, one log line per request and Prometheus metrics (`/metrics`). */
export default fp(async function observability(app: FastifyInstance) {
  const registry = new client.Registry()
  client.collectDefaultMetrics({ register: registry })
  const requests = new client.Counter({
    name: 'coffer_http_requests_total',
    help: 'HTTP requests by method, route and status',
    labelNames: ['method', 'route', 'status'],
    registers: [registry],
  })
  const latency = new client.Histogram({
    name: 'coffer_http_request_duration_seconds',
    help: 'HTTP request latency',
    labelNames: ['method', 'route'],
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [registry],
  })
  app.decorate('metrics', registry)

  // Requests that reach us on a kept-alive connection during shutdown get 503 S001 and the
  // connection is closed, so the client retries elsewhere.
  let closing = false
  app.addHook('preClose', async () => {
    closing = true
  })

  // The per-request hooks here take a callback rather than returning a promise: every request
  // runs them, and an async hook costs a promise and a turn of the microtask queue each.
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id)
    if (!closing) return done()
    reply.header('connection', 'close')
    done(new AppError('S001', 'the service is shutting down'))
  })

  function recordRequest(request: FastifyRequest, status: number, elapsedMs: number): void {
    const route = request.routeOptions.url ?? 'unmatched'
    requests.inc({ method: request.method, route, status })
    latency.observe({ method: request.method, route }, elapsedMs / 1000)
    // Deliberately no headers, query or body: they carry tokens and passwords.
    request.log.info({ method: request.method, route, status, ms: Math.round(elapsedMs * 10) / 10 }, 'request')
  }
  app.decorate('recordRequest', recordRequest)
  app.addHook('onResponse', (request, reply, done) => {
    recordRequest(request, reply.statusCode, reply.elapsedTime)
    done()
  })
})

/**
 * The operations routes: health, readiness, metrics. Registered after the API reference, so that
 * `/openapi.json` lists the first two.
 */
export async function operationsRoutes(app: FastifyInstance, { database }: { database: Database }): Promise<void> {
  const ops = { schema: { tags: ['operations'] } }
  app.get('/healthz', ops, async () => ({ status: 'ok', version: VERSION }))
  // Ready while the storage can take a write: not while PostgreSQL is unreachable or read-only
  // (a standby, the old primary after a failover), nor while SQLite's disk is full or read-only.
  app.get('/readyz', ops, async (request) => {
    try {
      await database.checkWritable()
    } catch (error) {
      const cause = describeStorageFault(error)
      request.log.warn({ cause: cause.code, reason: cause.message }, `not ready: ${cause.code ?? 'unknown cause'}: ${cause.message}`)
      throw new AppError('S001', 'storage cannot take writes now')
    }
    return { status: 'ready' }
  })
  app.get('/metrics', { ...ops, schema: { ...ops.schema, hide: true } }, async (_request, reply) => {
    reply.type(app.metrics.contentType)
    return app.metrics.metrics()
  })
}

declare module 'fastify' {
  interface FastifyInstance {
    metrics: client.Registry
    /**
     * Counts and logs a finished request. Called for every response; a route that takes the
     * response over (the event stream) calls it itself when its client goes away first.
     */
    recordRequest: (request: FastifyRequest, status: number, elapsedMs: number) => void
  }
}
