import type { FastifyBaseLogger } from 'fastify'
import type client from 'prom-client'
import type { Config } from '../config.ts'
import type { Database } from '../db/database.ts'
import { inTransaction, nowIso } from '../db/dialect.ts'
import { Backoff } from '../db/faults.ts'
import type { SecretsKey } from '../secrets/secret-box.ts'
import { DeliveryClaimer, type Launch } from './claimer.ts'
import { adjust } from './claims.ts'
import * as claims from './claims.repository.ts'
import * as deliveries from './deliveries.repository.ts'
import { DeliveryMetrics, logCircuitChange } from './delivery.metrics.ts'
import { answered, INTERRUPTED, isDelivered, WebhookSender } from './delivery.sender.ts'
import { goneAnswer, writeOutcomes, type AttemptEnd, type Ended } from './outcomes.ts'
import { OriginCircuits, OriginLimits, type CircuitOptions } from './origins.ts'
import { RoundTimer } from './round-timer.ts'
import type { WebhooksService } from './webhooks.service.ts'
import { openWebhookSecret } from './webhook-secrets.ts'
import { traceAttempt, type Tracing } from '../telemetry/tracing.ts'

export interface DeliveryWorkerOptions {
  database: Database
  config: Config
  secretsKey: SecretsKey
  /** Removes a webhook whose receiver answered 410 Gone. */
  webhooks: Pick<WebhooksService, 'removeGoneWebhook'>
  log: FastifyBaseLogger
  registry?: client.Registry
  pollMs?: number
  /** Traces each attempt, when traces are on. */
  tracing?: Tracing
  /** The clock of the circuit breakers and the adaptive limits (the tests mock it). */
  circuits?: Pick<CircuitOptions, 'now'>
}

/** Least time between round starts, so endings close together share one commit (`docs/performance.md#webhooks`). */
const ROUND_GAP_MS = { sqlite: 100, postgres: 50 }

/** An eighth of the slots ending starts a round by itself; fewer wait for the poll, not a round per ending. */
const ROUND_BATCH_SHARE = 8

/**
 * Delivers webhooks in rounds of one transaction each: writes the outcomes of ended attempts, then
 * claims for the free slots (`ClaimPlan`) and sends (`WebhookSender`). Never throws out of its loop.
 */
export class DeliveryWorker {
  private readonly db
  private readonly config: Config
  private readonly secretsKey: SecretsKey
  private readonly webhooks: DeliveryWorkerOptions['webhooks']
  private readonly log: FastifyBaseLogger
  private readonly timer: RoundTimer
  /** Ended attempts that start a round by themselves. */
  private readonly roundBatch: number
  private readonly sender: WebhookSender
  private readonly metrics: DeliveryMetrics
  private readonly circuits: OriginCircuits
  private readonly limits: OriginLimits
  private readonly now: () => number
  private readonly tracing: Tracing | undefined
  /** Attempts in flight (until written), and their count per wallet (the fair pick's load) and per origin. */
  private readonly inFlight = new Map<number, Promise<void>>()
  private readonly walletLoad = new Map<number, number>()
  private readonly originLoad = new Map<string, number>()
  /** Attempts that ended, waiting for the next round to write them. */
  private readonly ended: Ended[] = []
  private readonly claimer: DeliveryClaimer
  private claiming = false
  /** Through a storage outage, rounds pause for longer and longer and log only the start and end. */
  private readonly backoff = new Backoff()

  constructor(options: DeliveryWorkerOptions) {
    const config = (this.config = options.config)
    this.db = options.database.db
    this.secretsKey = options.secretsKey
    this.webhooks = options.webhooks
    this.log = options.log
    this.tracing = options.tracing
    this.timer = new RoundTimer(() => this.round(), { gapMs: ROUND_GAP_MS[options.database.dialect], pollMs: options.pollMs ?? 250 })
    this.roundBatch = Math.max(1, Math.floor(config.webhookConcurrency / ROUND_BATCH_SHARE))
    this.now = options.circuits?.now ?? Date.now
    this.limits = new OriginLimits({ floor: config.webhookOriginMinConcurrency, cap: config.webhookOriginConcurrency, now: this.now })
    this.circuits = new OriginCircuits({
      failureThreshold: config.webhookCircuitFailures,
      openMs: config.webhookCircuitOpenMs,
      ...options.circuits,
      onChange: logCircuitChange(this.log),
    })
    this.claimer = new DeliveryClaimer({ config, limits: this.limits, circuits: this.circuits })
    this.metrics = new DeliveryMetrics(options.registry, { inFlight: this.originLoad, limits: this.limits, circuits: this.circuits })
    this.sender = new WebhookSender(config)
  }

