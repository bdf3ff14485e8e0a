import type { Kysely } from 'kysely'
import { isPostgres } from '../dialect.ts'

/**
 * `webhook_deliveries` keeps only what its readers use (`docs/decisions.md#events-and-webhooks`).
 * Every transfer to or from a wallet with a webhook inserts a row here in its own write statement,
 * and every index and foreign key of the table is paid for per row there.
 *
 * - `webhook_deliveries_due` (status, next_attempt_at) goes, on both storages. The worker reads
 *   one wallet's due deliveries at a time (`webhook_deliveries_pending`) and the retention job now
 *   pages through deliveries in id order (the primary key); this index had no reader left but the
 *   PostgreSQL planner, which took it for the worker's look at the due origins and so read the
 *   whole backlog each round.
 * - PostgreSQL: the foreign keys from `event_id` to `events` and from `wallet_id` to `wallets` go.
 *   Each was a locking query per inserted row, re-checking what the transfer's statement already
 *   holds: a delivery is only ever inserted with its event, in the statement that inserts the
 *   event, for the event's wallet (`events/outbox.ts`); wallets are never deleted on PostgreSQL
 *   (migration 0005); an event is deleted only by the retention job, and only once no delivery
 *   refers to it. `coffer verify` checks both references (`DELIVERY_REFERENCES`). SQLite checks a
 *   foreign key in process with one index probe and keeps them, as in migration 0005.
 *
 * What stays: the primary key; `webhook_deliveries_wallet` (the delivery log, newest first);
 * `webhook_deliveries_event` (the retention job's look for deliveries of an old event);
 * `webhook_deliveries_pending` (the worker's claims, the due origins, the backlog);
 * `webhook_deliveries_leased` (the leases per origin; not written by an insert, which has none).
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
