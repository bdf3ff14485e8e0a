import type { FastifyInstance } from 'fastify'
import type { Config } from '../config.ts'
import type { Database } from '../db/database.ts'
import type { Ledger } from '../ledger/ledger.service.ts'
import type { EventWriter } from '../ledger/ledger.types.ts'
import type { WalletKeysService } from '../wallets/wallets.service.ts'
import { startScheduleRunner } from './runner.ts'
import schedulesRoutes from './schedules.routes.ts'
import { createSchedulesService } from './schedules.service.ts'

/** How often each instance looks for due schedules. */
const RUNNER_INTERVAL_MS = 1000

/** Wires schedules into the app: the routes, and the runner (started on ready, stopped on close). */
export default async function schedules(
  app: FastifyInstance,
  deps: { config: Config; database: Database; ledger: Ledger; events: EventWriter; walletKeys: WalletKeysService },
): Promise<void> {
  const service = createSchedulesService({ db: deps.database.db, ledger: deps.ledger, events: deps.events, keys: deps.walletKeys })
  await app.register(schedulesRoutes, { schedules: service })
  let runner: { stop(): Promise<void> } | undefined
  app.addHook('onReady', async () => {
    runner = startScheduleRunner(service, app.log.child({ component: 'schedules' }), {
      intervalMs: RUNNER_INTERVAL_MS,
      paceSeconds: deps.config.schedulePaceSeconds,
    })
  })
  app.addHook('onClose', async () => runner?.stop())
}
