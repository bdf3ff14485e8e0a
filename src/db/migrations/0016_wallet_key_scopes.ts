import type { Kysely } from 'kysely'

/**
 * Wallet keys carry what they may do (`docs/keys.md`):
 *
 * - `scopes`: the key's scopes, comma-separated (`read,send,hold`, what every key could do before,
 *   for the keys that exist already).
 * - `limits`: the key's limits as JSON, assets by id (a renamed asset keeps its caps); null when
 *   it has none. Neither ever changes after the key is created.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .alterTable('wallet_sessions')
    .addColumn('scopes', 'text', (col) => col.notNull().defaultTo('read,send,hold'))
    .execute()
  await db.schema.alterTable('wallet_sessions').addColumn('limits', 'text').execute()
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('wallet_sessions').dropColumn('limits').execute()
  await db.schema.alterTable('wallet_sessions').dropColumn('scopes').execute()
}
