import type { FastifyBaseLogger } from 'fastify'
import { randomUUID } from 'node:crypto'
import type client from 'prom-client'
import type { Transaction } from 'kysely'
import type { Config } from '../config.ts'
import type { Database, Executor } from '../db/database.ts'
import type { DB } from '../db/tables.ts'
import { inTransaction, nowIso } from '../db/dialect.ts'
import { Backoff } from '../db/faults.ts'
import type { SecretsKey } from '../secrets/secret-box.ts'
import { adjust, ClaimPlan, leaseCountChange } from './claims.ts'
import * as claims from './claims.repository.ts'
import * as deliveries from './deliveries.repository.ts'
import { DeliveryMetrics } from './delivery.metrics.ts'
import { answered, INTERRUPTED, isDelivered, nextState, WebhookSender, type Outcome } from './delivery.sender.ts'
import { OriginCircuits, OriginLimits, type CircuitOptions } from './origins.ts'
import { removeGoneWebhook } from './webhooks.service.ts'
import { openWebhookSecret } from './webhook-secrets.ts'

export interface DeliveryWorkerOptions {
  database: Database
  config: Config
  /** Opens the webhook secrets, stored sealed. */
  secretsKey: SecretsKey
  log: FastifyBaseLogger
  /** Where the worker's metrics are registered (the app's /metrics). */
  registry?: client.Registry
  /** How often due deliveries are looked for. */
  pollMs?: number
  /** The clock of the circuit breakers and the adaptive limits (the tests mock it). */
  circuits?: Pick<CircuitOptions, 'now'>
}

/** How much longer than one attempt's timeout a lease lasts before another instance may take the row. */
const LEASE_MARGIN_MS = 10_000

/**
 * The least time between the starts of two rounds, so that attempts ending close together share
 * one commit: each round is a commit (on SQLite a sync the transfers wait behind) and a handful of
 * statements on the database the transfers are limited by (`docs/performance.md#webhooks`).
 */
const ROUND_GAP_MS = { sqlite: 100, postgres: 50 }

/**
 * An eighth of the instance's slots ending starts a round by itself; fewer wait for the next poll,
 * so that an origin backed up at its limit, whose attempts end one by one, does not cost a round
 * per ending (`docs/performance.md#webhooks`).
 */
const ROUND_BATCH_SHARE = 8

/** A claimed delivery, with its origin and what its attempt needs (`work` undefined when the row is gone). */
type Launch = claims.LeasedDelivery & { origin: string }

/**
 * What became of an attempt: `attempted` (logged, then delivered, retried or failed), `released`
 * (cut off by the shutdown: logged and given back), `cancelled` (the webhook was removed before
 * anything was sent).
 */
type AttemptEnd = { claim: Launch } & (
  { kind: 'attempted' | 'released'; url: string; attemptedAt: string; outcome: Outcome } | { kind: 'cancelled' }
)
/** An attempt's end waiting for a round: `written` tells the attempt; `removalFailed`: a 410 whose webhook removal failed. */
type Ended = AttemptEnd & { written: () => void; removalFailed?: true }

/** A 410 Gone: its outcome is written with the webhook's removal, not in the round. */
function goneAnswer(end: Ended): end is Ended & { kind: 'attempted' } {
  return end.kind === 'attempted' && end.outcome.statusCode === 410 && !end.removalFailed
}

/**
 * Delivers queued webhook events in rounds, each one database transaction: it writes the outcomes
 * of the attempts that ended, then claims due deliveries under a lease for the free slots
 * (`ClaimPlan`), and sends them (`WebhookSender`). An attempt keeps its slot until its outcome is
 * written. Never throws out of its loop; a receiver that hangs costs one slot for `webhookTimeoutMs`.
 */
