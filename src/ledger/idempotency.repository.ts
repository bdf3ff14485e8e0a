import type { Executor } from '../db/database.ts'

/** SQL of stored Idempotency-Keys. They are written with their transfer, in its batch (`moves.repository.ts`). */

export async function findIdempotencyKey(db: Executor, walletId: number, key: string) {
  return db
    .selectFrom('idempotency_keys')
    .select(['request_hash', 'status_code', 'response_body'])
    .where('wallet_id', '=', walletId)
    .where('key', '=', key)
    .executeTakeFirst()
}
