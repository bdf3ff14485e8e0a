import { sql, type Kysely } from 'kysely'

/**
 * A key's `per_day` usage read in a few index seeks whatever its traffic (`wallets/key-usage.ts`):
 *
 * - `key_uses.running`: on a use without a hold, the running total of the key's such uses of the
 *   asset, in (`created_at`, `id`) order, modulo 2^53; null on a hold's use. What the key moved
 *   after an instant is the last row's total less that of the last row at or before it. Existing
 *   rows get their totals here, in that same order.
 * - `key_uses_totals` (uses without a hold) and `key_uses_holds` (a hold's uses, still read with
 *   their holds) replace the index of every row by key and time, so a key's plain traffic never
 *   weighs on reading its holds.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('key_uses').addColumn('running', 'bigint').execute()
  await sql`with totals as (
      select id, sum(quantity) over (partition by key_id, asset_id order by created_at, id rows unbounded preceding)
        % 9007199254740992 as running
      from key_uses where hold_id is null)
    update key_uses set running = totals.running from totals where totals.id = key_uses.id`.execute(db)
  await db.schema.dropIndex('key_uses_key_time').execute()
  await sql`create index key_uses_totals on key_uses (key_id, asset_id, created_at, id, running) where hold_id is null`.execute(db)
  await sql`create index key_uses_holds on key_uses (key_id, asset_id, created_at) where hold_id is not null`.execute(db)
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropIndex('key_uses_holds').execute()
  await db.schema.dropIndex('key_uses_totals').execute()
  await db.schema.createIndex('key_uses_key_time').on('key_uses').columns(['key_id', 'created_at']).execute()
  await db.schema.alterTable('key_uses').dropColumn('running').execute()
}
