import type { Config } from '../config.ts'
import { KeptReads, readKept } from '../db/commit-state.ts'
import type { Db, Executor, Trx } from '../db/database.ts'
import { inTransaction, isUniqueViolation } from '../db/dialect.ts'
import type { UserRow } from '../db/tables.ts'
import type { UserAuth } from '../http/auth.ts'
import { AppError } from '../http/errors.ts'
import { createToken, hashToken } from '../http/tokens.ts'
import * as repo from './accounts.repository.ts'
import { hashPassword, verifyDecoy, verifyPassword } from './passwords.ts'

/** A new password's hash, made before the transaction that stores it (hashing takes a while). */
export function hashNewPassword(password: string): Promise<string> {
  return hashPassword(password)
}

/** Creates a user without a primary wallet yet, in the caller's transaction. Throws U000 for a taken username. */
export async function createUser(trx: Trx, username: string, passwordHash: string): Promise<UserRow> {
  if (await repo.findUserByUsername(trx, username)) throw new AppError('U000', `username "${username}" is taken`)
  return repo.insertUser(trx, username, passwordHash)
}

/** Makes `walletId` the user's primary wallet, in the caller's transaction; the caller checks ownership. */
export async function recordPrimaryWallet(trx: Trx, userId: number, walletId: number): Promise<void> {
  await repo.updateUser(trx, userId, { primary_wallet_id: walletId })
}

/** Makes `walletId` the session's active wallet, in the caller's transaction; the caller checks access. */
export async function recordActiveWallet(trx: Trx, sessionId: number, walletId: number): Promise<void> {
  await repo.setSessionWallet(trx, sessionId, walletId)
}

export function findUserById(db: Executor, userId: number): Promise<UserRow | undefined> {
  return repo.findUserById(db, userId)
}

export function findUserByUsername(db: Executor, username: string): Promise<UserRow | undefined> {
  return repo.findUserByUsername(db, username)
}

/** The primary wallet of the user with this username (case-insensitive), or undefined. */
export function findPrimaryWalletByUsername(db: Executor, username: string): Promise<number | undefined> {
  return repo.findPrimaryWalletByUsername(db, username)
}

// Writing last_used_at on every request would turn every read into a write; once a minute is enough.
const TOUCH_INTERVAL_MS = 60_000

/** The one rule of a session's life: not expired, and used within SESSION_IDLE_DAYS (unless 0). */
function isLive(session: { expires_at: string; last_used_at: string }, config: Config, now: number): boolean {
  const idleLimit = config.sessionIdleDays * 86_400_000
  return Date.parse(session.expires_at) > now && !(idleLimit > 0 && Date.parse(session.last_used_at) + idleLimit <= now)
}

/**
 * The live sessions among `sessionIds` (neither ended, expired nor idle too long), each with its
 * active wallet: what the event streams check their sessions against.
 */
export async function liveUserSessionWallets(db: Executor, config: Config, sessionIds: readonly number[]): Promise<Map<number, number>> {
  const now = Date.now()
  const rows = await repo.findUserSessionsByIds(db, sessionIds)
  return new Map(rows.filter((row) => isLive(row, config, now)).map((row) => [row.id, row.wallet_id]))
}

/** Session rows by token hash, kept while nothing was committed since they were read; one per app. */
export type KeptUserSessions = KeptReads<string, repo.UserSessionRow>

export function keptUserSessions(): KeptUserSessions {
  return new KeptReads(10_000)
}

/** The live session of a token hash, marked as used at most once a minute; undefined when there is none. */
export async function authenticateUserSession(
  db: Db,
  config: Config,
  tokenHash: string,
  kept: KeptUserSessions,
): Promise<{ sessionId: number; userId: number; walletId: number } | undefined> {
  const row = await readKept(db, kept, tokenHash, (hash) => repo.findUserSessionByTokenHash(db, hash))
  // Whether it is live is judged now, on every request: expiry and idleness pass without a write.
  const session = row && isLive(row, config, Date.now()) ? row : undefined
  if (!session) return undefined
  if (Date.now() - Date.parse(session.last_used_at) > TOUCH_INTERVAL_MS) await repo.touchUserSession(db, session.id)
  return { sessionId: session.id, userId: session.user_id, walletId: session.wallet_id }
}

