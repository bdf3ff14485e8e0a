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
  const stateOf = (walletId: number, assetId: number): HoldingState => {
    const key = holdingKey(walletId, assetId)
    return (
      now.get(key) ?? { quantity: locked.holdings.get(key) ?? 0, held: locked.held.get(key) ?? 0, creditLimit: locked.credit.get(key) ?? 0 }
    )
  }
  const changes: HoldingChange[] = []
  for (const { move } of written) {
    const touched = new Map<string, HoldingChange>()
    const change = (walletId: number, line: Line, quantity: number, held: number) => {
      const key = holdingKey(walletId, line.asset.id)
      const before = stateOf(walletId, line.asset.id)
      const after = { ...before, quantity: before.quantity + quantity, held: before.held + held }
      now.set(key, after)
      const seen = touched.get(key)
      if (seen) seen.after = after
      else touched.set(key, { walletId, asset: line.asset, before, after })
    }
    for (const line of move.settle?.hold.assets ?? []) change(move.from, line, 0, -line.quantity)
    for (const line of move.lines) {
      if (move.reserve) change(move.from, line, 0, line.quantity)
      else {
        change(move.from, line, -line.quantity, 0)
        change(move.to, line, line.quantity, 0)
      }
    }
    changes.push(...touched.values())
  }
  return changes
}
