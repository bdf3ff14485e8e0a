import type { FastifyBaseLogger } from 'fastify'
import { randomUUID } from 'node:crypto'
import client from 'prom-client'
import type { Transaction } from 'kysely'
import { Agent, request, type Dispatcher } from 'undici'
import type { Config } from '../config.ts'
import type { Database, Executor } from '../db/database.ts'
import type { DB } from '../db/tables.ts'
import { inTransaction, nowIso } from '../db/dialect.ts'
import { Backoff } from '../db/faults.ts'
import type { SecretsKey } from '../secrets/secret-box.ts'
import { webhookHeaders } from './signature.ts'
import { removeGoneWebhook } from './webhooks.service.ts'
import { openWebhookSecret } from './webhook-secrets.ts'
import { OriginCircuits, OriginLimits, pickFairly, shareSlots, type CircuitOptions } from './origins.ts'
import { AddressNotAllowedError, guardedLookup, ipLiteral, isLocalName, isPublicAddress } from './ssrf.ts'
import * as repo from './webhooks.repository.ts'
import { traceAttempt, type Tracing } from '../telemetry/tracing.ts'

export interface DeliveryWorkerOptions {
  database: Database
  config: Config
  /** Opens the webhook secrets, stored sealed. */
  secretsKey: SecretsKey
  log: FastifyBaseLogger
  /** Where the worker's metrics (attempts, in flight and circuits per origin) are registered (the app's /metrics). */
  registry?: client.Registry
  /** How often due deliveries are looked for. */
  pollMs?: number
  /** Traces each attempt, when traces are on. */
  tracing?: Tracing
  /** The clock of the circuit breakers and of the adaptive per-origin limits (the tests mock it); their settings come from `config`. */
  circuits?: Pick<CircuitOptions, 'now'>
}

/** The most of a response body that is read (then discarded) so the connection can be reused. */
const MAX_RESPONSE_BYTES = 64 * 1024
/** How much longer than one attempt's timeout a lease lasts before another instance may take the row. */
const LEASE_MARGIN_MS = 10_000
/** Shown to receivers; never varies with the deployment. */
const USER_AGENT = 'Coffer-Webhooks/1'
/** The attempt log's error for an attempt cut off by the service's shutdown. */
export const INTERRUPTED = 'interrupted: the service was shutting down'

/**
 * How many deliveries of each wallet one claim reads, relative to the origin's free slots shared
 * among its wallets: enough for the fair pick to fill the slots when a few wallets have all the
 * work, few enough that an origin with thousands of wallets reads about one row per wallet.
 */
const READ_AHEAD = 4

interface InFlight {
  walletId: number
  origin: string
  done: Promise<void>
}

interface Outcome {
  statusCode: number | null
  latencyMs: number
  error: string | null
}

/**
 * What became of an attempt, waiting for the next round to write it: `attempted` (logged, then
 * delivered, retried later or failed), `released` (cut off by the shutdown: logged and given back),
 * `cancelled` (the webhook was removed before anything was sent).
 */
type AttemptEnd = { claim: Launch } & (
  { kind: 'attempted' | 'released'; url: string; attemptedAt: string; outcome: Outcome } | { kind: 'cancelled' }
)
/** A claimed delivery about to be attempted, with what the attempt needs (undefined when the row is gone). */
type Launch = repo.LeasedDelivery & { origin: string }

/**
 * An attempt's end, queued, with what tells its attempt that it has been written; `removalFailed`
 * when it answered 410 and the webhook's removal failed (then a round writes it like any other).
 */
type Ended = AttemptEnd & { written: () => void; removalFailed?: true }

/** The receiver answered 410 Gone: the outcome is written with the webhook's removal, not in the round. */
function goneAnswer(end: Ended): end is Ended & { kind: 'attempted' } {
  return end.kind === 'attempted' && end.outcome.statusCode === 410 && !end.removalFailed
}

