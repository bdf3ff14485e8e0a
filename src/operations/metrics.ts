import type { FastifyInstance, onSendHookHandler } from 'fastify'
import client from 'prom-client'
import type { Database } from '../db/database.ts'
import { listBacklogs } from '../events/webhooks.service.ts'

/**
 * The metrics an operator watches beyond requests and latency (`docs/operations.md#metrics-and-alerts`):
 * transfers committed and refused by code, the sizes of the batches they commit in, the webhook
 * backlog and the age of its oldest delivery (in all, per receiving origin and per webhook), and
 * the PostgreSQL pool's use. (Event-stream clients,
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

/** Per-webhook backlog series are kept to the largest ones, so that /metrics stays small with many webhooks. */
const MAX_WEBHOOK_SERIES = 100

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
  const gauge = (name: string, help: string, labelNames: string[] = []) =>
    new client.Gauge({
      name,
      help,
      labelNames,
      registers: [registry],
      async collect() {
        await readBacklogs()
      },
    })
  const backlog = gauge('coffer_webhook_backlog', 'Webhook deliveries pending (waiting for their first attempt or a retry)')
  const oldest = gauge('coffer_webhook_oldest_pending_seconds', 'Age of the oldest pending webhook delivery (0 when none)')
  const originBacklog = gauge('coffer_webhook_origin_backlog', 'Webhook deliveries pending per receiving origin', ['origin'])
  const originOldest = gauge(
    'coffer_webhook_origin_oldest_pending_seconds',
    'Age of the oldest pending webhook delivery per receiving origin',
    ['origin'],
  )
  const webhookBacklog = gauge(
    'coffer_webhook_wallet_backlog',
    `Webhook deliveries pending per webhook (wallet id and origin), for the ${MAX_WEBHOOK_SERIES} largest backlogs`,
    ['wallet', 'origin'],
  )
  const webhookOldest = gauge(
    'coffer_webhook_wallet_oldest_pending_seconds',
    `Age of the oldest pending delivery per webhook (wallet id and origin), for the ${MAX_WEBHOOK_SERIES} largest backlogs`,
    ['wallet', 'origin'],
  )
  function setBacklogs(backlogs: Awaited<ReturnType<typeof listBacklogs>>): void {
    // Series of origins and webhooks whose backlog is gone go away with it.
    for (const labelled of [originBacklog, originOldest, webhookBacklog, webhookOldest]) labelled.reset()
    const origins = new Map<string, { pending: number; age: number }>()
    for (const { origin, pending, oldest_pending_age_seconds: age } of backlogs) {
      const sum = origins.get(origin) ?? { pending: 0, age: 0 }
      origins.set(origin, { pending: sum.pending + pending, age: Math.max(sum.age, age) })
    }
    for (const [origin, { pending, age }] of origins) {
      originBacklog.set({ origin }, pending)
      originOldest.set({ origin }, age)
    }
    for (const row of [...backlogs].sort((a, b) => b.pending - a.pending).slice(0, MAX_WEBHOOK_SERIES)) {
      const labels = { wallet: String(row.wallet_id), origin: row.origin }
      webhookBacklog.set(labels, row.pending)
      webhookOldest.set(labels, row.oldest_pending_age_seconds)
    }
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
