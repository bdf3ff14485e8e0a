import type { Kysely } from 'kysely'

/**
 * Transactions name the user whose primary wallet each side is (`labelWallets`), a lookup by
 * `users.primary_wallet_id` on every transfer and every page of history. Without this index each
 * lookup scanned the whole users table, so transfers slowed down as users signed up.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.createIndex('users_primary_wallet_id').on('users').column('primary_wallet_id').execute()
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropIndex('users_primary_wallet_id').execute()
}
