import type { Kysely } from 'kysely'

/**
 * Operator sessions of the console: `POST /admin/sessions` trades the admin key for a 12-hour
 * cookie, so that the browser never keeps the key. Only the token's SHA-256 is stored; ending a
 * session deletes its row.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('operator_sessions')
    .addColumn('token_hash', 'text', (col) => col.primaryKey())
    .addColumn('created_at', 'text', (col) => col.notNull())
    .addColumn('expires_at', 'text', (col) => col.notNull())
    .execute()
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('operator_sessions').execute()
}
