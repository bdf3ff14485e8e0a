import type { Kysely } from 'kysely'

/** Every transfer and history page looks users up by `primary_wallet_id`; without an index, a scan. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.createIndex('users_primary_wallet_id').on('users').column('primary_wallet_id').execute()
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropIndex('users_primary_wallet_id').execute()
}
