import type { FastifyInstance, onSendHookHandler } from 'fastify'
import client from 'prom-client'
import type { Database } from '../db/database.ts'
import { findDebts } from '../ledger/credit.service.ts'
import { findExpiryLagSeconds } from '../ledger/expiry.service.ts'
import type { WebhooksService } from '../events/webhooks.service.ts'

/**
 * The metrics an operator watches beyond requests (`docs/operations.md#metrics-and-alerts`): transfers,
 * batch sizes, the webhook backlog, the pool's use. No label names a user, an origin or a wallet.
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
  {
    metrics,
    database,
    webhooks,
    clock,
  }: { metrics: OperatorMetrics; database: Database; webhooks: Pick<WebhooksService, 'listBacklogs'>; clock: () => string },
): Promise<void> {
  if (!app.hasDecorator('metrics')) return
  const registry = app.metrics
  registry.registerMetric(metrics.transfers)
  registry.registerMetric(metrics.batchSizes)
  // One storage read per scrape for all the backlog gauges.
  let reading: Promise<void> | undefined
  const readBacklogs = () =>
    (reading ??= (async () => {
      try {
        setBacklogs(await webhooks.listBacklogs())
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
  // No series per origin: it would tell whoever reads /metrics who the users are.
  const origins = gauge('coffer_webhook_backlogged_origins', 'Receiving origins with webhook deliveries pending')
  const largest = gauge('coffer_webhook_largest_origin_backlog', 'Webhook deliveries pending for the receiving origin with the most')
  function setBacklogs(backlogs: Awaited<ReturnType<WebhooksService['listBacklogs']>>): void {
    const byOrigin = new Map<string, number>()
    for (const { origin, pending } of backlogs) byOrigin.set(origin, (byOrigin.get(origin) ?? 0) + pending)
    origins.set(byOrigin.size)
    largest.set(Math.max(0, ...byOrigin.values()))
    backlog.set(backlogs.reduce((sum, row) => sum + row.pending, 0))
    oldest.set(Math.max(0, ...backlogs.map((row) => row.oldest_pending_age_seconds)))
  }
  new client.Gauge({
    name: 'coffer_expiry_lag_seconds',
    help: 'How long ago the oldest expired units not yet returned to mint expired (0 when none; the job writes them within seconds)',
    registers: [registry],
    async collect() {
      this.set(await findExpiryLagSeconds(database.db, clock()).catch(() => 0))
    },
  })
  // Credit: what wallets owe, by asset (asset names are the operator's, never a user's), and how many owe.
  let debts: Promise<Awaited<ReturnType<typeof findDebts>> | undefined> | undefined
  const readDebts = () =>
    (debts ??= findDebts(database.db)
      .catch(() => undefined)
      .finally(() => (debts = undefined)))
  new client.Gauge({
    name: 'coffer_owed',
    help: 'What wallets below zero owe on credit together, by asset (no series for an asset nobody owes)',
    labelNames: ['asset'],
    registers: [registry],
    async collect() {
      const found = await readDebts()
      this.reset()
      for (const [asset, owed] of found?.owed ?? []) this.set({ asset }, owed)
    },
  })
  new client.Gauge({
    name: 'coffer_wallets_owing',
    help: 'Wallets with at least one holding below zero (credit in use)',
    registers: [registry],
    async collect() {
      this.set((await readDebts())?.wallets ?? 0)
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
  // A hook of the transfer route alone, so other requests pay nothing.
  const countTransfer: onSendHookHandler = (_request, reply, payload, done) => {
    if (reply.statusCode === 201)
      metrics.transfers.inc({ outcome: reply.getHeader('idempotent-replayed') ? 'replayed' : 'committed', code: '' })
    // A dry run (200) is no transfer.
    else if (reply.statusCode !== 200) metrics.transfers.inc({ outcome: 'refused', code: errorCode(payload) })
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
