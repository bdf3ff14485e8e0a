import type { Kysely } from 'kysely'

/**
 * Retention and limits shared by instances (`docs/operations.md`):
 *
 * - `webhook_deliveries(event_id)`: the retention job deletes an old event only when no delivery
 *   refers to it any more, and deleting an event makes both databases look for deliveries that
 *   refer to it (the foreign key); without this index each look was a scan of every delivery.
 * - `rate_limit_hits`: login and registration attempts per key (client address, username) in the
 *   current one-minute window, counted in the database so that every instance sees every attempt
 *   (PostgreSQL; a single SQLite process counts in memory). Purely operational: never backed up.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.createIndex('webhook_deliveries_event').on('webhook_deliveries').column('event_id').execute()
  await db.schema
    .createTable('rate_limit_hits')
    .addColumn('key', 'text', (col) => col.primaryKey())
    // Start of the one-minute window, in milliseconds since the epoch: aligned to the minute, so
    // every instance agrees on the window whatever its own start.
    .addColumn('window_start', 'bigint', (col) => col.notNull())
    .addColumn('hits', 'integer', (col) => col.notNull())
    .execute()
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('rate_limit_hits').execute()
  await db.schema.dropIndex('webhook_deliveries_event').execute()
}
