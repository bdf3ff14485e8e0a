/**
 * Units by expiry, the arithmetic (`docs/expiry.md`). A dated holding keeps its units that expire
 * as lots, one per expiry instant, each with what pending holds reserve of it; the rest of the
 * holding never expires. Pure functions over one holding's lots, soonest first.
 */

export interface Lot {
  expiresAt: string
  quantity: number
  /** What pending, unexpired holds reserve of it: reserved units do not expire. */
  held: number
}

/** Units of one expiry instant that a move takes or gives, or a hold reserves. */
export interface LotPart {
  expiresAt: string
  quantity: number
}

/** Orders lots or parts soonest first (instants are ISO strings of one format, so text order is time order). */
export const bySoonest = (a: { expiresAt: string }, b: { expiresAt: string }): number =>
  a.expiresAt < b.expiresAt ? -1 : a.expiresAt > b.expiresAt ? 1 : 0

/** Units that have expired by `now`: of every lot whose instant has passed, what no hold reserves. */
export function expiredOf(lots: readonly Lot[] | undefined, now: string): number {
  let expired = 0
  for (const lot of lots ?? []) if (lot.expiresAt <= now) expired += lot.quantity - lot.held
  return expired
}

/**
 * The dated units a spend (or a hold) of `quantity` takes: free units of unexpired lots, soonest
 * first. What it leaves of `quantity` comes from the units that never expire.
 */
export function takeSoonest(lots: readonly Lot[] | undefined, quantity: number, now: string): LotPart[] {
  const parts: LotPart[] = []
  let left = quantity
  for (const lot of lots ?? []) {
    if (left === 0) break
    if (lot.expiresAt <= now) continue
    const take = Math.min(lot.quantity - lot.held, left)
    if (take > 0) parts.push({ expiresAt: lot.expiresAt, quantity: take })
    left -= take
  }
  return parts
}

/** The first `quantity` units of `parts`, in their order (a capture's share of what its hold reserved). */
export function takeFirst(parts: readonly LotPart[] | undefined, quantity: number): LotPart[] {
  const taken: LotPart[] = []
  let left = quantity
  for (const part of parts ?? []) {
    if (left === 0) break
    const take = Math.min(part.quantity, left)
    taken.push({ expiresAt: part.expiresAt, quantity: take })
    left -= take
  }
  return taken
}

/** The lots with `parts` added to their quantity (`field` 'quantity') or to what is held of them, soonest first; empty lots stay. */
export function addParts(lots: readonly Lot[] | undefined, parts: readonly LotPart[], sign: 1 | -1, field: 'quantity' | 'held'): Lot[] {
  const next = (lots ?? []).map((lot) => ({ ...lot }))
  for (const part of parts) {
    let lot = next.find((candidate) => candidate.expiresAt === part.expiresAt)
    if (!lot) {
      lot = { expiresAt: part.expiresAt, quantity: 0, held: 0 }
      next.push(lot)
    }
    lot[field] += sign * part.quantity
  }
  return next.sort(bySoonest)
}

/** `GET /wallet/assets` `expiring`: units with an expiry that still count, soonest first (those held past their instant too). */
export function expiringOf(lots: readonly Lot[] | undefined, now: string): { quantity: number; expires_at: string }[] {
  return (lots ?? []).flatMap((lot) => {
    const quantity = lot.expiresAt <= now ? lot.held : lot.quantity
    return quantity > 0 ? [{ quantity, expires_at: lot.expiresAt }] : []
  })
}
