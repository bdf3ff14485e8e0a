import type { FastifyInstance, onSendHookHandler } from 'fastify'
import client from 'prom-client'
import type { Database } from '../db/database.ts'
import { listBacklogs } from '../events/webhooks.service.ts'

/**
 * The metrics an operator watches beyond requests and latency (`docs/operations.md#metrics-and-alerts`):
 * transfers committed and refused by code, the sizes of the batches they commit in, the webhook
 * backlog and the age of its oldest delivery, how many receiving origins it waits on and the largest of theirs (no
 * label names a user, an origin or a wallet), and the PostgreSQL pool's use. (Event-stream clients,
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
export async function registerOperatorMetrics(
  app: FastifyInstance,
  { metrics, database }: { metrics: OperatorMetrics; database: Database },
): Promise<void> {
  if (!app.hasDecorator('metrics')) return
  const registry = app.metrics
  registry.registerMetric(metrics.transfers)
  registry.registerMetric(metrics.batchSizes)
  // The backlog gauges are read from storage together, once per scrape: every gauge's collect
  // waits for the same read (the registry may collect them in any order, or at once).
  let reading: Promise<void> | undefined
  const readBacklogs = () =>
    (reading ??= (async () => {
      try {
        setBacklogs(await listBacklogs(database.db))
      } catch {
        // Storage unreachable: /readyz says so; the scrape still answers with the other metrics.
      } finally {
        reading = undefined
      }
    })())
  const gauge = (name: string, help: string) =>
    new client.Gauge({
      name,
      help,
      registers: [registry],
      async collect() {
        await readBacklogs()
      },
    })
  const backlog = gauge('coffer_webhook_backlog', 'Webhook deliveries pending (waiting for their first attempt or a retry)')
  const oldest = gauge('coffer_webhook_oldest_pending_seconds', 'Age of the oldest pending webhook delivery (0 when none)')
  // No series per origin or per webhook: a webhook's host and port, or its wallet, would tell
  // whoever reads /metrics who the service's users are. A holder sees their own backlog on
  // `GET /wallet/webhook`; the worker's log names an origin whose circuit opens.
  const origins = gauge('coffer_webhook_backlogged_origins', 'Receiving origins with webhook deliveries pending')
  const largest = gauge('coffer_webhook_largest_origin_backlog', 'Webhook deliveries pending for the receiving origin with the most')
  function setBacklogs(backlogs: Awaited<ReturnType<typeof listBacklogs>>): void {
    const byOrigin = new Map<string, number>()
    for (const { origin, pending } of backlogs) byOrigin.set(origin, (byOrigin.get(origin) ?? 0) + pending)
    origins.set(byOrigin.size)
    largest.set(Math.max(0, ...byOrigin.values()))
    backlog.set(backlogs.reduce((sum, row) => sum + row.pending, 0))
    oldest.set(Math.max(0, ...backlogs.map((row) => row.oldest_pending_age_seconds)))
  }
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
  // Transfers are counted by an `onSend` hook of their route alone (refusals by its guard and
  // schema included), so other requests pay no hook step.
  const countTransfer: onSendHookHandler = (_request, reply, payload, done) => {
    if (reply.statusCode === 201)
      metrics.transfers.inc({ outcome: reply.getHeader('idempotent-replayed') ? 'replayed' : 'committed', code: '' })
    else metrics.transfers.inc({ outcome: 'refused', code: errorCode(payload) })
    done(null, payload)
  }
  app.addHook('onRoute', (route) => {
    if (route.method === 'POST' && route.url === '/wallet/transactions') route.onSend = [...[route.onSend ?? []].flat(), countTransfer]
  })
}

function errorCode(payload: unknown): string {
  if (typeof payload !== 'string') return 'unknown'
  return /"code":"([A-Z]\d{3})"/.exec(payload)?.[1] ?? 'unknown'
}
