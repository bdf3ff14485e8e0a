import type { Kysely } from 'kysely'
import { isPostgres } from '../dialect.ts'

/**
 * `webhook_deliveries` keeps only what its readers use, since every index and foreign key is paid
 * per row by the transfers' write statement (`docs/decisions.md#events-and-webhooks`):
 * - `webhook_deliveries_due` goes (no reader left; PostgreSQL's planner took it and read the
 *   whole backlog each round).
 * - PostgreSQL: the foreign keys from `event_id` and `wallet_id` go; a delivery is only inserted
 *   with its event, for its wallet (`events/outbox.ts`), and `coffer verify` checks both.
 * What stays: the primary key and the `_wallet`, `_event`, `_pending` and `_leased` indexes.
 */
export const DELIVERY_REFERENCES = [
  { table: 'webhook_deliveries', column: 'event_id', parent: 'events' },
  { table: 'webhook_deliveries', column: 'wallet_id', parent: 'wallets' },
] as const

// The names PostgreSQL gave the constraints declared inline in 0001.
const constraintName = (column: string) => `webhook_deliveries_${column}_fkey`

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.dropIndex('webhook_deliveries_due').execute()
  if (!isPostgres(db)) return
  for (const { column } of DELIVERY_REFERENCES) {
    await db.schema.alterTable('webhook_deliveries').dropConstraint(constraintName(column)).execute()
  }
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  if (isPostgres(db)) {
    for (const { column, parent } of DELIVERY_REFERENCES) {
      await db.schema.alterTable('webhook_deliveries').addForeignKeyConstraint(constraintName(column), [column], parent, ['id']).execute()
    }
  }
  await db.schema.createIndex('webhook_deliveries_due').on('webhook_deliveries').columns(['status', 'next_attempt_at']).execute()
}