  start(): void {
    if (this.timer.running) return
    this.claiming = true
    this.timer.start()
    // Rows of workers that died have lapsed: they count nothing any more.
    deliveries
      .clearLeaseCounts(this.db, { now: nowIso() })
      .catch((error) => this.log.warn({ err: error }, 'webhook worker: clearing lapsed lease counts failed'))
    this.timer.wake()
  }

  /** Runs a round soon (a manual retry). */
  wake(): void {
    this.timer.wake()
  }

  /** Stops claiming; attempts still in flight after `graceMs` are aborted and their leases given back. */
  async stop(graceMs = Math.min(this.config.webhookTimeoutMs / 2, 5_000)): Promise<void> {
    if (!this.timer.running) return
    // Rounds go on without claiming, so that what ends is still written, from now on at once.
    this.claiming = false
    this.timer.stopPolling()
    this.timer.wake()
    const pending = [...this.inFlight.values()]
    if (pending.length > 0) {
      let timer: NodeJS.Timeout | undefined
      await Promise.race([Promise.allSettled(pending), new Promise((resolve) => (timer = setTimeout(resolve, graceMs)))])
      clearTimeout(timer)
      this.sender.abort()
      await Promise.allSettled(pending)
    }
    await this.timer.stop()
    // Should this fail, our rows lapse with their leases.
    await deliveries.clearLeaseCounts(this.db, { instance: this.claimer.instance, now: nowIso() }).catch(() => {})
    await this.sender.close()
  }

  /** One round, one commit; if storage fails the outcomes stay queued and the round is retried with backoff. */
  private async round(): Promise<void> {
    if (!this.backoff.ready()) {
      // What ended still waits to be written, also once the poll has stopped (shutdown).
      if (this.ended.length > 0) this.timer.retryLater()
      return
    }
    const ended = this.ended.splice(0)
    const free = this.claiming ? this.config.webhookConcurrency - (this.inFlight.size - ended.length) : 0
    if (ended.length === 0 && free <= 0) return
    const written = ended.filter((end) => !goneAnswer(end))
    // This worker's leases that still count once this round commits: in flight, or a 410 not written yet.
    const live = new Map(this.originLoad)
    for (const end of written) adjust(live, end.claim.origin, -1)
    // What each origin holds on the wire: the ended attempts' slots are free.
    const held = new Map(this.originLoad)
    for (const end of ended) adjust(held, end.claim.origin, -1)
    let launches: Launch[] = []
    let counts: Map<string, deliveries.LeaseCount> | undefined
    try {
      // Nothing to write: whether anything is due is asked first, outside a transaction.
      if (ended.length > 0 || (await claims.listDueOrigins(this.db, nowIso())).length > 0) {
        ;[launches, counts] = await inTransaction(this.db, async (trx) => {
          await claims.startRound(trx, { claims: free > 0 })
          await writeOutcomes(trx, written, this.config.webhookRetrySchedule)
          const claimed = free > 0 ? await this.claimer.claim(trx, free, { held, live, walletLoad: this.walletLoad }) : undefined
          if (claimed?.lookAgain) this.timer.again()
          const launched = claimed?.launches ?? []
          return [launched, await this.claimer.writeLeaseCounts(trx, live, launched)] as const
        })
      }
    } catch (error) {
      // It may have committed all the same (a connection lost at COMMIT): rewrite every count.
      this.claimer.failed()
      this.ended.unshift(...ended)
      if (this.backoff.failed() && this.timer.running)
        this.log.warn({ err: error }, 'webhook worker: writing or claiming deliveries failed; retrying with backoff')
      if (ended.length > 0) this.timer.again()
      return
    }
    if (counts) {
      this.metrics.roundRun()
      this.claimer.committed(counts)
    }
    if (this.backoff.succeeded()) this.log.info('webhook worker: writing and claiming deliveries again')
    const gone = await this.settle(ended)
    for (const launch of launches) {
      // Its work was read before a removal just written: it ends as cancelled, as if read after.
      const removed = launch.work && gone.has(`${launch.wallet_id} ${launch.work.url}`)
      this.launch(removed ? { ...launch, work: { ...(launch.work as claims.DeliveryWork), url: null, secret: null } } : launch)
    }
  }

