import { sql, type Kysely } from 'kysely'
import { isPostgres } from '../dialect.ts'

/**
 * Webhook leases counted per worker and origin (`webhook_lease_counts`, never backed up), not by an
 * index over leased deliveries; `fillfactor` 90 lets a lease be a heap-only update
 * (`docs/decisions.md#events-and-webhooks`).
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
