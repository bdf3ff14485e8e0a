import type { Kysely } from 'kysely'

/**
 * Retention and limits shared by instances (`docs/operations.md`): an index for deleting events
 * without scanning deliveries, and `rate_limit_hits` so every instance sees every attempt.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.createIndex('webhook_deliveries_event').on('webhook_deliveries').column('event_id').execute()
  await db.schema
    .createTable('rate_limit_hits')
    .addColumn('key', 'text', (col) => col.primaryKey())
    // Epoch milliseconds aligned to the minute, so every instance agrees on the window.
    .addColumn('window_start', 'bigint', (col) => col.notNull())
    .addColumn('hits', 'integer', (col) => col.notNull())
    .execute()
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('rate_limit_hits').execute()
  await db.schema.dropIndex('webhook_deliveries_event').execute()
}