  /**
   * Releases a committed round's attempts; a 410 Gone removes the webhook in one transaction with its
   * queued deliveries, so none reads failed while it is set. Returns `walletId url` of those removed.
   */
  private async settle(ended: Ended[]): Promise<Set<string>> {
    const gone = new Set<string>()
    for (const end of ended) {
      if (!goneAnswer(end)) {
        end.written()
        continue
      }
      const walletId = end.claim.wallet_id
      const removed = await this.webhooks
        .removeGoneWebhook(walletId, end.url, (trx) => writeOutcomes(trx, [end], this.config.webhookRetrySchedule))
        .then(
          (removed) => {
            end.written()
            return removed
          },
          (error) => {
            this.log.warn({ err: error, wallet: walletId }, 'webhook worker: removing a webhook gone (410) failed')
            this.ended.push({ ...end, removalFailed: true })
            this.timer.again()
            return false
          },
        )
      if (removed) gone.add(`${walletId} ${end.url}`)
    }
    return gone
  }

  private launch(claim: Launch): void {
    const { origin, wallet_id: walletId } = claim
    this.circuits.started(origin)
    adjust(this.walletLoad, walletId, 1)
    adjust(this.originLoad, origin, 1)
    const done = this.attempt(claim)
      .catch((error) => this.log.error({ err: error, delivery: claim.id }, 'webhook worker: attempt failed unexpectedly'))
      .finally(() => {
        this.inFlight.delete(claim.id)
        adjust(this.walletLoad, walletId, -1)
        adjust(this.originLoad, origin, -1)
      })
    this.inFlight.set(claim.id, done)
  }

  /** Queues what became of an attempt for the next round, and waits until it is written. */
  private finish(end: AttemptEnd): Promise<void> {
    return new Promise((resolve) => {
      this.ended.push({ ...end, written: resolve })
      // Once the poll has stopped (shutdown), each ending is written at once.
      if (this.ended.length >= this.roundBatch || !this.claiming || this.slotsAwaited(end.claim.origin)) this.timer.wake()
    })
  }

  /** An origin held to a few slots, half of them ended, starts a round: served at its receiver's pace, not the poll's. */
  private slotsAwaited(origin: string): boolean {
    if (this.inFlight.size >= this.roundBatch || !this.claimer.waitingOrigins.has(origin)) return false
    let ended = 0
    for (const end of this.ended) if (end.claim.origin === origin) ended++
    return 2 * ended >= (this.originLoad.get(origin) ?? 0)
  }

  private async attempt(claim: Launch): Promise<void> {
    const { work } = claim
    if (!work) return
    // The webhook was removed after the event was queued: nothing may be sent any more.
    if (work.url === null || work.secret === null) return this.finish({ claim, kind: 'cancelled' })
    const url = work.url
    const attemptedAt = nowIso()
    const startedAt = this.now()
    let secret: string
    try {
      secret = openWebhookSecret(this.secretsKey, claim.wallet_id, work.secret)
    } catch (error) {
      // Sealed with another SECRETS_KEY (a rotation this instance was not restarted for): retried later.
      this.log.error(
        { delivery: claim.id, reason: (error as Error).message },
        'webhook worker: the webhook secret cannot be opened with this SECRETS_KEY',
      )
      const notSent = "not sent: the webhook secret cannot be opened with this instance's SECRETS_KEY"
      return this.finish({ claim, kind: 'attempted', url, attemptedAt, outcome: { statusCode: null, latencyMs: 0, error: notSent } })
    }
    const outcome = await traceAttempt(this.tracing, claim.attempts + 1, () => this.sender.send(url, secret, work.event_id, work.payload))
    if (this.sender.stopping && outcome.statusCode === null) {
      // Cut off by the shutdown: the receiver may have seen it, so it is logged, and given back due at once.
      this.metrics.attempted('released')
      return this.finish({ claim, kind: 'released', url, attemptedAt, outcome: { ...outcome, error: INTERRUPTED } })
    }
    this.circuits.finished(claim.origin, answered(outcome))
    this.limits.finished(claim.origin, { startedAt, answered: answered(outcome), latencyMs: outcome.latencyMs })
    this.metrics.attempted(isDelivered(outcome) ? 'delivered' : 'failed')
    return this.finish({ claim, kind: 'attempted', url, attemptedAt, outcome })
  }
}
