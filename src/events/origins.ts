/**
 * Webhook delivery per receiving origin (`README.md` of this folder, "Delivery at scale"): what an
 * origin is, how one origin's due deliveries are shared out among its wallets, and the circuit
 * breaker that makes an origin that keeps failing back off alone. Pure rules, no I/O: the worker
 * (`delivery.worker.ts`) applies them, the tests drive them with a mocked clock.
 */

/** The origin (`scheme://host:port`, default ports left out) deliveries to `url` are queued and limited by. */
export function webhookOrigin(url: string): string {
  try {
    return new URL(url).origin
  } catch {
    return ''
  }
}

export interface DueDelivery {
  id: number
  wallet_id: number
  next_attempt_at: string
}

/**
 * Picks up to `slots` of `due` for one origin, one at a time, always from the wallet with the fewest
 * attempts in flight (`load`, counting the ones picked here), and on a tie the one whose next
 * delivery has waited longest. Each wallet's deliveries are taken oldest first. So a wallet with a
 * backlog of thousands gets its share of the origin's slots and no more, and a wallet with one
 * event waits for at most one slot to free up, whatever the others have queued.
 */
export function pickFairly(due: DueDelivery[], load: ReadonlyMap<number, number>, slots: number): DueDelivery[] {
  const queues = new Map<number, DueDelivery[]>()
  for (const delivery of [...due].sort(oldestFirst)) {
    const queue = queues.get(delivery.wallet_id)
    if (queue) queue.push(delivery)
    else queues.set(delivery.wallet_id, [delivery])
  }
  const taken = new Map<number, number>()
  const picked: DueDelivery[] = []
  while (picked.length < slots && queues.size > 0) {
    let best: { walletId: number; queue: DueDelivery[]; load: number } | undefined
    for (const [walletId, queue] of queues) {
      const current = (load.get(walletId) ?? 0) + (taken.get(walletId) ?? 0)
      if (!best || current < best.load || (current === best.load && oldestFirst(queue[0], best.queue[0]) < 0))
        best = { walletId, queue, load: current }
    }
    const chosen = best as { walletId: number; queue: DueDelivery[] }
    picked.push(chosen.queue.shift() as DueDelivery)
    taken.set(chosen.walletId, (taken.get(chosen.walletId) ?? 0) + 1)
    if (chosen.queue.length === 0) queues.delete(chosen.walletId)
  }
  return picked
}

function oldestFirst(a: DueDelivery, b: DueDelivery): number {
  return a.next_attempt_at < b.next_attempt_at ? -1 : a.next_attempt_at > b.next_attempt_at ? 1 : a.id - b.id
}

export type CircuitState = 'closed' | 'open' | 'half-open'

export interface CircuitOptions {
  /** Failed attempts in a row (no answer, 5xx or 429) that open an origin's circuit. */
  failureThreshold?: number
  /** How long a circuit stays open the first time; doubled each time it opens again without closing. */
  openMs?: number
  /** The longest a circuit stays open before it lets one attempt through. */
  maxOpenMs?: number
  /** The clock (milliseconds); mocked by the tests. */
  now?: () => number
  /** Told when an origin's circuit changes state (the worker logs it). */
  onChange?: (change: { origin: string; from: CircuitState; to: CircuitState; failures: number; openForMs?: number }) => void
}

interface Circuit {
  state: CircuitState
  /** Failed attempts in a row. */
  failures: number
  /** Times opened since it last closed: each opening lasts twice as long as the one before. */
  openings: number
  openUntil: number
  /** Half-open: the one attempt let through is in flight. */
  probing: boolean
}

const CIRCUIT_DEFAULTS = { failureThreshold: 5, openMs: 5_000, maxOpenMs: 300_000 }

/**
 * One circuit breaker per origin, in this instance. Closed: attempts flow, up to the origin's limit.
 * After `failureThreshold` failed attempts in a row it opens: nothing is started to that origin for
 * `openMs` (5 s, then 10 s, 20 s, … up to `maxOpenMs`, 5 min); its deliveries stay pending and
 * keep their place, and they spend no attempts from their retry schedule meanwhile. Then it is
 * half-open: one attempt goes through; an answer closes it, a failure opens it again for twice as
 * long. Any answer (even 4xx: the receiver is there, it refuses that event) closes it.
 */
export class OriginCircuits {
  readonly #circuits = new Map<string, Circuit>()
  readonly #threshold: number
  readonly #openMs: number
  readonly #maxOpenMs: number
  readonly #now: () => number
  readonly #onChange: NonNullable<CircuitOptions['onChange']>

  constructor(options: CircuitOptions = {}) {
    this.#threshold = options.failureThreshold ?? CIRCUIT_DEFAULTS.failureThreshold
    this.#openMs = options.openMs ?? CIRCUIT_DEFAULTS.openMs
    this.#maxOpenMs = options.maxOpenMs ?? CIRCUIT_DEFAULTS.maxOpenMs
    this.#now = options.now ?? Date.now
    this.#onChange = options.onChange ?? (() => {})
  }

