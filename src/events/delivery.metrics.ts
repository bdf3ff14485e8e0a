import type { FastifyBaseLogger } from 'fastify'
import client from 'prom-client'
import type { CircuitOptions, OriginCircuits, OriginLimits } from './origins.ts'

/** Logs the circuits' changes: an opening as a warning, a closing as information. */
export function logCircuitChange(log: FastifyBaseLogger): NonNullable<CircuitOptions['onChange']> {
  return ({ origin, from, to, failures, openForMs }) => {
    if (to === 'open' && from === 'closed')
      log.warn(
        { origin, failures, open_for_ms: openForMs },
        'webhook worker: circuit opened for an origin that keeps failing; its deliveries wait',
      )
    else if (to === 'closed') log.info({ origin }, 'webhook worker: circuit closed; the origin answers again')
    else log.debug({ origin, from, to, open_for_ms: openForMs }, 'webhook worker: circuit state changed')
  }
}

/** The delivery worker's collectors on /metrics; the gauges read the worker's state when scraped. */
export class DeliveryMetrics {
  readonly #attempts: client.Counter<'outcome'>
  readonly #rounds: client.Counter

  constructor(
    registry: client.Registry | undefined,
    state: { inFlight: ReadonlyMap<string, number>; limits: OriginLimits; circuits: OriginCircuits },
  ) {
    const registers = registry ? [registry] : []
    this.#attempts = new client.Counter({
      name: 'coffer_webhook_attempts_total',
      help: 'Webhook delivery attempts by outcome: delivered (2xx), failed (anything else), released (given back at shutdown)',
      labelNames: ['outcome'],
      registers,
    })
    this.#rounds = new client.Counter({
      name: 'coffer_webhook_rounds_total',
      help: 'Rounds of the webhook worker that wrote outcomes or claimed deliveries (each one database transaction)',
      registers,
    })
    // In all, never per origin: an origin label would name users' webhook hosts to whoever reads /metrics.
    new client.Gauge({
      name: 'coffer_webhook_in_flight',
      help: 'Webhook attempts in flight in this instance',
      registers,
      collect() {
        let sum = 0
        for (const count of state.inFlight.values()) sum += count
        this.set(sum)
      },
    })
    new client.Gauge({
      name: 'coffer_webhook_lowest_origin_limit',
      help: 'Lowest in-flight limit of a busy receiving origin, adapted to its answers (this instance; no series while none is busy)',
      registers,
      collect() {
        this.reset()
        const lowest = Math.min(...state.limits.entries().map(([, limit]) => limit))
        if (Number.isFinite(lowest)) this.set(lowest)
      },
    })
    new client.Gauge({
      name: 'coffer_webhook_circuits',
      help: 'Receiving origins whose circuit is not closed in this instance: open (nothing sent) or half_open (one attempt let through)',
      labelNames: ['state'],
      registers,
      collect() {
        const counts = { open: 0, half_open: 0 }
        for (const [, circuit] of state.circuits.notClosed()) counts[circuit === 'open' ? 'open' : 'half_open']++
        this.set({ state: 'open' }, counts.open)
        this.set({ state: 'half_open' }, counts.half_open)
      },
    })
  }

  attempted(outcome: 'delivered' | 'failed' | 'released'): void {
    this.#attempts.inc({ outcome })
  }

  /** A round committed. */
  roundRun(): void {
    this.#rounds.inc()
  }
}
