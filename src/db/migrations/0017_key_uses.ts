import type { Kysely } from 'kysely'
import { isPostgres } from '../dialect.ts'

/**
 * What wallet keys with a `per_day` cap have moved (`wallets/key-usage.ts`, `docs/keys.md`):
 *
 * - `key_uses`: one row per capped asset of each transfer, batch member, refund or hold made
 *   through such a key, written in the move's own transaction. A hold's row (`hold_id`) counts
 *   what the hold still reserves or captured, read from the hold itself, so what a void, an expiry
 *   or a partial capture releases stops counting without the row changing. Rows older than a day
 *   count for nothing; keys without a `per_day` cap write none. No foreign keys: a restore writes
 *   the rows in any order.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  const postgres = isPostgres(db)
  await db.schema
    .createTable('key_uses')
    .addColumn('id', postgres ? 'bigserial' : 'integer', (col) => (postgres ? col.primaryKey() : col.primaryKey().autoIncrement()))
    .addColumn('key_id', 'bigint', (col) => col.notNull())
    .addColumn('asset_id', 'bigint', (col) => col.notNull())
    .addColumn('quantity', 'bigint', (col) => col.notNull())
    .addColumn('created_at', 'text', (col) => col.notNull())
    .addColumn('hold_id', 'bigint')
    .execute()
  await db.schema.createIndex('key_uses_key_time').on('key_uses').columns(['key_id', 'created_at']).execute()
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('key_uses').execute()
}