  /** The origin's state now (an open circuit whose pause is over is half-open). */
  state(origin: string): CircuitState {
    const circuit = this.#circuits.get(origin)
    if (!circuit) return 'closed'
    if (circuit.state === 'open' && this.#now() >= circuit.openUntil) {
      circuit.state = 'half-open'
      circuit.probing = false
      this.#onChange({ origin, from: 'open', to: 'half-open', failures: circuit.failures })
    }
    return circuit.state
  }

  /** How many more attempts may start to `origin` now: unlimited when closed, none while open, one probe when half-open. */
  allowance(origin: string): number {
    switch (this.state(origin)) {
      case 'closed':
        return Number.POSITIVE_INFINITY
      case 'open':
        return 0
      case 'half-open':
        return (this.#circuits.get(origin) as Circuit).probing ? 0 : 1
    }
  }

  /** An attempt to `origin` starts (when half-open, it is the probe). */
  started(origin: string): void {
    const circuit = this.#circuits.get(origin)
    if (circuit && this.state(origin) === 'half-open') circuit.probing = true
  }

  /** An attempt to `origin` ended: `answered` when the receiver answered with anything but 5xx or 429. */
  finished(origin: string, answered: boolean): void {
    const circuit = this.#circuits.get(origin)
    if (answered) {
      if (!circuit) return
      this.#circuits.delete(origin)
      if (circuit.state !== 'closed') this.#onChange({ origin, from: circuit.state, to: 'closed', failures: circuit.failures })
      return
    }
    const current = circuit ?? { state: 'closed' as CircuitState, failures: 0, openings: 0, openUntil: 0, probing: false }
    this.#circuits.set(origin, current)
    current.failures += 1
    const state = this.state(origin)
    // An attempt started before the circuit opened may still fail while it is open: no change.
    if (state === 'open') return
    if (state === 'half-open' || current.failures >= this.#threshold) {
      const openForMs = Math.min(this.#maxOpenMs, this.#openMs * 2 ** current.openings)
      current.openings += 1
      current.state = 'open'
      current.openUntil = this.#now() + openForMs
      current.probing = false
      this.#onChange({ origin, from: state, to: 'open', failures: current.failures, openForMs })
    }
  }

  /** Origins whose circuit is not closed, with their state (for /metrics). */
  notClosed(): [string, CircuitState][] {
    const listed: [string, CircuitState][] = []
    for (const origin of [...this.#circuits.keys()]) {
      const state = this.state(origin)
      if (state !== 'closed') listed.push([origin, state])
    }
    return listed
  }
}

/**
 * Shares `total` slots among origins, max-min fairly: an origin that asks for no more than an equal
 * share of what is left gets all it asks for, and what it leaves is shared equally among the
 * others. Whole slots; when they do not divide evenly, the remainder goes one each to the first
 * origins in `asks` (the worker rotates that order round by round). So however long one origin's
 * backlog, and however slow its receiver, each of `n` origins with work can have `total / n` of
 * the instance's slots.
 */
export function shareSlots(asks: number[], total: number): number[] {
  const shares = asks.map(() => 0)
  let left = total
  let open = asks.flatMap((ask, index) => (ask > 0 ? [index] : []))
  while (left > 0 && open.length > 0) {
    const each = Math.floor(left / open.length)
    if (each === 0) {
      for (const index of open.slice(0, left)) shares[index] += 1
      break
    }
    const unsatisfied: number[] = []
    for (const index of open) {
      const given = Math.min(each, asks[index] - shares[index])
      shares[index] += given
      left -= given
      if (shares[index] < asks[index]) unsatisfied.push(index)
    }
    open = unsatisfied
  }
  return shares
}

export interface LimitOptions {
  /** The least an origin's limit falls to (at most `cap`). */
  floor: number
  /** The most an origin's limit grows to (`WEBHOOK_ORIGIN_CONCURRENCY`). */
  cap: number
  /** The clock (milliseconds); mocked by the tests. */
  now?: () => number
}

interface OriginLimit {
  limit: number
  /** The last claim for this origin left due deliveries behind because of this limit. */
  pressed: boolean
  /**
   * The origin's answer time when it is not loaded: the lowest of this window (`BASELINE_WINDOW_MS`,
   * from `windowStart`) and of the one before it.
   */
  windowMin: number
  previousMin: number
  windowStart: number
  /** When the limit was last cut: attempts started before then do not cut it again. */
  cutAt: number
}

/** An answer slower than this many times the origin's baseline, plus `SLOW_SLACK_MS`, says the receiver slows under the load. */
const SLOW_FACTOR = 2
/** Keeps a receiver answering in a few milliseconds from reading as slowed by a pause of this process. */
const SLOW_SLACK_MS = 20
/** The cut after a failed attempt (no answer, 5xx, 429), and after an answer slowed by the load. */
const FAILURE_CUT = 0.5
const SLOW_CUT = 0.9
/**
 * The baseline answer time is the lowest of the last one to two windows of this length: a receiver
 * that became slower for good (a change on its side) is read as overloaded for at most two windows.
 */
const BASELINE_WINDOW_MS = 30_000

/**
 * The in-flight limit of each origin, in this instance, adapted to how its receiver copes (AIMD:
 * additive increase, multiplicative decrease, as TCP's congestion window and Netflix's
 * concurrency-limits). Each origin starts at `floor`. An answer in good time (within twice the
 * origin's baseline answer time, its quickest of the last 30-60 s, plus 20 ms) raises the limit by one, while the origin has more
 * due than its limit lets out (`pressed`), up to `cap`: about doubling it each round trip, so a
 * receiver answering in 50 ms goes from 4 to 128 in well under a second. A failed attempt (no
 * answer, 5xx, 429) halves it; an answer slowed by the load (above that line) takes a tenth off;
 * either at most once per round trip (only attempts started after the last cut cut it again); an
 * answer slow although its attempt was sent at the floor sets the baseline instead. So
 * a receiver whose answers keep their pace gets as many requests as it takes, up to the cap, and
 * one that fails or slows down under the load is held near the floor. Every instance adapts its
 * own, and compares it with the leases of all of them: the cap holds over all instances.
 */
export class OriginLimits {
  readonly #limits = new Map<string, OriginLimit>()
  readonly #floor: number
  readonly #cap: number
  readonly #now: () => number

  constructor(options: LimitOptions) {
    this.#cap = options.cap
    this.#floor = Math.min(options.floor, options.cap)
    this.#now = options.now ?? Date.now
  }

  #get(origin: string): OriginLimit {
    let entry = this.#limits.get(origin)
    if (!entry) {
      entry = {
        limit: this.#floor,
        pressed: false,
        windowMin: Infinity,
        previousMin: Infinity,
        windowStart: this.#now(),
        cutAt: Number.NEGATIVE_INFINITY,
      }
      this.#limits.set(origin, entry)
    }
    return entry
  }

  /** The most attempts that may be in flight to `origin` now, over every instance. */
  limit(origin: string): number {
    return this.#limits.get(origin)?.limit ?? this.#floor
  }

  /** After a claim: the origins whose limit left due deliveries behind; every other origin is not pressed. */
  claimed(pressed: ReadonlySet<string>): void {
    for (const [origin, entry] of this.#limits) {
      entry.pressed = pressed.has(origin)
      // Back at the floor with nothing held back: forgotten, as an origin never seen (the map
      // keeps only the origins that are busy or were lately).
      if (!entry.pressed && entry.limit === this.#floor) this.#limits.delete(origin)
    }
    for (const origin of pressed) this.#get(origin).pressed = true
  }

  /**
   * An attempt to `origin`, started at `startedAt` (this clock), ended: `answered` when the
   * receiver answered with anything but 5xx or 429, after `latencyMs`.
   */
  finished(origin: string, attempt: { startedAt: number; answered: boolean; latencyMs: number }): void {
    const entry = this.#get(origin)
    if (!attempt.answered) return this.#cut(entry, attempt.startedAt, FAILURE_CUT)
    const now = this.#now()
    if (now - entry.windowStart >= BASELINE_WINDOW_MS) {
      entry.previousMin = now - entry.windowStart >= 2 * BASELINE_WINDOW_MS ? Infinity : entry.windowMin
      entry.windowMin = Infinity
      entry.windowStart = now
    }
    const baseline = Math.min(entry.windowMin, entry.previousMin)
    entry.windowMin = Math.min(entry.windowMin, attempt.latencyMs)
    if (attempt.latencyMs > SLOW_FACTOR * baseline + SLOW_SLACK_MS) {
      if (entry.limit > this.#floor || attempt.startedAt <= entry.cutAt) return this.#cut(entry, attempt.startedAt, SLOW_CUT)
      // Slow although sent at the floor, after the last cut: less load from here is not possible,
      // so it is not this load that slows the receiver; it is slower now (a change on its side, or
      // a busy machine). Its answer time is the baseline from now on, and the limit may grow again
      // (and be cut again if more load slows it further). Without this, a receiver that went from
      // 10 ms to 50 ms stayed at the floor for up to two windows, 30-60 s: what was queued for it
      // drained at 4 per round trip (`docs/performance.md`, "Webhooks at scale, round seven").
      entry.windowMin = attempt.latencyMs
      entry.previousMin = Infinity
      entry.windowStart = now
    }
    if (entry.pressed && entry.limit < this.#cap) entry.limit += 1
  }

  #cut(entry: OriginLimit, startedAt: number, factor: number): void {
    // Attempts sent before the last cut were sent at the limit it already corrected.
    if (startedAt <= entry.cutAt) return
    entry.limit = Math.max(this.#floor, Math.floor(entry.limit * factor))
    entry.cutAt = this.#now()
  }

  /** Every origin's limit (for /metrics). */
  entries(): [string, number][] {
    return [...this.#limits].map(([origin, entry]) => [origin, entry.limit])
  }
}