export class DeliveryWorker {
  private readonly db
  private readonly config: Config
  private readonly secretsKey: SecretsKey
  private readonly log: FastifyBaseLogger
  private readonly pollMs: number
  private readonly roundGapMs: number
  /** Ended attempts that start a round by themselves. */
  private readonly roundBatch: number
  private readonly sender: WebhookSender
  private readonly metrics: DeliveryMetrics
  private readonly circuits: OriginCircuits
  private readonly limits: OriginLimits
  private readonly now: () => number
  /** Attempts in flight (until written), and their count per wallet (the fair pick's load) and per origin. */
  private readonly inFlight = new Map<number, Promise<void>>()
  private readonly walletLoad = new Map<number, number>()
  private readonly originLoad = new Map<string, number>()
  /** Attempts that ended, waiting for the next round to write them. */
  private readonly ended: Ended[] = []
  /** Origins whose last claim left due deliveries behind, their circuit not open (`slotsAwaited`). */
  private waitingOrigins = new Set<string>()
  /** Which origin claims first next time. */
  private turn = 0
  private running = false
  private claiming = false
  /** The round running; `again`: another was asked for meanwhile. */
  private ticking: Promise<void> | undefined
  private again = false
  private lastRound = 0
  /** The next poll, and a round waiting for the gap. */
  private pollTimer: NodeJS.Timeout | undefined
  private gapTimer: NodeJS.Timeout | undefined
  /** Through a storage outage, rounds pause for longer and longer and log only the start and end. */
  private readonly backoff = new Backoff()
  /** This worker's name in `webhook_lease_counts`, new at each start of the process, and its rows as last committed. */
  private readonly instance = randomUUID()
  private leaseCounts = new Map<string, deliveries.LeaseCount>()
  /** A round failed after it may have written them: the next one writes every row again. */
  private leaseCountsUnsure = false

  constructor(options: DeliveryWorkerOptions) {
    const config = (this.config = options.config)
    this.db = options.database.db
    this.secretsKey = options.secretsKey
    this.log = options.log
    this.pollMs = options.pollMs ?? 250
    this.roundGapMs = ROUND_GAP_MS[options.database.dialect]
    this.roundBatch = Math.max(1, Math.floor(config.webhookConcurrency / ROUND_BATCH_SHARE))
    this.now = options.circuits?.now ?? Date.now
    this.limits = new OriginLimits({ floor: config.webhookOriginMinConcurrency, cap: config.webhookOriginConcurrency, now: this.now })
    this.circuits = new OriginCircuits({
      failureThreshold: config.webhookCircuitFailures,
      openMs: config.webhookCircuitOpenMs,
      ...options.circuits,
      onChange: ({ origin, from, to, failures, openForMs }) => {
        if (to === 'open' && from === 'closed')
          this.log.warn(
            { origin, failures, open_for_ms: openForMs },
            'webhook worker: circuit opened for an origin that keeps failing; its deliveries wait',
          )
        else if (to === 'closed') this.log.info({ origin }, 'webhook worker: circuit closed; the origin answers again')
        else this.log.debug({ origin, from, to, open_for_ms: openForMs }, 'webhook worker: circuit state changed')
      },
    })
    this.metrics = new DeliveryMetrics(options.registry, { inFlight: this.originLoad, limits: this.limits, circuits: this.circuits })
    this.sender = new WebhookSender(config)
  }

  start(): void {
    if (this.running) return
    this.running = true
    this.claiming = true
    this.armPoll()
    // Rows of workers that died have lapsed: they count nothing any more.
    deliveries
      .clearLeaseCounts(this.db, { now: nowIso() })
      .catch((error) => this.log.warn({ err: error }, 'webhook worker: clearing lapsed lease counts failed'))
    this.wake()
  }

  /** Runs a round soon (at a poll, a manual retry, a batch of endings), at least `ROUND_GAP_MS` after the last one started. */
  wake(): void {
    if (!this.running) return
    if (this.ticking) {
      this.again = true
      return
    }
    if (this.gapTimer) return
    const wait = this.lastRound + this.roundGapMs - Date.now()
    if (wait > 0) {
      this.gapTimer = setTimeout(() => {
        this.gapTimer = undefined
        this.wake()
      }, wait)
      this.gapTimer.unref()
      return
    }
    this.lastRound = Date.now()
    if (this.claiming) this.armPoll()
    this.ticking = this.round().finally(() => {
      this.ticking = undefined
      if (this.again) {
        this.again = false
        this.wake()
      }
    })
  }

  /** The next poll comes `pollMs` after the start of the last round, however that one was started, so the two do not add up. */
  private armPoll(): void {
    clearTimeout(this.pollTimer)
    this.pollTimer = setTimeout(() => this.wake(), this.pollMs)
    this.pollTimer.unref()
  }

