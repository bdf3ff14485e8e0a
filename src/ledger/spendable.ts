import type { TransactionKind } from './ledger.types.ts'

/**
 * What a wallet may spend of one holding, the one rule every spend is checked by (transfers, batch
 * members, holds, captures, refunds, reversals, burns, sweeps, and anything that moves later): what
 * pending holds leave free, plus its credit limit (`docs/credit.md`). A burn destroys only what the
 * wallet owns, so credit does not count for it.
 */
export function spendable(holding: { quantity: number; held: number; creditLimit: number }, kind: TransactionKind): number {
  return holding.quantity - holding.held + (kind === 'burn' ? 0 : holding.creditLimit)
}

/** The I002 detail: what the holding is, what is held, the credit that counts, and what was asked. */
export function insufficientDetail(
  holding: { quantity: number; held: number; creditLimit: number },
  kind: TransactionKind,
  asset: string,
  requested: number,
): string {
  const held = holding.held > 0 ? ` of which ${holding.held} held` : ''
  const credit = holding.creditLimit > 0 && kind !== 'burn' ? ` with a credit limit of ${holding.creditLimit}` : ''
  if (credit !== '')
    return `wallet holds ${holding.quantity} of ${asset}${held}${credit}: ${spendable(holding, kind)} can be spent, ${requested} requested`
  if (held !== '')
    return `wallet holds ${holding.quantity} of ${asset}${held}: ${holding.quantity - holding.held} free, ${requested} requested`
  return `wallet holds ${holding.quantity} of ${asset}, ${requested} requested`
}
