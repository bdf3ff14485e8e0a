import type { FastifyInstance } from 'fastify'
import client from 'prom-client'
import type { Database } from '../db/database.ts'
import { findWebhookBacklog } from './metrics.repository.ts'

/**
 * The metrics an operator watches beyond requests and latency (`docs/operations.md#metrics-and-alerts`):
 * transfers committed and refused by code, the sizes of the batches they commit in, the webhook
 * backlog and the age of its oldest delivery, and the PostgreSQL pool's use. (Event-stream clients,
 * webhook attempts and retention are counted where they happen: `coffer_event_streams`,
 * `coffer_webhook_attempts_total`, `coffer_retention_pruned_rows_total`.) Made before the ledger,
 * which reports its batches here; registered on the app's /metrics by `registerOperatorMetrics`.
 */
export class OperatorMetrics {
  readonly transfers = new client.Counter({
    name: 'coffer_transfers_total',
    help: 'POST /wallet/transactions answers: committed, replayed (same Idempotency-Key), or refused with the error code',
    labelNames: ['outcome', 'code'],
    registers: [],
  })
  readonly batchSizes = new client.Histogram({
    name: 'coffer_transfer_batch_size',
    help: 'Transfers committed together in one database transaction',
    buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256, 512],
    registers: [],
  })

  /** For `createLedger`'s `onBatch`. */
  readonly observeBatch = (size: number): void => this.batchSizes.observe(size)
}

/** Registers the metrics on the app's registry, with the gauges read from storage at each scrape. */
export async function registerOperatorMetrics(app: FastifyInstance, { metrics, database }: { metrics: OperatorMetrics; database: Database }): Promise<void> {
  if (!app.hasDecorator('metrics')) return
  const registry = app.metrics
  registry.registerMetric(metrics.transfers)
  registry.registerMetric(metrics.batchSizes)
  const backlog = new client.Gauge({ name: 'coffer_webhook_backlog', help: 'Webhook deliveries pending (waiting for their first attempt or a retry)', registers: [registry] })
  new client.Gauge({
    name: 'coffer_webhook_oldest_pending_seconds',
    help: 'Age of the oldest pending webhook delivery (0 when none)',
    registers: [registry],
    async collect() {
      try {
        const { pending, oldest } = await findWebhookBacklog(database.db)
        backlog.set(pending)
        this.set(oldest ? Math.max(0, (Date.now() - Date.parse(oldest)) / 1000) : 0)
      } catch {
        // Storage unreachable: /readyz says so; the scrape still answers with the other metrics.
      }
    },
  })
  if (database.poolUse) {
    const poolUse = database.poolUse.bind(database)
    new client.Gauge({
      name: 'coffer_db_pool_connections',
      help: 'PostgreSQL pool connections by state (busy, idle) and the pool size (max)',
      labelNames: ['state'],
      registers: [registry],
      collect() {
        const use = poolUse()
        this.set({ state: 'busy' }, use.open - use.idle)
        this.set({ state: 'idle' }, use.idle)
        this.set({ state: 'max' }, use.max)
      },
    })
    new client.Gauge({
      name: 'coffer_db_pool_waiting',
      help: 'Queries waiting for a PostgreSQL connection (above 0 for long: the pool is saturated)',
      registers: [registry],
      collect() {
        this.set(poolUse().waiting)
      },
    })
  }
  app.addHook('onSend', async (request, reply, payload) => {
    if (request.method !== 'POST' || request.routeOptions.url !== '/wallet/transactions') return payload
    if (reply.statusCode === 201) metrics.transfers.inc({ outcome: reply.getHeader('idempotent-replayed') ? 'replayed' : 'committed', code: '' })
    else metrics.transfers.inc({ outcome: 'refused', code: errorCode(payload) })
    return payload
  })
}

function errorCode(payload: unknown): string {
  if (typeof payload !== 'string') return 'unknown'
  return /"code":"([A-Z]\d{3})"/.exec(payload)?.[1] ?? 'unknown'
}