/**
 * The least time between the starts of two rounds. Each round that moves anything is a commit; on
 * SQLite a sync of the log, in the process, that holds up the transfers' own batched commits for a
 * few milliseconds: ten rounds a second at most keep that to a few percent. On PostgreSQL the
 * commit waits on the server, not in the process, but each round is still six to eight
 * statements (BEGIN, the claims' lock, the outcomes, the due origins, the due deliveries, the
 * lease, the work, COMMIT) on the database the transfers are limited by, about 1.7 ms of its time
 * with a slow origin's backlog of 3,000 (`pg_stat_statements`, `docs/performance.md`, "Webhooks
 * at scale, round four"). Attempts end all the time when a fast receiver and a slow one at its
 * limit are served side by side, so the gap was what bounded the rounds: 20 ms allowed 50 a
 * second, 50 ms allows 20, each moving more attempts (now it bounds them only where attempts end
 * by hundreds a second: `ROUND_BATCH_SHARE`). An attempt that ends waits half a gap on
 * average to be written and its slot reused: at 50 ms, 128 slots at a receiver answering in 50 ms
 * still turn over about 1,500 times a second.
 */
const ROUND_GAP_MS = { sqlite: 100, postgres: 50 }

/**
 * How many attempts must have ended before their ending alone starts a round: an eighth of the
 * instance's slots (`WEBHOOK_CONCURRENCY`, so 32 by default). Fewer wait for the next poll (at most
 * `pollMs`, 250 ms, away), which writes them and claims what is due. Beside an origin backed up at
 * its limit, attempts end one by one all the time (a 2 s receiver at 128 slots: 64 a second), and
 * every ending used to start a round as soon as the gap allowed, about 15 a second, each six to
 * eight statements moving a handful of deliveries: most of the worker's CPU (profiled: 60 ms a
 * second of the service's beside a 2 s origin, 35 after this and `armPoll` for as many
 * deliveries; `docs/performance.md`, "Webhooks at scale, round six").
 * When attempts end by hundreds a second (receivers answering in 50 ms), an eighth of the slots
 * ends within the gap and rounds still run every `ROUND_GAP_MS`, so throughput is unchanged; what
 * waits longer is a slot's reuse (its origin's limit grows to cover it) and, when few attempts
 * end, a new event's first attempt (at most one poll, as when nothing is in flight).
 */
const ROUND_BATCH_SHARE = 8

/** Seconds → milliseconds with ±20 % jitter, so retries of many deliveries do not arrive in lockstep. */
export function retryDelayMs(seconds: number, random = Math.random()): number {
  return Math.round(seconds * 1000 * (0.8 + 0.4 * random))
}

/**
 * Delivers queued webhook events: claims due rows under a lease, POSTs each signed
 * event, logs every attempt, and reschedules failures on `config.webhookRetrySchedule` until the
 * schedule runs out. Never throws out of its loop; a receiver that hangs, resets or answers with
 * megabytes costs at most one slot for `webhookTimeoutMs`.
 */
export class DeliveryWorker {
  private readonly db
  private readonly config: Config
  private readonly secretsKey: SecretsKey
  private readonly log: FastifyBaseLogger
  private readonly tracing: Tracing | undefined
  private readonly pollMs: number
  private readonly roundGapMs: number
  private readonly concurrency: number
  /** Attempts ended that start a round by themselves (`ROUND_BATCH_SHARE`). */
  private readonly roundBatch: number
  private readonly agent: Dispatcher
  private readonly shutdown = new AbortController()
  /** The controllers of the attempts on the wire, aborted at shutdown. */
  private readonly aborts = new Set<AbortController>()
  private readonly inFlight = new Map<number, InFlight>()
  /** Attempts in flight in this instance per wallet and per origin: the fair pick's load, and /metrics. */
  private readonly walletLoad = new Map<number, number>()
  private readonly originLoad = new Map<string, number>()
  private readonly circuits: OriginCircuits
  /** Each origin's in-flight limit, adapted to how its receiver copes, between `WEBHOOK_ORIGIN_MIN_CONCURRENCY` and `WEBHOOK_ORIGIN_CONCURRENCY`. */
  private readonly limits: OriginLimits
  private readonly now: () => number
  /** Which origin claims first next time: turns rotate so that none always comes first. */
  private turn = 0
  private readonly attemptsTotal: client.Counter<'outcome'>
  /** Rounds run (each one database transaction): how often the worker commits, for /metrics and the bench. */
  private readonly roundsTotal: client.Counter
  /** The next poll (`armPoll`). */
  private timer: NodeJS.Timeout | undefined
  private ticking: Promise<void> | undefined
  private again = false
  private running = false
  private claiming = false
  private lastRound = 0
  private waiting: NodeJS.Timeout | undefined
  /** Attempts that ended, waiting for the next round to write them. */
  private readonly ended: Ended[] = []
  /**
   * The origins whose last claim left due deliveries behind (their limit, or their share of the
   * slots, let out less than was due) and whose circuit is not open: once half of the attempts
   * one of them has in flight here have ended, a round starts without waiting for `roundBatch`
   * (while fewer than that are in flight: `slotsAwaited`).
   */
  private waitingOrigins = new Set<string>()
  /** Through a storage outage, claiming pauses for longer and longer, and logs only its start and end. */
  private readonly backoff = new Backoff()
  /** This worker's name in `webhook_lease_counts`: a new one at each start of the process. */
  private readonly instance = randomUUID()
  /** This worker's rows of `webhook_lease_counts` as last committed, per origin. */
  private leaseCounts = new Map<string, repo.LeaseCount>()
  /** A round failed after it may have written them: the next one writes every row again. */
  private leaseCountsUnsure = false

