/** Per receiving origin: what it is, its circuit breaker and its adaptive in-flight limit. Pure rules, no I/O. */

/** The origin (`scheme://host:port`, default ports left out) deliveries to `url` are queued and limited by. */
export function webhookOrigin(url: string): string {
  try {
    return new URL(url).origin
  } catch {
    return ''
  }
}

export type CircuitState = 'closed' | 'open' | 'half-open'

export interface CircuitOptions {
  failureThreshold?: number
  openMs?: number
  maxOpenMs?: number
  /** The clock (milliseconds); mocked by the tests. */
  now?: () => number
  onChange?: (change: { origin: string; from: CircuitState; to: CircuitState; failures: number; openForMs?: number }) => void
}

interface Circuit {
  state: CircuitState
  /** Failed attempts in a row, and times opened since it last closed. */
  failures: number
  openings: number
  openUntil: number
  /** Half-open: the one attempt let through is in flight. */
  probing: boolean
}

const CIRCUIT_DEFAULTS = { failureThreshold: 5, openMs: 5_000, maxOpenMs: 300_000 }

/**
 * A circuit per origin: opens after `failureThreshold` failures in a row (deliveries keep their place
 * and retries), then lets one attempt through; any answer closes it, a failure reopens it for longer.
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

export interface LimitOptions {
  /** The least and the most an origin's limit can be (`WEBHOOK_ORIGIN_MIN_CONCURRENCY`, `WEBHOOK_ORIGIN_CONCURRENCY`). */
  floor: number
  cap: number
  now?: () => number
}

interface OriginLimit {
  limit: number
  /** The last claim for this origin left due deliveries behind because of this limit. */
  pressed: boolean
  /** The origin's unloaded answer time: the lowest of this window and the one before. */
  windowMin: number
  previousMin: number
  windowStart: number
  /** When the limit was last cut: attempts started before then do not cut it again. */
  cutAt: number
}

/** An answer slower than this many times the baseline, plus `SLOW_SLACK_MS`, says the receiver slows under the load. */
const SLOW_FACTOR = 2
/** Keeps a receiver answering in a few milliseconds from reading as slowed by a pause of this process. */
const SLOW_SLACK_MS = 20
/** The cuts after a failure and after an answer slowed by the load. */
const FAILURE_CUT = 0.5
const SLOW_CUT = 0.9
/** A receiver slower for good is read as overloaded for at most two windows of this length. */
const BASELINE_WINDOW_MS = 30_000

/**
 * Each origin's in-flight limit, adapted as TCP's window (AIMD) between `floor` and `cap`: a timely
 * answer adds one, a failure halves it, an answer slowed by the load takes a tenth off.
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
      // Back at the floor with nothing held back: forgotten, so the map keeps only busy origins.
      if (!entry.pressed && entry.limit === this.#floor) this.#limits.delete(origin)
    }
    for (const origin of pressed) this.#get(origin).pressed = true
  }

  /** An attempt to `origin` started at `startedAt` (this clock) ended; `answered`: anything but no answer, 5xx or 429. */
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
      // Slow even at the floor: the receiver is slower now, so this becomes the baseline.
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
