import type { FastifyInstance } from 'fastify'
import type { Deps } from '../deps.ts'
import { DeliveryWorker } from './delivery.worker.ts'
import { EventHub } from './event-hub.ts'
import streamRoutes from './stream.routes.ts'
import webhooksRoutes from './webhooks.routes.ts'

/**
 * The events domain: webhook routes, the event stream, and the two background parts they need,
 * the webhook delivery worker and the stream poller. Both start with the app; on close the
 * streams end first (so the server can stop), then the worker finishes or releases its attempts
 * while storage is still open.
 */
export default async function events(app: FastifyInstance, deps: Deps): Promise<void> {
  const worker = new DeliveryWorker({ database: deps.database, config: deps.config, log: app.log.child({ component: 'webhooks' }) })
  const hub = new EventHub({ db: deps.database.db, log: app.log.child({ component: 'events' }) })
  app.addHook('onReady', async () => worker.start())
  app.addHook('preClose', async () => hub.close())
  app.addHook('onClose', async () => worker.stop())
  await app.register(webhooksRoutes, { ...deps, worker })
  await app.register(streamRoutes, { ...deps, hub })
}