  /**
   * Stops claiming, lets attempts in flight finish for up to `graceMs`, then aborts the rest, logs
   * them as attempts and gives their leases back, so another instance takes them at once (the
   * receiver may then see that event twice).
   */
  async stop(graceMs = Math.min(this.config.webhookTimeoutMs / 2, 5_000)): Promise<void> {
    if (!this.running) return
    // Rounds go on without claiming, so that what ends is still written, from now on at once.
    this.claiming = false
    clearTimeout(this.pollTimer)
    this.wake()
    const pending = [...this.inFlight.values()]
    if (pending.length > 0) {
      let timer: NodeJS.Timeout | undefined
      await Promise.race([Promise.allSettled(pending), new Promise((resolve) => (timer = setTimeout(resolve, graceMs)))])
      clearTimeout(timer)
      this.sender.abort()
      await Promise.allSettled(pending)
    }
    this.running = false
    clearTimeout(this.gapTimer)
    await this.ticking
    // Should this fail, our rows lapse with their leases.
    await deliveries.clearLeaseCounts(this.db, { instance: this.instance, now: nowIso() }).catch(() => {})
    await this.sender.close()
  }

  /**
   * One round, one transaction (one commit however many deliveries it moves): writes the outcomes
   * of the attempts that ended, then claims for the free slots. If storage fails, the outcomes stay
   * queued (their attempts keep their slots) and the round is tried again with backoff.
   */
  private async round(): Promise<void> {
    if (!this.backoff.ready()) {
      // What ended still waits to be written, also once the poll has stopped (shutdown).
      if (this.ended.length > 0) setTimeout(() => this.wake(), this.pollMs).unref()
      return
    }
    const ended = this.ended.splice(0)
    const free = this.claiming ? this.config.webhookConcurrency - (this.inFlight.size - ended.length) : 0
    if (ended.length === 0 && free <= 0) return
    const written = ended.filter((end) => !goneAnswer(end))
    // This worker's leases that still count once this round commits: in flight, or a 410 not written yet.
    const live = new Map(this.originLoad)
    for (const end of written) adjust(live, end.claim.origin, -1)
    let launches: Launch[] = []
    let counts: Map<string, deliveries.LeaseCount> | undefined
    try {
      // Nothing to write: whether anything is due is asked first, outside a transaction.
      if (ended.length > 0 || (await claims.listDueOrigins(this.db, nowIso())).length > 0) {
        ;[launches, counts] = await inTransaction(this.db, async (trx) => {
          await claims.startRound(trx, { claims: free > 0 })
          await this.write(trx, written)
          const claimed = free > 0 ? await this.claim(trx, free, ended, live) : []
          return [claimed, await this.writeLeaseCounts(trx, live, claimed)] as const
        })
      }
    } catch (error) {
      // It may have committed all the same (a connection lost at COMMIT): rewrite every count.
      this.leaseCountsUnsure = true
      this.ended.unshift(...ended)
      if (this.backoff.failed() && this.running)
        this.log.warn({ err: error }, 'webhook worker: writing or claiming deliveries failed; retrying with backoff')
      if (ended.length > 0) this.again = true
      return
    }
    if (counts) {
      this.metrics.roundRun()
      this.leaseCounts = counts
      this.leaseCountsUnsure = false
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
   * Tells the attempts of a committed round they are written, and writes each 410 Gone with the
   * webhook's removal and the cancellation of what is still queued for it, in a transaction of its
   * own, so the delivery never reads failed while the webhook is set. Should that fail, the next
   * round writes the outcome alone. Returns `walletId url` of the webhooks removed.
   */
  private async settle(ended: Ended[]): Promise<Set<string>> {
    const gone = new Set<string>()
    for (const end of ended) {
      if (!goneAnswer(end)) {
        end.written()
        continue
      }
      const walletId = end.claim.wallet_id
      const removed = await removeGoneWebhook(this.db, walletId, end.url, (trx) => this.write(trx, [end])).then(
        (removed) => {
          end.written()
          return removed
        },
        (error) => {
          this.log.warn({ err: error, wallet: walletId }, 'webhook worker: removing a webhook gone (410) failed')
          this.ended.push({ ...end, removalFailed: true })
          this.again = true
          return false
        },
      )
      if (removed) gone.add(`${walletId} ${end.url}`)
    }
    return gone
  }

  /**
   * Under the claims' lock, leases up to `free` due deliveries as `ClaimPlan` shares them out.
   * `ended`: attempts over but not yet written, whose slots are free; `live`: this worker's leases
   * that still count, per origin.
   */
  private async claim(trx: Transaction<DB>, free: number, ended: Ended[], live: Map<string, number>): Promise<Launch[]> {
    const now = Date.now()
    const nowText = new Date(now).toISOString()
    const { due, leased } = await claims.findDueOriginsAndLeases(trx, { now: nowText, instance: this.instance })
    if (due.length === 0) {
      this.waitingOrigins.clear()
      return []
    }
    for (const [origin, count] of live) adjust(leased, origin, count)
    const held = new Map(this.originLoad)
    for (const end of ended) adjust(held, end.claim.origin, -1)
    const plan = new ClaimPlan({
      due,
      turn: this.turn++,
      free,
      concurrency: this.config.webhookConcurrency,
      leased,
      held,
      limit: (origin) => this.limits.limit(origin),
      allowance: (origin) => this.circuits.allowance(origin),
    })
    // Made here: `inTransaction` may run the round again after a serialization failure.
    const picked = new Map<number, string>()
    for (let ask = plan.next(); ask; ask = plan.next()) {
      const found = await claims.findDueDeliveries(trx, { origin: ask.origin, now: nowText, perWallet: ask.perWallet })
      for (const delivery of plan.take(ask, found, this.walletLoad)) picked.set(delivery.id, ask.origin)
    }
    if (plan.lookAgain) this.again = true
    this.limits.claimed(plan.pressed)
    this.waitingOrigins = plan.waiting
    // A webhook removed after this read cannot stop these attempts, as one already on the wire.
    const leasedNow = await claims.leaseDeliveries(trx, {
      ids: [...picked.keys()],
      now: nowText,
      leaseUntil: new Date(now + this.config.webhookTimeoutMs + LEASE_MARGIN_MS).toISOString(),
    })
    return leasedNow.map((claim) => ({ ...claim, origin: picked.get(claim.id) as string }))
  }

  /** Writes what changed in this worker's lease counts, in the round's transaction; returns them as they will be once it commits. */
  private async writeLeaseCounts(trx: Executor, live: Map<string, number>, claimed: Launch[]): Promise<Map<string, deliveries.LeaseCount>> {
    const change = leaseCountChange(this.leaseCounts, live, claimed, {
      unsure: this.leaseCountsUnsure,
      fallbackUntil: () => new Date(Date.now() + this.config.webhookTimeoutMs + LEASE_MARGIN_MS).toISOString(),
    })
    await deliveries.writeLeaseCounts(trx, this.instance, change)
    return change.after
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
      if (this.ended.length >= this.roundBatch || !this.claiming || this.slotsAwaited(end.claim.origin)) this.wake()
    })
  }

