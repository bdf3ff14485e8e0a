import { sql } from 'kysely'
import type { Executor } from './database.ts'
import { isPostgres } from './dialect.ts'

/**
 * `count` ids of the transactions' sequence, in order: a transaction's, or a slot an event row takes
 * its id from (2 × the slot + its side, `events/derived-events.ts`), so every event of a wallet
 * counts up in commit order. PostgreSQL draws them from the sequence; SQLite, which has one writer,
 * takes those after the largest a transaction or an event row used.
 */
export async function drawTransactionIds(executor: Executor, count: number): Promise<number[]> {
  if (count === 0) return []
  if (isPostgres(executor)) {
    const { rows } = await sql<{ id: string }>`select nextval('transactions_id_seq') as id from generate_series(1, ${count}::int)`.execute(
      executor,
    )
    return rows.map((row) => Number(row.id)).sort((x, y) => x - y)
  }
  const { rows } = await sql<{ last: number }>`
    select max(coalesce((select seq from sqlite_sequence where name = 'transactions'), 0),
               coalesce((select max(id) from transactions), 0),
               coalesce((select max(id) from events), 0) / 2) as last`.execute(executor)
  return Array.from({ length: count }, (_, i) => rows[0].last + 1 + i)
}

/**
 * A derived event's public id (`events/derived-events.ts`): `evt_`, its time in ms and the store's
 * salt (8 hex digits), then its id (12): the same on every read, so a webhook's retries carry the
 * same `webhook-id`, and two stores never give the same one.
 */
export function derivedPublicId(id: number, createdAt: string, salt: string): string {
  return `evt_${Date.parse(createdAt).toString(16).padStart(12, '0')}${salt}${id.toString(16).padStart(12, '0')}`
}
