import type { TransactionKind } from './ledger.types.ts'

/** A holding as the spend rule sees it: what it owns, what holds reserve, its credit, what has expired. */
export interface SpendState {
  quantity: number
  held: number
  creditLimit: number
  /** Units that have expired and are not yet returned to mint (`docs/expiry.md`): never spendable. */
  expired: number
}

/**
 * What a wallet may spend of one holding, the one rule every spend is checked by (transfers, batch
 * members, holds, captures, refunds, reversals, burns, sweeps, schedules' runs): what it owns less
 * what has expired and what pending holds reserve, plus its credit limit (`docs/credit.md`). A burn
 * destroys only what the wallet owns, so credit does not count for it.
 */
export function spendable(holding: SpendState, kind: TransactionKind): number {
  return holding.quantity - holding.expired - holding.held + (kind === 'burn' ? 0 : holding.creditLimit)
}

/** The I002 detail: what the holding is (expired units left out), what is held, the credit that counts, and what was asked. */
export function insufficientDetail(holding: SpendState, kind: TransactionKind, asset: string, requested: number): string {
  const owned = holding.quantity - holding.expired
  const held = holding.held > 0 ? ` of which ${holding.held} held` : ''
  const credit = holding.creditLimit > 0 && kind !== 'burn' ? ` with a credit limit of ${holding.creditLimit}` : ''
  if (credit !== '')
    return `wallet holds ${owned} of ${asset}${held}${credit}: ${spendable(holding, kind)} can be spent, ${requested} requested`
  if (held !== '') return `wallet holds ${owned} of ${asset}${held}: ${owned - holding.held} free, ${requested} requested`
  return `wallet holds ${owned} of ${asset}, ${requested} requested`
}
