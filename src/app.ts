import crypto from 'node:crypto'
import swagger from '@fastify/swagger'
import swaggerUi from '@fastify/swagger-ui'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import Fastify, { LogController, type FastifyInstance, type FastifyReply } from 'fastify'
import accountsRoutes from './accounts/accounts.routes.ts'
import { authenticateUserSession, keptUserSessions } from './accounts/accounts.service.ts'
import { SessionEndings } from './accounts/session-endings.ts'
import adminRoutes from './admin/admin.routes.ts'
import { createAdminService } from './admin/admin.service.ts'
import type { AppOptions, Deps } from './deps.ts'
import events from './events/events.plugin.ts'
import { createOutbox } from './events/outbox.ts'
import { createWebhooksService } from './events/webhooks.service.ts'
import flowsRoutes from './flows/flows.routes.ts'
import { afterArrivals } from './http/arrivals.ts'
import auth from './http/auth.ts'
import compression from './http/compression.ts'
import consolePlugin from './http/console.ts'
import cookies from './http/cookies.ts'
import cors from './http/cors.ts'
import { answerClientError, answerRouterError, registerErrorHandler, schemaError } from './http/error-handler.ts'
import observability, { operationsRoutes, requestLoggerFactory } from './http/observability.ts'
import { registerParsing } from './http/parsing.ts'
import { createAttemptLimiter } from './http/rate-limit.ts'
import { OperatorMetrics, registerOperatorMetrics } from './operations/metrics.ts'
import retention from './operations/retention.plugin.ts'
import assetsRoutes from './ledger/assets.routes.ts'
import holdExpiry from './ledger/hold-expiry.plugin.ts'
import holdsRoutes from './ledger/holds.routes.ts'
import { createLedger } from './ledger/ledger.service.ts'
import transactionsRoutes from './ledger/transactions.routes.ts'
import journalRoutes from './journal/journal.routes.ts'
import { JournalSequencer } from './journal/sequencer.ts'
import { resolveSigningKey } from './secrets/signing-key.ts'
import monitors from './monitors/monitors.plugin.ts'
import { watchBalances } from './monitors/monitors.service.ts'
import { documentRoutes } from './routes.ts'
import schedules from './schedules/schedules.plugin.ts'
import { traceBatches, traceFields, traceRequests, traceStatements } from './telemetry/tracing.ts'
import { VERSION } from './version.ts'
import walletsRoutes from './wallets/wallets.routes.ts'
import { createWalletKeysService } from './wallets/wallets.service.ts'

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/
/** Builds the HTTP app. Order matters: parsing and errors, observability, security, then routes. */
export async function buildApp(options: AppOptions): Promise<FastifyInstance> {
  const { config, tracing } = options
  const app = Fastify({
    logger: {
      level: config.logLevel,
      redact: ['req.headers.authorization', 'req.headers.cookie'],
      ...(options.logStream ? { stream: options.logStream } : {}),
      // With traces on, every line written inside a span names it (the request's line included).
      ...(tracing ? { mixin: traceFields } : {}),
    },
    // observability.ts writes one line per request instead of Fastify's two.
    logController: new LogController({ disableRequestLogging: true }),
    // `request.log` is made only when something logs through it (observability.ts).
    childLoggerFactory: requestLoggerFactory,
    bodyLimit: config.bodyLimitBytes,
    // Path segments up to 512 characters reach their route: a login with any username that long
    // answers U001 like every unknown name; longer ones are malformed URLs (G001).
    routerOptions: { maxParamLength: 512 },
    trustProxy: config.trustProxy,
    requestIdHeader: false,
    genReqId: (request) => {
      const given = request.headers['x-request-id']
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : crypto.randomUUID()
    },
    // Slow clients get a bounded time to send their request. Node checks for overdue ones every
    // connectionsCheckingInterval (30 s by default, too coarse for a 30 s limit), and swaps the two
    // limits when headersTimeout (60 s by default) exceeds requestTimeout, so both are set here.
    requestTimeout: config.requestTimeoutMs,
    http: {
      headersTimeout: Math.min(60_000, config.requestTimeoutMs),
      connectionsCheckingInterval: Math.max(50, Math.min(5_000, Math.floor(config.requestTimeoutMs / 10))),
    },
    connectionTimeout: 60_000,
    // observability.ts answers requests that arrive while closing with S001 in the error layout.
    return503OnClosing: false,
    // Requests Node's HTTP parser refuses never reach a route; they get the error layout too.
    clientErrorHandler: answerClientError,
    // Malformed percent-encoding and path parameters over 512 characters are refused by the router
    // before any hook runs; they still get the error layout and a request id.
    frameworkErrors: (error, request, reply) => answerRouterError(error, request, reply as FastifyReply),
    // A failed schema check makes its error without a stack trace (error-handler.ts).
    schemaErrorFormatter: schemaError,
  }).withTypeProvider<TypeBoxTypeProvider>()

  // With traces on: a span per request (its hooks first, so they cover every other) and per
  // statement (the database seen through a Kysely plugin).
  let database = options.database
  if (tracing) {
    traceRequests(app, tracing)
    const system = database.dialect === 'postgres' ? 'postgresql' : 'sqlite'
    database = { ...database, db: database.db.withPlugin(traceStatements(tracing, system)) }
  }

  // 0. The long-lived parts: the ledger (with its group committer, handed the outbox to record
  // events), closed after the server has stopped taking requests.
  // The journal's sequencer positions what commits, off the request path: handed each batch of
  // transfers committed here, and polling for the rest.
  const metrics = new OperatorMetrics()
  const signingKey = resolveSigningKey(config.signingKey, config.dataDir)
  const sequencer = new JournalSequencer({
    database: options.database,
    key: signingKey,
    checkpointIntervalMs: config.checkpointIntervalMs,
    onProgress: (positioned, size) => app.log.info({ positioned, size }, 'journal: positioning a backlog'),
    onError: (error) => app.log.error({ err: error }, 'journal: a sequencer round failed'),
  })
  // The outbox, with the hook of balance monitors, which decide crossings in each move's transaction.
  const created = createOutbox()
  const outbox = { ...created, watchBalances: watchBalances(created) }
  const ledger = createLedger({
    database,
    events: outbox,
    maxBatch: config.groupCommitMaxBatch,
    onBatch: (size) => metrics.observeBatch(size),
    onCommit: (transactions) => sequencer.committed(transactions),
    tracing: tracing && traceBatches(tracing),
    idempotencyLeaseMs: config.idempotencyLeaseMs,
    clock: options.clock,
    afterIo: afterArrivals(app.server),
  })
  const deps: Deps = {
    ...options,
    database,
    ledger,
    sequencer,
    signingKey,
    webhooks: createWebhooksService({ db: database.db, config, secretsKey: options.secretsKey }),
    limiter: createAttemptLimiter(config.authRateLimit, database),
    sessionEndings: new SessionEndings(),
  }
  // The operator's sessions (the auth guards) and read views.
  const admin = createAdminService({ db: database.db, adminKeyHash: options.adminKeyHash, history: ledger.history, clock: ledger.clock })
  app.addHook('onReady', async () => sequencer.start())
  app.addHook('onClose', async () => {
    await ledger.close()
    await sequencer.stop()
  })

  // Every API route gets its error responses from the route index (src/routes.ts).
  documentRoutes(app)

  // 1. Parsing and validation (bodies never coerced), then the one error handler.
  registerParsing(app)
  registerErrorHandler(app)

  // 2. Request ids, logs, metrics.
  await app.register(observability)
  await registerOperatorMetrics(app, { metrics, database, webhooks: deps.webhooks, clock: ledger.clock })
  // Large answers compressed for clients that accept it.
  await app.register(compression)

  // 3. Browser security: cookies, CORS for the configured origins only, then the auth guards (with CSRF).
  await app.register(cookies)
  await app.register(cors, {
    origins: config.corsOrigins,
    methods: ['GET', 'POST', 'PUT', 'DELETE'],
    exposedHeaders: ['X-Request-Id', 'Link', 'Idempotent-Replayed', 'Retry-After'],
  })
  const { db } = deps.database
  // Credential rows kept while nothing has been committed since they were read (db/commit-state.ts).
  const sessions = keptUserSessions()
  const walletKeys = createWalletKeysService({ db })
  await app.register(auth, {
    config,
    adminKeyHash: deps.adminKeyHash,
    limiter: deps.limiter,
    credentials: {
      userSession: (hash) => authenticateUserSession(db, config, hash, sessions),
      walletKey: (hash) => walletKeys.authenticate(hash),
      operatorSession: (hash) => admin.isLiveOperatorSession(hash),
    },
  })

  // 4. API reference generated from the route schemas.
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: { title: 'Coffer', version: VERSION, description: 'Multi-asset wallet and account service' },
      components: {
        securitySchemes: {
          bearer: { type: 'http', scheme: 'bearer', description: 'user session token, wallet key or admin key' },
          cookie: { type: 'apiKey', in: 'cookie', name: config.sessionCookieName },
        },
      },
    },
  })
  await app.register(swaggerUi, { routePrefix: '/docs' })
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger())

  // 5. Health, readiness and metrics; then the domains.
  await app.register(operationsRoutes, { database: deps.database })
  await app.register(accountsRoutes, deps)
  await app.register(flowsRoutes, deps)
  await app.register(transactionsRoutes, deps)
  await app.register(holdsRoutes, deps)
  await app.register(assetsRoutes, deps)
  await app.register(walletsRoutes, { ...deps, assets: () => ledger.assets.listAssets() })
  // Webhook routes, the event stream, and the delivery worker (started on ready, stopped on close).
  await app.register(events, deps)
  // The operator's sessions and read routes; then the web console at /console/ (and / leading there).
  await app.register(adminRoutes, { ...deps, admin })
  await app.register(consolePlugin)
  // Background pruning of operational records (never the journal), started on ready, stopped on close.
  await app.register(retention, deps)
  // Background writing of holds' expiry and their hold.expired events (reads never wait for it).
  await app.register(holdExpiry, deps)
  // The journal: the operator's feed, checkpoints and proofs (the sequencer runs from ready to close).
  await app.register(journalRoutes, deps)
  // Balance monitors' routes.
  await app.register(monitors, deps)
  // Scheduled transfers: their routes, and the runner of due occurrences (started on ready, stopped on close).
  await app.register(schedules, { ...deps, events: outbox, walletKeys })

  await app.ready()
  return app
}
