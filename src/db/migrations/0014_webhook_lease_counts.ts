import { sql, type Kysely } from 'kysely'
import { isPostgres } from '../dialect.ts'

/**
 * Webhook leases counted per instance and origin, not per delivery (`docs/decisions.md#events-and-webhooks`).
 *
 * - `webhook_lease_counts`: one row per delivery worker (`instance`, a random id it takes at
 *   start) and receiving origin while that worker has attempts in flight there: how many
 *   (`leased`, above zero) and until when they can last (`lease_until`, its newest lease at that
 *   origin). Each worker writes its own rows in its rounds; a claim adds up the other workers'
 *   rows still within their `lease_until`. Operational: never carried by a backup.
 * - `webhook_deliveries_leased` goes. It was read by every claim to count the live leases per
 *   origin, and it read every lease of the last 20 s (the attempt timeout plus a margin) until
 *   vacuum removed its dead entries. Without it the lease (an update of `lease_until` alone)
 *   changes no indexed column of the delivery row.
 * - PostgreSQL: `webhook_deliveries` leaves a tenth of each new page free (`fillfactor` 90), so
 *   that the lease, taken a few milliseconds after the transfer inserted the row, can be a
 *   heap-only update on the same page, which writes no index entry at all.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('webhook_lease_counts')
    .addColumn('instance', 'text', (col) => col.notNull())
    .addColumn('origin', 'text', (col) => col.notNull())
    .addColumn('leased', 'integer', (col) => col.notNull())
    .addColumn('lease_until', 'text', (col) => col.notNull())
    .addPrimaryKeyConstraint('webhook_lease_counts_pkey', ['instance', 'origin'])
    .execute()
  await db.schema.dropIndex('webhook_deliveries_leased').execute()
  if (isPostgres(db)) await sql`alter table webhook_deliveries set (fillfactor = 90)`.execute(db)
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  if (isPostgres(db)) await sql`alter table webhook_deliveries reset (fillfactor)`.execute(db)
  await db.schema
    .createIndex('webhook_deliveries_leased')
    .on('webhook_deliveries')
    .column('lease_until')
    .where(sql.ref('lease_until'), 'is not', null)
    .execute()
  await db.schema.dropTable('webhook_lease_counts').execute()
}
