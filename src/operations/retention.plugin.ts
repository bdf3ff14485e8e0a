import type { FastifyInstance } from 'fastify'
import type { Config } from '../config.ts'
import type { Database } from '../db/database.ts'
import { RetentionJob } from './retention.ts'

/** The retention job of this instance: first run a minute after start, then hourly; stopped on close. */
export default async function retention(app: FastifyInstance, { database, config }: { database: Database; config: Config }): Promise<void> {
  const job = new RetentionJob({
    database,
    policy: {
      eventRetentionDays: config.eventRetentionDays,
      idempotencyRetentionHours: config.idempotencyRetentionHours,
      sessionIdleDays: config.sessionIdleDays,
    },
    log: app.log.child({ component: 'retention' }),
    registry: app.hasDecorator('metrics') ? app.metrics : undefined,
  })
  app.addHook('onReady', async () => job.start())
  app.addHook('onClose', async () => job.stop())
}
