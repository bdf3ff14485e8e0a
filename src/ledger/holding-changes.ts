import { holdingKey, type Locked, type MoveRecord } from './moves.repository.ts'
import type { HoldingChange, HoldingState, Line } from './ledger.types.ts'

/**
 * Every change a batch's written moves make to a holding, one per move and holding, in the order
 * the moves were checked: what the holding owned and had reserved (and its credit limit, which
 * moves leave as it is) before and after that move, starting from the balances the batch locked.
 * Balance monitors follow these (`EventWriter` watchBalances), so a holding that dips and recovers within one batch crosses twice.
 */
export function holdingChanges(locked: Locked, written: { move: MoveRecord }[]): HoldingChange[] {
  const now = new Map<string, HoldingState>()
  const changes: HoldingChange[] = []
  // Plain loops, no closure per move: this runs for every member of every batch.
  for (const { move } of written) {
    const first = changes.length
    for (const line of move.settle?.hold.assets ?? []) change(locked, now, changes, first, move.from, line, 0, -line.quantity)
    for (const line of move.lines) {
      if (move.reserve) change(locked, now, changes, first, move.from, line, 0, line.quantity)
      else {
        change(locked, now, changes, first, move.from, line, -line.quantity, 0)
        change(locked, now, changes, first, move.to, line, line.quantity, 0)
      }
    }
  }
  return changes
}

/** One move's change of a holding: a new entry from `first` on (the move's), or the move's entry for it brought up to date. */
function change(
  locked: Locked,
  now: Map<string, HoldingState>,
  changes: HoldingChange[],
  first: number,
  walletId: number,
  line: Line,
  quantity: number,
  held: number,
): void {
  const key = holdingKey(walletId, line.asset.id)
  const before = now.get(key) ?? {
    quantity: locked.holdings.get(key) ?? 0,
    held: locked.held.get(key) ?? 0,
    creditLimit: locked.credit.get(key) ?? 0,
  }
  const after = { quantity: before.quantity + quantity, held: before.held + held, creditLimit: before.creditLimit }
  now.set(key, after)
  for (let i = first; i < changes.length; i++) {
    const seen = changes[i]
    if (seen.walletId === walletId && seen.asset.id === line.asset.id) {
      seen.after = after
      return
    }
  }
  changes.push({ walletId, asset: line.asset, before, after })
}
