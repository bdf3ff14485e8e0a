import type { Kysely } from 'kysely'

/**
 * `user_sessions.user_agent`: the `User-Agent` the session signed in with (at most 256 characters),
 * so that a person can tell their sessions apart ("Chrome on Android") when ending one. Null for
 * a client that sent none and for sessions opened before this migration.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('user_sessions').addColumn('user_agent', 'text').execute()
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('user_sessions').dropColumn('user_agent').execute()
}