  /**
   * Whether `origin` has due deliveries waiting for slots and half of its attempts here have ended,
   * while fewer than a batch of endings are in flight (so endings alone could never start a round):
   * an origin held to a few slots is then served at its receiver's pace, not the poll's. Half, so
   * the receiver is not left idle while the round claims.
   */
  private slotsAwaited(origin: string): boolean {
    if (this.inFlight.size >= this.roundBatch || !this.waitingOrigins.has(origin)) return false
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
    const outcome = await this.sender.send(url, secret, work.event_id, work.payload)
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

  /** Writes a round's outcomes: the attempts in one statement, a delivery cancelled before anything was sent on its own (rare). */
  private async write(trx: Executor, ended: Ended[]): Promise<void> {
    const now = nowIso()
    const attempts: deliveries.AttemptRecord[] = []
    for (const end of ended) {
      const { claim } = end
      if (end.kind === 'cancelled') {
        await deliveries.settleDelivery(trx, claim, { status: 'cancelled', nextAttemptAt: null, now })
        continue
      }
      const { url, outcome } = end
      attempts.push({
        deliveryId: claim.id,
        leaseUntil: claim.lease_until,
        url,
        attemptedAt: end.attemptedAt,
        ...outcome,
        // Released at shutdown: counted and given back, due again at once.
        next: end.kind === 'released' ? undefined : nextState(claim.attempts + 1, outcome, this.config.webhookRetrySchedule),
      })
    }
    await deliveries.recordAttempts(trx, attempts, now)
  }
}
