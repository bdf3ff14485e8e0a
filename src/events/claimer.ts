import { randomUUID } from 'node:crypto'
import type { Transaction } from 'kysely'
import type { Config } from '../config.ts'
import type { Executor } from '../db/database.ts'
import type { DB } from '../db/tables.ts'
import { adjust, ClaimPlan, leaseCountChange } from './claims.ts'
import * as claims from './claims.repository.ts'
import * as deliveries from './deliveries.repository.ts'
import type { OriginCircuits, OriginLimits } from './origins.ts'

/** How much longer than one attempt's timeout a lease lasts before another instance may take the row. */
const LEASE_MARGIN_MS = 10_000

/** A claimed delivery, with its origin and what its attempt needs (`work` undefined when the row is gone). */
export type Launch = claims.LeasedDelivery & { origin: string }

/** What this instance has in flight when a round claims: per origin and per wallet, and the leases that still count. */
export interface InFlightView {
  /** Attempts still on the wire per origin (ended ones, whose slots are free, not counted). */
  held: ReadonlyMap<string, number>
  /** This worker's leases that still count once the round commits, per origin. */
  live: ReadonlyMap<string, number>
  /** Attempts in flight per wallet: the fair pick's load. */
  walletLoad: ReadonlyMap<number, number>
}

/** Claims due deliveries under a lease as `ClaimPlan` shares them, and keeps this worker's lease counts. */
export class DeliveryClaimer {
  /** This worker's name in `webhook_lease_counts`: new at each start of the process. */
  readonly instance = randomUUID()
  /** Origins whose last claim left due deliveries behind, their circuit not open. */
  waitingOrigins = new Set<string>()
  readonly #config: Pick<Config, 'webhookConcurrency' | 'webhookTimeoutMs'>
  readonly #limits: OriginLimits
  readonly #circuits: OriginCircuits
  #turn = 0
  /** The lease counts as last committed; `unsure` once a round failed after it may have written them. */
  #leaseCounts = new Map<string, deliveries.LeaseCount>()
  #unsure = false

  constructor(options: {
    config: Pick<Config, 'webhookConcurrency' | 'webhookTimeoutMs'>
    limits: OriginLimits
    circuits: OriginCircuits
  }) {
    this.#config = options.config
    this.#limits = options.limits
    this.#circuits = options.circuits
  }

  /** Under the claims' lock, leases up to `free` due deliveries; `lookAgain` when another claim should follow at once. */
  async claim(trx: Transaction<DB>, free: number, view: InFlightView): Promise<{ launches: Launch[]; lookAgain: boolean }> {
    const now = Date.now()
    const nowText = new Date(now).toISOString()
    const { due, leased } = await claims.findDueOriginsAndLeases(trx, { now: nowText, instance: this.instance })
    if (due.length === 0) {
      this.waitingOrigins.clear()
      return { launches: [], lookAgain: false }
    }
    for (const [origin, count] of view.live) adjust(leased, origin, count)
    const plan = new ClaimPlan({
      due,
      turn: this.#turn++,
      free,
      concurrency: this.#config.webhookConcurrency,
      leased,
      held: view.held,
      limit: (origin) => this.#limits.limit(origin),
      allowance: (origin) => this.#circuits.allowance(origin),
    })
    // Made here: `inTransaction` may run the round again after a serialization failure.
    const picked = new Map<number, string>()
    for (let ask = plan.next(); ask; ask = plan.next()) {
      const found = await claims.findDueDeliveries(trx, { origin: ask.origin, now: nowText, perWallet: ask.perWallet })
      for (const delivery of plan.take(ask, found, view.walletLoad)) picked.set(delivery.id, ask.origin)
    }
    this.#limits.claimed(plan.pressed)
    this.waitingOrigins = plan.waiting
    // A webhook removed after this read cannot stop these attempts, as one already on the wire.
    const leasedNow = await claims.leaseDeliveries(trx, { ids: [...picked.keys()], now: nowText, leaseUntil: this.#leaseEnd(now) })
    return { launches: leasedNow.map((claim) => ({ ...claim, origin: picked.get(claim.id) as string })), lookAgain: plan.lookAgain }
  }

  /** Writes what changed in this worker's lease counts, in the round's transaction; returns them as they will be once it commits. */
  async writeLeaseCounts(trx: Executor, live: ReadonlyMap<string, number>, claimed: Launch[]): Promise<Map<string, deliveries.LeaseCount>> {
    const change = leaseCountChange(this.#leaseCounts, live, claimed, {
      unsure: this.#unsure,
      fallbackUntil: () => this.#leaseEnd(Date.now()),
    })
    await deliveries.writeLeaseCounts(trx, this.instance, change)
    return change.after
  }

  /** The round committed these counts. */
  committed(counts: Map<string, deliveries.LeaseCount>): void {
    this.#leaseCounts = counts
    this.#unsure = false
  }

  /** The round failed, perhaps after it committed (a connection lost at COMMIT): the next one rewrites every count. */
  failed(): void {
    this.#unsure = true
  }

  #leaseEnd(from: number): string {
    return new Date(from + this.#config.webhookTimeoutMs + LEASE_MARGIN_MS).toISOString()
  }
}
