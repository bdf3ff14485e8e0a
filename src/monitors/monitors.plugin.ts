import type { FastifyInstance } from 'fastify'
import type { Database } from '../db/database.ts'
import type { Ledger } from '../ledger/ledger.service.ts'
import monitorsRoutes from './monitors.routes.ts'
import { createMonitorsService } from './monitors.service.ts'

/** Wires balance monitors' routes into the app; the ledger is handed their hook by `buildApp` (`watchBalances`). */
export default async function monitors(app: FastifyInstance, { database, ledger }: { database: Database; ledger: Ledger }): Promise<void> {
  await app.register(monitorsRoutes, { monitors: createMonitorsService({ db: database.db, ledger }) })
}