/** What is kept of a session's `User-Agent`: enough to name a browser and its system. */
const USER_AGENT_CHARS = 256

/**
 * POST /users/{username}/sessions: checks the password and opens a session on the primary wallet,
 * noting the client's user agent (to name it in the session list). Returns the session and its
 * token. Throws U001 alike for an unknown user and a wrong password.
 */
export async function logIn(db: Db, config: Config, username: string, password: string, userAgent?: string) {
  const user = await repo.findUserByUsername(db, username)
  if (!user) {
    await verifyDecoy(password)
    throw new AppError('U001')
  }
  if (!(await verifyPassword(user.password_hash, password))) throw new AppError('U001')
  const token = createToken('user')
  const expiresAt = new Date(Date.now() + config.sessionLifetimeDays * 86_400_000).toISOString()
  const session = await inTransaction(db, async (trx) => {
    // A password change ends other sessions, so the password must still be the one checked.
    await repo.holdUser(trx, user.id)
    const current = await repo.findUserById(trx, user.id)
    if (current?.password_hash !== user.password_hash || current.primary_wallet_id === null) throw new AppError('U001')
    return repo.insertUserSession(trx, {
      userId: user.id,
      walletId: current.primary_wallet_id,
      tokenHash: hashToken(token),
      expiresAt,
      userAgent: userAgent?.trim().slice(0, USER_AGENT_CHARS) || null,
    })
  })
  return { session: { id: session.id, user_id: session.user_id, wallet_id: session.wallet_id }, token }
}

/** GET /user/session: the current session with its user and active wallet. */
export async function describeSession(db: Db, auth: UserAuth) {
  const row = await repo.findSessionWithWallet(db, auth.sessionId)
  if (!row) throw new AppError('A001')
  return { ...row, primary_wallet_id: row.primary_wallet_id as number, wallet_user_id: row.wallet_user_id as number }
}

/**
 * GET /user/sessions: the user's live sessions (neither expired nor idle too long), the current one
 * marked, each with the user agent it signed in with when one was sent.
 */
export async function listSessions(db: Db, config: Config, auth: UserAuth) {
  const now = Date.now()
  const rows = await repo.listUserSessions(db, auth.userId)
  return rows
    .filter((row) => isLive(row, config, now))
    .map((row) => ({
      id: row.id,
      user_id: row.user_id,
      wallet_id: row.wallet_id,
      created_at: row.created_at,
      last_used_at: row.last_used_at,
      current: row.id === auth.sessionId,
      ...(row.user_agent === null ? {} : { user_agent: row.user_agent }),
    }))
}

/** DELETE /user/sessions/{id}. Throws U004 for a session that is not the caller's. */
export async function endSession(db: Db, auth: UserAuth, sessionId: number): Promise<void> {
  if (!(await repo.deleteUserSession(db, auth.userId, sessionId))) throw new AppError('U004', `no session ${sessionId}`)
}

export async function endAllSessions(db: Db, auth: UserAuth): Promise<void> {
  await repo.deleteUserSessions(db, auth.userId)
}

/** PUT /user/username. Throws U000. */
export async function changeUsername(db: Db, auth: UserAuth, username: string) {
  try {
    await inTransaction(db, async (trx) => {
      const holder = await repo.findUserByUsername(trx, username)
      if (holder && holder.id !== auth.userId) throw new AppError('U000', `username "${username}" is taken`)
      await repo.updateUser(trx, auth.userId, { username, username_key: username.toLowerCase() })
    })
  } catch (error) {
    if (isUniqueViolation(error)) throw new AppError('U000', `username "${username}" is taken`)
    throw error
  }
  return { id: auth.userId, username }
}

/** PUT /user/password: also ends every other session of the user. */
export async function changePassword(db: Db, auth: UserAuth, password: string): Promise<void> {
  const passwordHash = await hashPassword(password)
  await inTransaction(db, async (trx) => {
    await repo.updateUser(trx, auth.userId, { password_hash: passwordHash })
    await repo.deleteUserSessions(trx, auth.userId, auth.sessionId)
  })
}
