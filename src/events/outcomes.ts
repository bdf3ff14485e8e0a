import type { Executor } from '../db/database.ts'
import { nowIso } from '../db/dialect.ts'
import type { Launch } from './claimer.ts'
import * as deliveries from './deliveries.repository.ts'
import { nextState, type Outcome } from './delivery.sender.ts'

/**
 * What became of an attempt: `attempted` (logged, then delivered, retried or failed), `released`
 * (cut off by the shutdown: logged and given back), `cancelled` (the webhook was removed before
 * anything was sent).
 */
export type AttemptEnd = { claim: Launch } & (
  { kind: 'attempted' | 'released'; url: string; attemptedAt: string; outcome: Outcome } | { kind: 'cancelled' }
)

/** An attempt's end waiting for a round: `written` tells the attempt; `removalFailed`: a 410 whose webhook removal failed. */
export type Ended = AttemptEnd & { written: () => void; removalFailed?: true }

/** A 410 Gone: its outcome is written with the webhook's removal, not in the round. */
export function goneAnswer(end: Ended): end is Ended & { kind: 'attempted' } {
  return end.kind === 'attempted' && end.outcome.statusCode === 410 && !end.removalFailed
}

/**
 * Writes attempts' outcomes: the attempts in one statement, each delivery moved on by the retry
 * `schedule` (a released one due again at once); a delivery cancelled before anything was sent on its own (rare).
 */
export async function writeOutcomes(trx: Executor, ends: AttemptEnd[], schedule: readonly number[]): Promise<void> {
  const now = nowIso()
  const attempts: deliveries.AttemptRecord[] = []
  for (const end of ends) {
    const { claim } = end
    if (end.kind === 'cancelled') {
      await deliveries.settleDelivery(trx, claim, { status: 'cancelled', nextAttemptAt: null, now })
      continue
    }
    const { url, outcome } = end
    attempts.push({
      deliveryId: claim.id,
      leaseUntil: claim.lease_until,
      url,
      attemptedAt: end.attemptedAt,
      ...outcome,
      next: end.kind === 'released' ? undefined : nextState(claim.attempts + 1, outcome, schedule),
    })
  }
  await deliveries.recordAttempts(trx, attempts, now)
}
