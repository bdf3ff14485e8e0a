import type { LeaseCount } from './deliveries.repository.ts'

/** The arithmetic of a claim: slots per origin, fair shares among wallets, lease counts. Pure, no I/O. */

export interface DueDelivery {
  id: number
  wallet_id: number
  next_attempt_at: string
}

/** Rows read per wallet relative to its share of slots: enough for the fair pick, few for many wallets. */
export const READ_AHEAD = 4

/**
 * Picks up to `slots` of `due`, each from the wallet with the fewest in flight (ties: longest
 * waiting), so a wallet with one event waits for at most one slot whatever the others queued.
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

/** Shares `total` slots among origins max-min fairly, the remainder to the first in `asks` (rotated by the worker). */
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

export interface ClaimInput {
  /** The origins with deliveries due, and how many of their wallets have some. */
  due: { origin: string; wallets: number }[]
  /** Which origin goes first: turns rotate so that none always comes first. */
  turn: number
  free: number
  concurrency: number
  /** Every worker's live leases per origin, and this instance's attempts still on the wire. */
  leased: ReadonlyMap<string, number>
  held: ReadonlyMap<string, number>
  /** Per origin: its limit over every instance (`OriginLimits`), what its circuit lets start (`OriginCircuits`). */
  limit: (origin: string) => number
  allowance: (origin: string) => number
}

/** One origin's part of a claim: up to `slots` deliveries, reading `perWallet` of each wallet's. */
export interface OriginAsk {
  origin: string
  slots: number
  perWallet: number
}

/** A claim over the due origins: each within its limit over all instances, its circuit, and its fair share of slots. */
export class ClaimPlan {
  /** Origins whose limit left due deliveries behind: their limits may grow. */
  readonly pressed = new Set<string>()
  /** Origins that left due deliveries behind for any reason but an open circuit. */
  readonly waiting = new Set<string>()
  /** Slots were left over while some wallet had more due than was read: claim again at once. */
  lookAgain = false
  readonly #input: ClaimInput
  readonly #origins: { origin: string; wallets: number; room: number; share: number }[]
  #left: number
  #next = 0

  constructor(input: ClaimInput) {
    this.#input = input
    this.#left = input.free
    const first = input.due.length === 0 ? 0 : input.turn % input.due.length
    const rotated = [...input.due.slice(first), ...input.due.slice(0, first)]
    const room = rotated.map(({ origin }) => Math.min(this.#byLimit(origin), input.allowance(origin)))
    const dueOrigins = new Set(input.due.map((entry) => entry.origin))
    const busy = [...input.held].filter(([origin]) => !dueOrigins.has(origin)).map(([, count]) => count)
    const asks = rotated.map(({ origin }, i) => (input.held.get(origin) ?? 0) + Math.max(0, room[i]))
    const shares = shareSlots([...asks, ...busy], input.concurrency)
    this.#origins = rotated.map((entry, i) => ({ ...entry, room: room[i], share: shares[i] }))
  }

  #byLimit(origin: string): number {
    return this.#input.limit(origin) - (this.#input.leased.get(origin) ?? 0)
  }

  /** The next origin to read due deliveries for, or undefined when the claim is over. */
  next(): OriginAsk | undefined {
    while (this.#next < this.#origins.length && this.#left > 0) {
      const { origin, wallets, room, share } = this.#origins[this.#next++]
      const slots = Math.min(this.#left, room, share - (this.#input.held.get(origin) ?? 0))
      if (slots > 0) return { origin, slots, perWallet: Math.min(slots, Math.ceil((READ_AHEAD * slots) / wallets)) }
      if (this.#byLimit(origin) <= 0) this.pressed.add(origin)
      if (this.#input.allowance(origin) > 0) this.waiting.add(origin)
    }
    return undefined
  }

  /** Picks from what was read for `ask`, fairly among its wallets (`load`: their attempts in flight). */
  take(ask: OriginAsk, found: DueDelivery[], load: ReadonlyMap<number, number>): DueDelivery[] {
    const chosen = pickFairly(found, load, ask.slots)
    this.#left -= chosen.length
    const walletFull = countPerWallet(found).some((count) => count >= ask.perWallet)
    const moreDue = found.length > chosen.length || walletFull
    if (moreDue && chosen.length >= this.#byLimit(ask.origin)) this.pressed.add(ask.origin)
    if (moreDue) this.waiting.add(ask.origin)
    if (chosen.length < ask.slots && walletFull) this.lookAgain = true
    return chosen
  }
}

/** The rows of `webhook_lease_counts` a round writes for this worker, and what they are once it commits. */
export interface LeaseCountChange {
  after: Map<string, LeaseCount>
  /** Rows set (new or changed; all of them when `unsure`), and origins whose row goes. */
  counts: LeaseCount[]
  gone: string[]
  /** Set when unsure: every other row of the worker is deleted. */
  keepOnly?: string[]
}

/** The lease-count rows to write per origin; `unsure` (a round may have committed) writes them all again. */
export function leaseCountChange(
  before: ReadonlyMap<string, LeaseCount>,
  live: ReadonlyMap<string, number>,
  claimed: { origin: string; lease_until: string }[],
  options: { unsure: boolean; fallbackUntil: () => string },
): LeaseCountChange {
  const leased = new Map(live)
  const newest = new Map<string, string>()
  for (const claim of claimed) {
    adjust(leased, claim.origin, 1)
    newest.set(claim.origin, claim.lease_until)
  }
  const after = new Map<string, LeaseCount>()
  for (const [origin, count] of leased) {
    if (count <= 0) continue
    const leaseUntil = newest.get(origin) ?? before.get(origin)?.leaseUntil ?? options.fallbackUntil()
    after.set(origin, { origin, leased: count, leaseUntil })
  }
  const counts = [...after.values()].filter((count) => {
    const old = before.get(count.origin)
    return options.unsure || old?.leased !== count.leased || old?.leaseUntil !== count.leaseUntil
  })
  const gone = [...before.keys()].filter((origin) => !after.has(origin))
  return { after, counts, gone, keepOnly: options.unsure ? [...after.keys()] : undefined }
}

/** Adds `by` to a count, dropping it at zero. */
export function adjust<K>(counts: Map<K, number>, key: K, by: number): void {
  const next = (counts.get(key) ?? 0) + by
  if (next === 0) counts.delete(key)
  else counts.set(key, next)
}

function countPerWallet(due: DueDelivery[]): number[] {
  const counts = new Map<number, number>()
  for (const delivery of due) adjust(counts, delivery.wallet_id, 1)
  return [...counts.values()]
}
