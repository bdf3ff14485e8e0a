import type { Selectable } from 'kysely'
import { coalescedStatement, useMarks } from '../db/coalesce.ts'
import type { Executor, Trx } from '../db/database.ts'
import { holdRow, nowIso } from '../db/dialect.ts'
import type { UserRow, UserSessionsTable } from '../db/tables.ts'

export async function insertUser(db: Executor, username: string, passwordHash: string): Promise<UserRow> {
  return db
    .insertInto('users')
    .values({ username, username_key: username.toLowerCase(), password_hash: passwordHash, primary_wallet_id: null, created_at: nowIso() })
    .returningAll()
    .executeTakeFirstOrThrow()
}

export async function findUserByUsername(db: Executor, username: string): Promise<UserRow | undefined> {
  return db.selectFrom('users').selectAll().where('username_key', '=', username.toLowerCase()).executeTakeFirst()
}

/** The primary wallet of the user with this username (case-insensitive); concurrent lookups share one query. */
const primaryWalletByKey = coalescedStatement(
  'select username_key, primary_wallet_id from users where username_key = $keys and primary_wallet_id is not null',
  'text',
  (row: { username_key: string; primary_wallet_id: number }) => row.username_key,
)

export async function findPrimaryWalletByUsername(db: Executor, username: string): Promise<number | undefined> {
  return (await primaryWalletByKey(db, username.toLowerCase()))?.primary_wallet_id
}

export async function findUserById(db: Executor, userId: number): Promise<UserRow | undefined> {
  return db.selectFrom('users').selectAll().where('id', '=', userId).executeTakeFirst()
}

/** Holds the user row against a password or primary-wallet change in progress; read the user after it. */
export async function holdUser(db: Trx, userId: number): Promise<void> {
  await holdRow(db, 'users', userId)
}

export async function updateUser(
  db: Executor,
  userId: number,
  changes: Partial<Pick<UserRow, 'username' | 'username_key' | 'password_hash' | 'primary_wallet_id'>>,
): Promise<void> {
  await db.updateTable('users').set(changes).where('id', '=', userId).execute()
}

export async function insertUserSession(
  db: Executor,
  session: { userId: number; walletId: number; tokenHash: string; expiresAt: string; userAgent?: string | null },
) {
  const now = nowIso()
  return db
    .insertInto('user_sessions')
    .values({
      user_id: session.userId,
      wallet_id: session.walletId,
      token_hash: session.tokenHash,
      created_at: now,
      last_used_at: now,
      expires_at: session.expiresAt,
      user_agent: session.userAgent ?? null,
    })
    .returning(['id', 'user_id', 'wallet_id', 'created_at'])
    .executeTakeFirstOrThrow()
}

const SESSION_COLUMNS = ['id', 'user_id', 'wallet_id', 'last_used_at', 'expires_at', 'token_hash'] as const

/** The user session with this token hash, live or not; concurrent lookups share one query. */
const userSessionByHash = coalescedStatement(
  `select ${SESSION_COLUMNS.join(', ')} from user_sessions where token_hash = $keys`,
  'text',
  (row: UserSessionRow) => row.token_hash,
)

export type UserSessionRow = Pick<Selectable<UserSessionsTable>, (typeof SESSION_COLUMNS)[number]>

export function findUserSessionByTokenHash(db: Executor, tokenHash: string): Promise<UserSessionRow | undefined> {
  return userSessionByHash(db, tokenHash)
}

/** The sessions among `sessionIds` that still exist, live or not. */
export async function findUserSessionsByIds(db: Executor, sessionIds: readonly number[]) {
  if (sessionIds.length === 0) return []
  return db.selectFrom('user_sessions').select(SESSION_COLUMNS).where('id', 'in', sessionIds).execute()
}

/** The session with its user and its active wallet (GET /user/session). */
export async function findSessionWithWallet(db: Executor, sessionId: number) {
  return db
    .selectFrom('user_sessions')
    .innerJoin('users', 'users.id', 'user_sessions.user_id')
    .innerJoin('wallets', 'wallets.id', 'user_sessions.wallet_id')
    .select([
      'user_sessions.id',
      'user_sessions.user_id',
      'users.username',
      'users.primary_wallet_id',
      'user_sessions.wallet_id',
      'wallets.user_id as wallet_user_id',
      'wallets.address as wallet_address',
      'user_sessions.created_at',
    ])
    .where('user_sessions.id', '=', sessionId)
    .executeTakeFirst()
}

/** Marks the session as used now; one statement for all the sessions of a turn. */
export const touchUserSession = useMarks('user_sessions')

/** Every session of the user, ended ones included (`accounts.service.ts` tells which are live). */
export async function listUserSessions(db: Executor, userId: number) {
  return db
    .selectFrom('user_sessions')
    .select(['id', 'user_id', 'wallet_id', 'created_at', 'last_used_at', 'expires_at', 'user_agent'])
    .where('user_id', '=', userId)
    .orderBy('id')
    .execute()
}

/** Deletes one session of the user; returns false when the user has no such session. */
export async function deleteUserSession(db: Executor, userId: number, sessionId: number): Promise<boolean> {
  const result = await db.deleteFrom('user_sessions').where('id', '=', sessionId).where('user_id', '=', userId).executeTakeFirst()
  return Number(result.numDeletedRows) > 0
}

export async function deleteUserSessions(db: Executor, userId: number, exceptSessionId?: number): Promise<void> {
  let query = db.deleteFrom('user_sessions').where('user_id', '=', userId)
  if (exceptSessionId !== undefined) query = query.where('id', '<>', exceptSessionId)
  await query.execute()
}

export async function setSessionWallet(db: Executor, sessionId: number, walletId: number): Promise<void> {
  await db.updateTable('user_sessions').set({ wallet_id: walletId }).where('id', '=', sessionId).execute()
}
