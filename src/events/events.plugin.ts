import type { FastifyInstance } from 'fastify'
import type { SessionEndings } from '../accounts/session-endings.ts'
import type { Config } from '../config.ts'
import type { Database } from '../db/database.ts'
import type { SecretsKey } from '../secrets/secret-box.ts'
import { DeliveryWorker } from './delivery.worker.ts'
import { EventHub } from './event-hub.ts'
import { StreamAccess } from './stream-access.ts'
import streamRoutes from './stream.routes.ts'
import webhooksRoutes from './webhooks.routes.ts'
import type { WebhooksService } from './webhooks.service.ts'
import type { Tracing } from '../telemetry/tracing.ts'

/**
 * The events domain: webhook routes, the event stream, and the background parts they need: the
 * webhook delivery worker, the stream poller and the check of the streams' credentials. They start
 * with the app; on close the streams end at once (so the server can stop) and the worker finishes
 * or releases its attempts while storage is still open.
 */
export interface EventsOptions {
  database: Database
  config: Config
  /** Seals and opens the webhook secrets. */
  secretsKey: SecretsKey
  webhooks: WebhooksService
  /** Traces each delivery attempt, when traces are on. */
  tracing?: Tracing
  /** Sessions ended here: their streams end at once. */
  sessionEndings: SessionEndings
}

export default async function events(app: FastifyInstance, deps: EventsOptions): Promise<void> {
  const registry = app.hasDecorator('metrics') ? app.metrics : undefined
  const worker = new DeliveryWorker({
    database: deps.database,
    config: deps.config,
    secretsKey: deps.secretsKey,
    webhooks: deps.webhooks,
    tracing: deps.tracing,
    log: app.log.child({ component: 'webhooks' }),
    registry,
  })
  const log = app.log.child({ component: 'events' })
  const hub = new EventHub({ db: deps.database.db, log, registry })
  const access = new StreamAccess({ db: deps.database.db, config: deps.config, log })
  let stopping: Promise<void> | undefined
  app.addHook('onReady', async () => worker.start())
  // Streams end and the worker starts winding down as soon as closing begins, alongside the
  // server draining its requests; storage stays open until the worker is done.
  app.addHook('preClose', async () => {
    hub.close()
    access.stop()
    stopping = worker.stop().catch((error) => app.log.error({ err: error }, 'webhook worker: stopping failed'))
  })
  app.addHook('onClose', async () => {
    await (stopping ?? worker.stop())
  })
  await app.register(webhooksRoutes, { ...deps, worker })
  await app.register(streamRoutes, { hub, access, sessionEndings: deps.sessionEndings })
}
