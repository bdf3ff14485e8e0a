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
    new client.Gauge({
      name: 'coffer_webhook_in_flight',
      help: 'Webhook attempts in flight in this instance, per receiving origin',
      labelNames: ['origin'],
      registers,
      collect() {
        this.reset()
        for (const [origin, count] of state.inFlight) this.set({ origin }, count)
      },
    })
    new client.Gauge({
      name: 'coffer_webhook_origin_limit',
      help: 'In-flight limit of each busy receiving origin, adapted to its answers (this instance; at most WEBHOOK_ORIGIN_CONCURRENCY)',
      labelNames: ['origin'],
      registers,
      collect() {
        this.reset()
        for (const [origin, limit] of state.limits.entries()) this.set({ origin }, limit)
      },
    })
    new client.Gauge({
      name: 'coffer_webhook_circuit_open',
      help: 'Origins whose circuit is not closed in this instance: 1 open (nothing sent), 0.5 half-open (one attempt let through)',
      labelNames: ['origin'],
      registers,
      collect() {
        this.reset()
        for (const [origin, circuit] of state.circuits.notClosed()) this.set({ origin }, circuit === 'open' ? 1 : 0.5)
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
