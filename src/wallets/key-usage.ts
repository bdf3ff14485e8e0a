import { sql } from 'kysely'
import type { Executor } from '../db/database.ts'
import { anyOf } from '../db/dialect.ts'

/** The window of a `per_day` cap: any rolling 24 hours. */
const DAY_MS = 24 * 60 * 60 * 1000

/** One capped asset of a move made through a key with a `per_day` cap (`key_uses`, migration 0017). */
export interface KeyUse {
  keyId: number
  assetId: number
  quantity: number
  createdAt: string
  /** A hold's use counts what the hold still reserves or captured. */
  holdId: number | null
}

/**
 * What counts against each key's `per_day` caps at `now`, by key id then asset id: what it moved
 * in the last 24 hours, and of its holds placed then, what each reserves while pending and
 * unexpired or captured; a void, an expiry or a partial capture's release counts for nothing.
 * Read inside the move's transaction after the sending wallet's turn is taken, so that no two moves
 * of one key count at once.
 */
export async function readKeyUsage(db: Executor, keyIds: readonly number[], now: number): Promise<Map<number, Map<number, number>>> {
  const used = new Map<number, Map<number, number>>()
  if (keyIds.length === 0) return used
  const at = new Date(now).toISOString()
  const since = new Date(now - DAY_MS).toISOString()
  const { rows } = await sql<{ key_id: number | string; asset_id: number | string; used: number | string | null }>`
    select u.key_id, u.asset_id, sum(case
        when u.hold_id is null then u.quantity
        when h.status = 'pending' and h.expires_at > ${at} then u.quantity
        when h.status = 'captured' then coalesce((select ta.quantity from transaction_assets ta
          where ta.transaction_id = h.transaction_id and ta.asset_id = u.asset_id), 0)
        else 0 end) as used
    from key_uses u left join holds h on h.id = u.hold_id
    where ${anyOf(db, sql.ref('u.key_id'), [...keyIds])} and u.created_at > ${since}
    group by u.key_id, u.asset_id`.execute(db)
  for (const row of rows) {
    const key = Number(row.key_id)
    const byAsset = used.get(key) ?? new Map<number, number>()
    byAsset.set(Number(row.asset_id), Number(row.used ?? 0))
    used.set(key, byAsset)
  }
  return used
}

/** Records what moves made through capped keys counted, in the moves' transaction. */
export async function recordKeyUses(db: Executor, uses: readonly KeyUse[]): Promise<void> {
  if (uses.length === 0) return
  await db
    .insertInto('key_uses')
    .values(
      uses.map((use) => ({
        key_id: use.keyId,
        asset_id: use.assetId,
        quantity: use.quantity,
        created_at: use.createdAt,
        hold_id: use.holdId,
      })),
    )
    .execute()
}
