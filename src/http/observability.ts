import type { FastifyBaseLogger, FastifyInstance, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import client from 'prom-client'
import type { Database } from '../db/database.ts'
import { describeStorageFault } from '../db/faults.ts'
import { VERSION } from '../version.ts'
import { AppError } from './errors.ts'
import { SECURITY_HEADERS } from './security-headers.ts'

const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5]

/** One route's requests since start: counts by status not yet handed to prom-client, and its latency histogram. */
interface RouteSeries {
  labels: { method: string; route: string }
  pendingByStatus: Map<number, number>
  /** Requests per latency bucket (not cumulative); the last counts those above every bound. */
  buckets: number[]
  sum: number
  count: number
}

/** Request counts and durations in plain numbers, handed to prom-client only when /metrics is read. */
class RequestMetrics {
  readonly #series = new Map<string, RouteSeries>()

  constructor(registry: client.Registry) {
    const series = this.#series
    // The counter takes what was added since the last reading, through its own `inc`.
    new client.Counter({
      name: 'coffer_http_requests_total',
      help: 'HTTP requests by method, route and status',
      labelNames: ['method', 'route', 'status'],
      registers: [registry],
      collect() {
        for (const { labels, pendingByStatus } of series.values()) {
          for (const [status, count] of pendingByStatus) this.inc({ ...labels, status }, count)
          pendingByStatus.clear()
        }
      },
    })
    // In prom-client's form (`Histogram#get`), which cannot take many observations at once.
    const name = 'coffer_http_request_duration_seconds'
    registry.registerMetric({
      name,
      help: 'HTTP request latency',
      type: 'histogram',
      aggregator: 'sum',
      get: async () => ({
        name,
        help: 'HTTP request latency',
        type: 'histogram',
        aggregator: 'sum',
        values: [...series.values()].flatMap(({ labels, buckets, sum, count }) => {
          let below = 0
          return [
            ...LATENCY_BUCKETS.map((le, index) => ({
              labels: { le, ...labels },
              value: (below += buckets[index]),
              metricName: `${name}_bucket`,
            })),
            { labels: { le: '+Inf', ...labels }, value: count, metricName: `${name}_bucket` },
            { labels, value: sum, metricName: `${name}_sum` },
            { labels, value: count, metricName: `${name}_count` },
          ]
        }),
      }),
      reset: () => series.clear(),
    } as unknown as client.Metric)
  }

  record(method: string, route: string, status: number, seconds: number): void {
    const key = `${method} ${route}`
    let series = this.#series.get(key)
    if (!series)
      this.#series.set(
        key,
        (series = {
          labels: { method, route },
          pendingByStatus: new Map(),
          buckets: new Array<number>(LATENCY_BUCKETS.length + 1).fill(0),
          sum: 0,
          count: 0,
        }),
      )
    series.pendingByStatus.set(status, (series.pendingByStatus.get(status) ?? 0) + 1)
    let bucket = 0
    while (bucket < LATENCY_BUCKETS.length && seconds > LATENCY_BUCKETS[bucket]) bucket++
    series.buckets[bucket]++
    series.sum += seconds
    series.count++
  }
}

/** Request ids, one log line per request and Prometheus metrics (`/metrics`). */
export default fp(async function observability(app: FastifyInstance) {
  const registry = new client.Registry()
  client.collectDefaultMetrics({ register: registry })
  const requestMetrics = new RequestMetrics(registry)
  app.decorate('metrics', registry)

  // During shutdown: 503 S001 and the connection closed, so the client retries elsewhere.
  let closing = false
  app.addHook('preClose', async () => {
    closing = true
  })

  // Callback hooks: an async one costs every request a promise.
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id).headers(SECURITY_HEADERS)
    if (!closing) return done()
    reply.header('connection', 'close')
    done(new AppError('S001', 'the service is shutting down'))
  })

  function recordRequest(request: FastifyRequest, status: number, elapsedMs: number): void {
    const route = request.routeOptions.url ?? 'unmatched'
    requestMetrics.record(request.method, route, status, elapsedMs / 1000)
    // No headers, query or body: they carry secrets. The root logger writes `request.log`'s line without making the child.
    app.log.info({ reqId: request.id, method: request.method, route, status, ms: Math.round(elapsedMs * 10) / 10 }, 'request')
  }
  app.decorate('recordRequest', recordRequest)
  app.addHook('onResponse', (request, reply, done) => {
    recordRequest(request, reply.statusCode, reply.elapsedTime)
    done()
  })
})

