import type { Holding } from './api.ts'
import { formatQuantity } from './format.ts'
import { CREDIT_TEXT, HOLDING_TEXT } from './text.ts'

/** What a holding can spend: what it owns, less what holds reserve, plus its credit (`docs/credit.md`). */
export function spendable(holding: Pick<Holding, 'quantity' | 'held' | 'credit_limit'>): number {
  return holding.quantity - holding.held + holding.credit_limit
}

/** What a holding owes on credit, formatted, or undefined when it owes nothing. */
export function owed(holding: Pick<Holding, 'quantity'>): string | undefined {
  return holding.quantity < 0 ? formatQuantity(-holding.quantity) : undefined
}

/** An asset to choose in a form: "gold (70 available)", "gold (owes 30, 70 available)". */
export function holdingChoice(holding: Holding): string {
  const owes = owed(holding)
  const available = formatQuantity(spendable(holding))
  return owes === undefined ? HOLDING_TEXT.choice(holding.asset.name, available) : CREDIT_TEXT.choice(holding.asset.name, owes, available)
}

/** A holding's quantity as the console says it: "120", or "owes 30" below zero. */
export function HeldQuantity({ holding }: { holding: Pick<Holding, 'quantity'> }) {
  return holding.quantity < 0 ? (
    <span class="owes">{CREDIT_TEXT.owesCell(owed(holding) ?? '')}</span>
  ) : (
    <>{formatQuantity(holding.quantity)}</>
  )
}
