import type { Kysely } from 'kysely'
import { isPostgres } from '../dialect.ts'

/**
 * `webhook_deliveries` keeps only what its readers use, as the transfers' write pays for every
 * index and foreign key (`docs/decisions.md#events-and-webhooks`).
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