type Bindings = Parameters<FastifyBaseLogger['child']>[0]
type ChildOptions = NonNullable<Parameters<FastifyBaseLogger['child']>[1]>

/** `request.log` as pino's child with the request id, made only when something logs through it. */
class RequestLogger implements FastifyBaseLogger {
  #child: FastifyBaseLogger | undefined

  constructor(
    private readonly parent: FastifyBaseLogger,
    private readonly bindings: Bindings,
  ) {}

  get #log(): FastifyBaseLogger {
    return (this.#child ??= this.parent.child(this.bindings))
  }

  get level(): string {
    return this.#child?.level ?? this.parent.level
  }

  set level(level: string) {
    this.#log.level = level
  }

  /** Writes through the child, made now if it was not yet. */
  #write(level: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace', args: unknown[]): void {
    const log = this.#log
    Reflect.apply(log[level], log, args)
  }

  fatal(...args: unknown[]): void {
    this.#write('fatal', args)
  }
  error(...args: unknown[]): void {
    this.#write('error', args)
  }
  warn(...args: unknown[]): void {
    this.#write('warn', args)
  }
  info(...args: unknown[]): void {
    this.#write('info', args)
  }
  debug(...args: unknown[]): void {
    this.#write('debug', args)
  }
  trace(...args: unknown[]): void {
    this.#write('trace', args)
  }

  silent(): void {}

  child(bindings: Bindings, options?: ChildOptions): FastifyBaseLogger {
    return this.#log.child(bindings, options)
  }
}

/** Fastify's `childLoggerFactory`: the lazy `request.log` above, or pino's child at once for a route with its own log level. */
export function requestLoggerFactory(logger: FastifyBaseLogger, bindings: Bindings, options: ChildOptions): FastifyBaseLogger {
  return options.level !== undefined || options.serializers !== undefined
    ? logger.child(bindings, options)
    : new RequestLogger(logger, bindings)
}

/** Health, readiness and metrics; after the API reference, so it lists the first two. */
export async function operationsRoutes(app: FastifyInstance, { database }: { database: Database }): Promise<void> {
  const tags = ['operations']
  app.get(
    '/healthz',
    { schema: { tags, summary: 'Liveness', description: 'Answers while the process runs, with its version.' } },
    async () => ({
      status: 'ok',
      version: VERSION,
    }),
  )
  const readiness = 'Answers while the storage can take a write; S001 while it cannot (take the instance out of the balancer).'
  app.get('/readyz', { schema: { tags, summary: 'Readiness', description: readiness } }, async (request) => {
    try {
      await database.checkWritable()
    } catch (error) {
      const cause = describeStorageFault(error)
      request.log.warn({ cause: cause.code, reason: cause.message }, `not ready: ${cause.code ?? 'unknown cause'}: ${cause.message}`)
      throw new AppError('S001', 'storage cannot take writes now')
    }
    return { status: 'ready' }
  })
  // Behind a token: the figures describe the service's use, not for anyone who can reach the port.
  app.get('/metrics', { onRequest: app.requireMetricsReader, schema: { tags, hide: true } }, async (_request, reply) => {
    reply.type(app.metrics.contentType)
    return app.metrics.metrics()
  })
}

declare module 'fastify' {
  interface FastifyInstance {
    metrics: client.Registry
    /** Counts and logs a finished request; a route that takes the response over calls it itself. */
    recordRequest: (request: FastifyRequest, status: number, elapsedMs: number) => void
  }
}