  constructor(options: DeliveryWorkerOptions) {
    this.db = options.database.db
    this.config = options.config
    this.secretsKey = options.secretsKey
    this.log = options.log
    this.tracing = options.tracing
    this.pollMs = options.pollMs ?? 250
    this.roundGapMs = ROUND_GAP_MS[options.database.dialect]
    this.concurrency = this.config.webhookConcurrency
    this.roundBatch = Math.max(1, Math.floor(this.concurrency / ROUND_BATCH_SHARE))
    this.now = options.circuits?.now ?? Date.now
    this.limits = new OriginLimits({
      floor: this.config.webhookOriginMinConcurrency,
      cap: this.config.webhookOriginConcurrency,
      now: this.now,
    })
    this.circuits = new OriginCircuits({
      failureThreshold: this.config.webhookCircuitFailures,
      openMs: this.config.webhookCircuitOpenMs,
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
    const registers = options.registry ? [options.registry] : []
    this.attemptsTotal = new client.Counter({
      name: 'coffer_webhook_attempts_total',
      help: 'Webhook delivery attempts by outcome: delivered (2xx), failed (anything else), released (given back at shutdown)',
      labelNames: ['outcome'],
      registers,
    })
    this.roundsTotal = new client.Counter({
      name: 'coffer_webhook_rounds_total',
      help: 'Rounds of the webhook worker that wrote outcomes or claimed deliveries (each one database transaction)',
      registers,
    })
    // In all, never per origin: an origin label would name users' webhook hosts to whoever reads /metrics.
    const originLoad = this.originLoad
    new client.Gauge({
      name: 'coffer_webhook_in_flight',
      help: 'Webhook attempts in flight in this instance',
      registers,
      collect() {
        let sum = 0
        for (const count of originLoad.values()) sum += count
        this.set(sum)
      },
    })
    const limits = this.limits
    new client.Gauge({
      name: 'coffer_webhook_lowest_origin_limit',
      help: 'Lowest in-flight limit of a busy receiving origin, adapted to its answers (this instance; no series while none is busy)',
      registers,
      collect() {
        this.reset()
        const lowest = Math.min(...limits.entries().map(([, limit]) => limit))
        if (Number.isFinite(lowest)) this.set(lowest)
      },
    })
    const circuits = this.circuits
    new client.Gauge({
      name: 'coffer_webhook_circuits',
      help: 'Receiving origins whose circuit is not closed in this instance: open (nothing sent) or half_open (one attempt let through)',
      labelNames: ['state'],
      registers,
      collect() {
        const counts = { open: 0, half_open: 0 }
        for (const [, state] of circuits.notClosed()) counts[state === 'open' ? 'open' : 'half_open']++
        this.set({ state: 'open' }, counts.open)
        this.set({ state: 'half_open' }, counts.half_open)
      },
    })
    const timeout = this.config.webhookTimeoutMs
    // One keep-alive pool per origin (undici's Agent keys its pools by origin), as wide as the
    // origins' cap. Every new connection goes through the guarded lookup, which connects to the
    // addresses it checked; a kept-alive connection stays with the address it was opened to.
    this.agent = new Agent({
      connect: { timeout, ...(this.config.webhookAllowPrivate ? {} : { lookup: guardedLookup }) },
      headersTimeout: timeout,
      bodyTimeout: timeout,
      connections: this.config.webhookOriginConcurrency,
      keepAliveTimeout: 4_000,
    })
  }

  start(): void {
    if (this.running) return
    this.running = true
    this.claiming = true
    this.armPoll()
    // Rows of workers that died, lapsed: they count nothing any more, so they can go.
    repo
      .clearLeaseCounts(this.db, { now: nowIso() })
      .catch((error) => this.log.warn({ err: error }, 'webhook worker: clearing lapsed lease counts failed'))
    this.wake()
  }

  /**
   * Runs a round soon (after a manual retry, at each poll, when `roundBatch` attempts have
   * ended): writes what ended, claims what is due. Rounds start at least `ROUND_GAP_MS` apart, so
   * that attempts ending close together share one commit.
   */
  wake(): void {
    if (!this.running) return
    if (this.ticking) {
      this.again = true
      return
    }
    if (this.waiting) return
    const wait = this.lastRound + this.roundGapMs - Date.now()
    if (wait > 0) {
      this.waiting = setTimeout(() => {
        this.waiting = undefined
        this.wake()
      }, wait)
      this.waiting.unref()
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

  /**
   * The next poll comes `pollMs` after the start of the last round, however that round was
   * started: a round that attempts started a moment before the poll would have come does its
   * work, so the two do not add up. Beside a backed-up origin (about 110 attempts ending a second,
   * a round per 32 of them) rounds came from both, about 7 a second; now from whichever comes
   * first, about 4. A new event still waits at most `pollMs` for its first claim.
   */
  private armPoll(): void {
    clearTimeout(this.timer)
    this.timer = setTimeout(() => this.wake(), this.pollMs)
    this.timer.unref()
  }

  /**
   * Stops claiming, lets attempts in flight finish for up to `graceMs` (half the attempt timeout,
   * at most 5 s), then aborts the rest, logs them as attempts and gives their leases back, so
   * another instance takes them at once. The receiver may then see that event twice.
   */
  async stop(graceMs = Math.min(this.config.webhookTimeoutMs / 2, 5_000)): Promise<void> {
    if (!this.running) return
    // Rounds go on without claiming, so that what ends is still written.
    this.claiming = false
    clearTimeout(this.timer)
    // Attempts over whose outcomes wait for a round (fewer than `roundBatch`) are written now.
    this.wake()
    const pending = [...this.inFlight.values()].map((entry) => entry.done)
    if (pending.length > 0) {
      let timer: NodeJS.Timeout | undefined
      await Promise.race([Promise.allSettled(pending), new Promise((resolve) => (timer = setTimeout(resolve, graceMs)))])
      clearTimeout(timer)
      this.shutdown.abort(new Error('shutting down'))
      for (const controller of this.aborts) controller.abort()
      await Promise.allSettled(pending)
    }
    this.running = false
    clearTimeout(this.waiting)
    await this.ticking
    // Nothing of ours is in flight any more; should this fail, our rows lapse with their leases.
    await repo.clearLeaseCounts(this.db, { instance: this.instance, now: nowIso() }).catch(() => {})
    await this.agent.destroy().catch(() => {})
  }

  /**
   * One round, in one database transaction (so one commit, one sync of SQLite's log, however many
   * deliveries it moves): the outcomes of the attempts that ended since the last round are written,
   * then due deliveries are claimed for the slots free. If storage fails, the outcomes stay queued
   * (their attempts keep their slots) and the round is tried again with backoff.
   */
  private async round(): Promise<void> {
    if (!this.backoff.ready()) {
      // Attempts that ended still wait to be written, also once the poll has stopped (shutdown).
      if (this.ended.length > 0) setTimeout(() => this.wake(), this.pollMs).unref()
      return
    }
    const ended = this.ended.splice(0)
    const free = this.claiming ? this.concurrency - (this.inFlight.size - ended.length) : 0
    if (ended.length === 0 && free <= 0) return
    const written = ended.filter((end) => !goneAnswer(end))
    // This worker's attempts whose leases still count once this round's outcomes are written: in
    // flight, or over but not written yet (a 410's outcome is written with the webhook's removal).
    const live = new Map(this.originLoad)
    for (const end of written) adjust(live, end.claim.origin, -1)
    let claims: Launch[] = []
    let counts: Map<string, repo.LeaseCount> | undefined
    try {
      // Nothing to write: whether anything is due is asked first, outside a transaction, so that a
      // poll with nothing due costs one statement instead of four (BEGIN, the lock, the look, COMMIT).
      if (ended.length > 0 || (await repo.listDueOrigins(this.db, nowIso())).length > 0) {
        ;[claims, counts] = await inTransaction(this.db, async (trx) => {
          await repo.startRound(trx, { claims: free > 0 })
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
      this.roundsTotal.inc()
      this.leaseCounts = counts
      this.leaseCountsUnsure = false
    }
    if (this.backoff.succeeded()) this.log.info('webhook worker: writing and claiming deliveries again')
    /** `wallet url` of the webhooks removed below: what was just claimed for them is not sent. */
    const gone = new Set<string>()
    for (const end of ended) {
      if (!goneAnswer(end)) {
        end.written()
        continue
      }
      // The receiver says this endpoint is gone for good: the attempt's outcome, the webhook's
      // removal (unless it was replaced meanwhile) and the cancellation of everything still queued
      // for it commit together, in a transaction of their own that waits for the wallet's moves in
      // progress; so the delivery never reads failed while the webhook is still set. Should that
      // fail, the next round writes the outcome alone, and the next 410 tries the removal again.
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
    for (const claim of claims) {
      // Its work was read before that removal: it ends as cancelled, as it would have read it after.
      const removed = claim.work && gone.has(`${claim.wallet_id} ${claim.work.url}`)
      this.launch(removed ? { ...claim, work: { ...(claim.work as repo.DeliveryWork), url: null, secret: null } } : claim)
    }
  }

  /**
   * In a round opened with the claims' lock (`repo.startRound`), leases up to `free` due deliveries,
   * origin by origin (starting with a different origin each time): each origin gets what its
   * adaptive limit (`OriginLimits`) leaves once the leases of every instance are counted, what its
   * circuit allows, and no more of this instance's slots than its fair share (`shareSlots`: a
   * slow origin that could take them all leaves each other origin with work its share); within
   * an origin, `pickFairly` shares the slots among its wallets. `ended`: attempts over but not yet
   * written, whose slots are free; `live`: this worker's leases that still count, per origin.
   */
  private async claim(trx: Transaction<DB>, free: number, ended: Ended[], live: Map<string, number>): Promise<Launch[]> {
    // Made here: `inTransaction` may run the round again after a serialization failure.
    const picked = new Map<number, string>()
    const now = Date.now()
    const nowText = new Date(now).toISOString()
    const { due, leased: others } = await repo.findDueOriginsAndLeases(trx, { now: nowText, instance: this.instance })
    if (due.length === 0) {
      this.waitingOrigins.clear()
      return []
    }
    // Every worker's leases per origin: the others' from the database, this one's as it knows them.
    const leased = new Map(others)
    for (const [origin, count] of live) adjust(leased, origin, count)
    const first = this.turn++ % due.length
    const origins = [...due.slice(first), ...due.slice(0, first)]
    // What each origin holds in this instance (its attempts still on the wire), and what it may
    // take more: its limit less every instance's leases, and what its circuit lets through.
    const held = new Map(this.originLoad)
    for (const end of ended) adjust(held, end.claim.origin, -1)
    const room = origins.map(({ origin }) =>
      Math.min(this.limits.limit(origin) - (leased.get(origin) ?? 0), this.circuits.allowance(origin)),
    )
    const dueOrigins = new Set(due.map((entry) => entry.origin))
    const busy = [...held].filter(([origin]) => !dueOrigins.has(origin))
    const shares = shareSlots(
      [...origins.map(({ origin }, i) => (held.get(origin) ?? 0) + Math.max(0, room[i])), ...busy.map(([, count]) => count)],
      this.concurrency,
    )
    /** The origins whose limit left due deliveries behind: their limits may grow. */
    const pressed = new Set<string>()
    /** The origins that left due deliveries behind for any reason, but an open circuit (`waitingOrigins`). */
    const waiting = new Set<string>()
    let left = free
    for (let i = 0; i < origins.length && left > 0; i++) {
      const { origin, wallets } = origins[i]
      const byLimit = this.limits.limit(origin) - (leased.get(origin) ?? 0)
      const slots = Math.min(left, room[i], shares[i] - (held.get(origin) ?? 0))
      if (slots <= 0) {
        if (byLimit <= 0) pressed.add(origin)
        if (this.circuits.allowance(origin) > 0) waiting.add(origin)
        continue
      }
      const perWallet = Math.min(slots, Math.ceil((READ_AHEAD * slots) / wallets))
      const found = await repo.findDueDeliveries(trx, { origin, now: nowText, perWallet })
      const chosen = pickFairly(found, this.walletLoad, slots)
      for (const delivery of chosen) picked.set(delivery.id, origin)
      left -= chosen.length
      const moreDue = found.length > chosen.length || countPerWallet(found).some((count) => count >= perWallet)
      if (moreDue && chosen.length >= byLimit) pressed.add(origin)
      if (moreDue) waiting.add(origin)
      // Slots left over while some wallet had more than was read: look again at once.
      if (chosen.length < slots && countPerWallet(found).some((count) => count >= perWallet)) this.again = true
    }
    this.limits.claimed(pressed)
    this.waitingOrigins = waiting
    // Leased with what the attempts need, read under the lease just taken. A webhook removed after
    // this read cancels the delivery but cannot stop this attempt, as an attempt already on the
    // wire (the removal's own turn makes it wait for this transaction to end).
    const claims = await repo.leaseDeliveries(trx, {
      ids: [...picked.keys()],
      now: nowText,
      leaseUntil: new Date(now + this.config.webhookTimeoutMs + LEASE_MARGIN_MS).toISOString(),
    })
    return claims.map((claim) => ({ ...claim, origin: picked.get(claim.id) as string }))
  }

  /**
   * Writes what changed in this worker's rows of `webhook_lease_counts` (`repo.writeLeaseCounts`),
   * in the round's transaction: per origin, the leases that still count (`live`) and those just
   * taken, until the newest of them ends. Returns the rows as they will be once it commits.
   */
  private async writeLeaseCounts(trx: Executor, live: Map<string, number>, claimed: Launch[]): Promise<Map<string, repo.LeaseCount>> {
    const leased = new Map(live)
    const newest = new Map<string, string>()
    for (const claim of claimed) {
      adjust(leased, claim.origin, 1)
      newest.set(claim.origin, claim.lease_until)
    }
    const before = this.leaseCounts
    const after = new Map<string, repo.LeaseCount>()
    for (const [origin, count] of leased) {
      if (count <= 0) continue
      // Every lease of this worker at an origin was taken by one of its rounds, so a count always
      // has a lease end; the fallback is the longest a lease taken now could last.
      const leaseUntil =
        newest.get(origin) ??
        before.get(origin)?.leaseUntil ??
        new Date(Date.now() + this.config.webhookTimeoutMs + LEASE_MARGIN_MS).toISOString()
      after.set(origin, { origin, leased: count, leaseUntil })
    }
    const unsure = this.leaseCountsUnsure
    const counts = [...after.values()].filter(
      (count) => unsure || before.get(count.origin)?.leased !== count.leased || before.get(count.origin)?.leaseUntil !== count.leaseUntil,
    )
    const gone = [...before.keys()].filter((origin) => !after.has(origin))
    await repo.writeLeaseCounts(trx, this.instance, { counts, gone, keepOnly: unsure ? [...after.keys()] : undefined })
    return after
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
    this.inFlight.set(claim.id, { walletId, origin, done })
  }

  /** Queues what became of an attempt for the next round to write, and waits until it is written. */
  private finish(end: AttemptEnd): Promise<void> {
    return new Promise((resolve) => {
      this.ended.push({ ...end, written: resolve })
      // A few ended attempts wait for the next poll (`ROUND_BATCH_SHARE`), unless their origin has
      // more due that waits for their slots; once the poll has stopped (shutdown), each is written at once.
      if (this.ended.length >= this.roundBatch || !this.claiming || this.slotsAwaited(end.claim.origin)) this.wake()
    })
  }

  /**
   * Whether `origin` has due deliveries waiting for slots and half of its attempts in flight here
   * have ended (`originLoad` counts them until they are written), while fewer attempts than
   * `roundBatch` are in flight in this instance, so that their endings can never start a round
   * by themselves. An origin held to fewer slots (its adaptive limit cut, or a low
   * `WEBHOOK_ORIGIN_CONCURRENCY`) otherwise sent that many per poll once the load stopped: 4 per
   * 250 ms at the floor, 16 a second, however fast its receiver. Half, not all: a round then
   * claims for the half that ended while the other half is on the wire, so the receiver is not
   * left idle for a whole round.
   */
  private slotsAwaited(origin: string): boolean {
    // With a batch of endings or more in flight, the batch starts the rounds (or the poll does,
    // beside an origin backed up at 2 s): starting more here would bring back a round per few
    // endings there, paid by the transfers.
    if (this.inFlight.size >= this.roundBatch || !this.waitingOrigins.has(origin)) return false
    let ended = 0
    for (const end of this.ended) if (end.claim.origin === origin) ended++
    return 2 * ended >= (this.originLoad.get(origin) ?? 0)
  }

  private async attempt(claim: Launch): Promise<void> {
    const { work } = claim
    if (!work) return
    if (work.url === null || work.secret === null) {
      // The webhook was removed after the event was queued: nothing may be sent any more.
      return this.finish({ claim, kind: 'cancelled' })
    }
    const url = work.url
    const attemptedAt = nowIso()
    const startedAt = this.now()
    let secret: string
    try {
      secret = openWebhookSecret(this.secretsKey, claim.wallet_id, work.secret)
    } catch (error) {
      // Another SECRETS_KEY than the one the secret was sealed with (a rotation this instance has
      // not been restarted for): nothing can be signed; the attempt fails and is retried later.
      this.log.error(
        { delivery: claim.id, reason: (error as Error).message },
        'webhook worker: the webhook secret cannot be opened with this SECRETS_KEY',
      )
      return this.finish({
        claim,
        kind: 'attempted',
        url,
        attemptedAt,
        outcome: {
          statusCode: null,
          latencyMs: 0,
          error: "not sent: the webhook secret cannot be opened with this instance's SECRETS_KEY",
        },
      })
    }
    const outcome = await traceAttempt(this.tracing, claim.attempts + 1, () => this.send(url, secret, work.event_id, work.payload))
    if (this.shutdown.signal.aborted && outcome.statusCode === null) {
      // Cut off by the shutdown: the receiver may have seen it, so it is logged like any attempt
      // (every attempt is), and the delivery is given back, due again at once rather than after a backoff.
      this.attemptsTotal.inc({ outcome: 'released' })
      return this.finish({ claim, kind: 'released', url, attemptedAt, outcome: { ...outcome, error: INTERRUPTED } })
    }
    this.circuits.finished(claim.origin, answered(outcome))
    this.limits.finished(claim.origin, { startedAt, answered: answered(outcome), latencyMs: outcome.latencyMs })
    const ok = outcome.statusCode !== null && outcome.statusCode >= 200 && outcome.statusCode < 300
    this.attemptsTotal.inc({ outcome: ok ? 'delivered' : 'failed' })
    return this.finish({ claim, kind: 'attempted', url, attemptedAt, outcome })
  }

  /** One POST. Never throws: every failure becomes an Outcome with an error text for the log. */
  private async send(url: string, secret: string, eventId: string, body: string): Promise<Outcome> {
    const started = performance.now()
    const elapsed = () => Math.round(performance.now() - started)
    const timeoutMs = this.config.webhookTimeoutMs
    // One controller per attempt, aborted by its own timer or by the shutdown (`stop`, through
    // `aborts`). A signal composed per attempt with `AbortSignal.any` over `AbortSignal.timeout` and
    // the shutdown's cost about 15 µs more of the service's CPU per attempt (undici POSTs to a
    // receiver on 127.0.0.1, 6,000 per variant, the variants taking turns five times: 127-165 µs
    // against 121-129 µs per request, sender and receiver in one process, 93-128 µs with no signal).
    const controller = new AbortController()
    const signal = controller.signal
    const timer = setTimeout(() => controller.abort(), timeoutMs)
    timer.unref()
    if (this.shutdown.signal.aborted) controller.abort()
    this.aborts.add(controller)
    try {
      if (!this.config.webhookAllowPrivate) checkLiteralHost(new URL(url).hostname)
      const response = await request(url, {
        dispatcher: this.agent,
        method: 'POST',
        headers: { 'content-type': 'application/json', 'user-agent': USER_AGENT, ...webhookHeaders(secret, eventId, body) },
        body,
        signal,
      })
      const latencyMs = elapsed()
      // The answer is the status; the body is read only so the connection can be reused.
      await response.body.dump({ limit: MAX_RESPONSE_BYTES, signal }).catch(() => {})
      const statusCode = response.statusCode
      let error: string | null = null
      if (statusCode >= 300 && statusCode < 400) error = 'redirects are not followed'
      else if (statusCode === 410) error = 'the receiver answered 410 Gone: webhook removed'
      else if (statusCode < 200 || statusCode >= 300) error = `the receiver answered ${statusCode}`
      return { statusCode, latencyMs, error }
    } catch (error) {
      return { statusCode: null, latencyMs: elapsed(), error: describeFailure(error, timeoutMs, signal) }
    } finally {
      clearTimeout(timer)
      this.aborts.delete(controller)
    }
  }

  /**
   * Writes what became of a round's attempts, in the round's transaction: the attempts, logged and
   * counted on their deliveries, in one statement for all (`repo.recordAttempts`); a delivery
   * found cancelled before anything was sent (its webhook removed), settled on its own (rare).
   */
  private async write(trx: Executor, ended: Ended[]): Promise<void> {
    const now = nowIso()
    const attempts: repo.AttemptRecord[] = []
    for (const end of ended) {
      const { claim } = end
      if (end.kind === 'cancelled') {
        await repo.settleDelivery(trx, claim, { status: 'cancelled', nextAttemptAt: null, now })
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
        next: end.kind === 'released' ? undefined : this.nextState(claim.attempts + 1, outcome),
      })
    }
    await repo.recordAttempts(trx, attempts, now)
  }

  /** After `attempts` attempts, the last with `outcome`: delivered (2xx), failed (410, or the schedule used up), or pending until the next retry. */
  private nextState(attempts: number, outcome: Outcome): { status: repo.DeliveryStatus; nextAttemptAt: string | null } {
    if (outcome.statusCode !== null && outcome.statusCode >= 200 && outcome.statusCode < 300)
      return { status: 'delivered', nextAttemptAt: null }
    const schedule = this.config.webhookRetrySchedule
    if (outcome.statusCode === 410 || attempts > schedule.length) return { status: 'failed', nextAttemptAt: null }
    return { status: 'pending', nextAttemptAt: new Date(Date.now() + retryDelayMs(schedule[attempts - 1])).toISOString() }
  }
}

/** The receiver is there and coping: it answered, with anything but 5xx or 429 (Too Many Requests). */
function answered(outcome: Outcome): boolean {
  return outcome.statusCode !== null && outcome.statusCode < 500 && outcome.statusCode !== 429
}

function adjust<K>(counts: Map<K, number>, key: K, by: number): void {
  const next = (counts.get(key) ?? 0) + by
  if (next === 0) counts.delete(key)
  else counts.set(key, next)
}

function countPerWallet(due: { wallet_id: number }[]): number[] {
  const counts = new Map<number, number>()
  for (const delivery of due) adjust(counts, delivery.wallet_id, 1)
  return [...counts.values()]
}

/** Literal IP hosts never reach the resolver, so they are checked here. */
function checkLiteralHost(hostname: string): void {
  const literal = ipLiteral(hostname)
  if (literal !== undefined && !isPublicAddress(literal)) throw new AddressNotAllowedError(hostname, literal)
  if (literal === undefined && isLocalName(hostname)) throw new AddressNotAllowedError(hostname)
}

function errorCode(error: unknown): string | undefined {
  let current: unknown = error
  for (let depth = 0; depth < 4 && current; depth++) {
    const code = (current as { code?: unknown }).code
    if (typeof code === 'string') return code
    current = (current as { cause?: unknown }).cause
  }
  return undefined
}

/** A short, secret-free text for the attempt log. */
function describeFailure(error: unknown, timeoutMs: number, signal: AbortSignal): string {
  if (error instanceof AddressNotAllowedError) return `refused: ${error.message}`
  const code = errorCode(error)
  if (code === 'ERR_WEBHOOK_ADDRESS_NOT_ALLOWED') return `refused: ${(error as Error).message}`
  if (signal.aborted || code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT' || code === 'UND_ERR_CONNECT_TIMEOUT') {
    return `no answer within ${timeoutMs} ms`
  }
  switch (code) {
    case 'ECONNREFUSED':
      return 'connection refused'
    case 'ECONNRESET':
    case 'UND_ERR_SOCKET':
    case 'EPIPE':
      return 'connection reset by the receiver'
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
    case 'EAI_NONAME':
      return 'host name not found'
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
      return 'host unreachable'
  }
  if (code && /CERT|TLS|SSL/i.test(code)) return `TLS error (${code})`
  const message = error instanceof Error ? error.message : String(error)
  return (code ? `${code}: ${message}` : message).slice(0, 200)
}
