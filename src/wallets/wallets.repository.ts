import { sql } from 'kysely'
import type { Executor, Trx } from '../db/database.ts'
import { coalescedStatement, useMarks } from '../db/coalesce.ts'
import { anyOf, forUpdate, holdRow, nowIso } from '../db/dialect.ts'
import type { WalletRow } from '../db/tables.ts'

export async function insertWallet(db: Executor, userId: number, address: string): Promise<WalletRow> {
  return db
    .insertInto('wallets')
    .values({ address, user_id: userId, created_at: nowIso(), deleted_at: null })
    .returningAll()
    .executeTakeFirstOrThrow()
}

/** A live (not deleted) user wallet; never the mint wallet. */
export async function findWalletById(db: Executor, walletId: number): Promise<WalletRow | undefined> {
  return db
    .selectFrom('wallets')
    .selectAll()
    .where('id', '=', walletId)
    .where('deleted_at', 'is', null)
    .where('user_id', 'is not', null)
    .executeTakeFirst()
}

/**
 * `findWalletById` outside a transaction (a transfer's recipient given by id): lookups of
 * concurrent requests share one query (`coalesce.ts`), written once as SQL text.
 */
export const findWalletByIdShared = coalescedStatement(
  'select id, address, user_id, created_at, deleted_at from wallets where id = $keys and deleted_at is null and user_id is not null',
  'bigint',
  (row: WalletRow) => row.id,
)

/** Which of these ids are live user wallets (never the mint wallet). */
export async function findLiveWalletIds(db: Executor, walletIds: number[]): Promise<Set<number>> {
  if (walletIds.length === 0) return new Set()
  const rows = await db
    .selectFrom('wallets')
    .select('id')
    .where(anyOf(db, sql.ref('id'), [...new Set(walletIds)]))
    .where('deleted_at', 'is', null)
    .where('user_id', 'is not', null)
    .execute()
  return new Set(rows.map((row) => Number(row.id)))
}

export async function findWalletByAddress(db: Executor, address: string): Promise<WalletRow | undefined> {
  return db
    .selectFrom('wallets')
    .selectAll()
    .where('address', '=', address)
    .where('deleted_at', 'is', null)
    .where('user_id', 'is not', null)
    .executeTakeFirst()
}

export async function addressExists(db: Executor, address: string): Promise<boolean> {
  const row = await db.selectFrom('wallets').select('id').where('address', '=', address).executeTakeFirst()
  return row !== undefined
}

export async function listOwnedWallets(db: Executor, userId: number) {
  return db
    .selectFrom('wallets')
    .leftJoin('webhooks', 'webhooks.wallet_id', 'wallets.id')
    .select(['wallets.id', 'wallets.address', 'wallets.user_id', 'webhooks.url as webhook'])
    .where('wallets.user_id', '=', userId)
    .where('wallets.deleted_at', 'is', null)
    .orderBy('wallets.id')
    .execute()
}

export async function listAssignedWallets(db: Executor, userId: number) {
  return db
    .selectFrom('wallet_users')
    .innerJoin('wallets', 'wallets.id', 'wallet_users.wallet_id')
    .select(['wallets.id', 'wallets.address', 'wallets.user_id'])
    .where('wallet_users.user_id', '=', userId)
    .where('wallets.deleted_at', 'is', null)
    .orderBy('wallets.id')
    .execute()
}

/** True when the user owns the live wallet or is assigned to it. */
export async function canUseWallet(db: Executor, userId: number, walletId: number): Promise<boolean> {
  const row = await db
    .selectFrom('wallets')
    .select('wallets.id')
    .where('wallets.id', '=', walletId)
    .where('wallets.deleted_at', 'is', null)
    .where((eb) =>
      eb.or([
        eb('wallets.user_id', '=', userId),
        eb.exists(
          eb
            .selectFrom('wallet_users')
            .select(sql`1`.as('one'))
            .whereRef('wallet_users.wallet_id', '=', 'wallets.id')
            .where('wallet_users.user_id', '=', userId),
        ),
      ]),
    )
    .executeTakeFirst()
  return row !== undefined
}

/**
 * Locks the live wallet row for the transaction (PostgreSQL), so a transfer touching it waits for
 * an ownership change or deletion. Undefined when the wallet is gone or deleted.
 */
export async function lockWallet(db: Trx, walletId: number): Promise<WalletRow | undefined> {
  const query = db
    .selectFrom('wallets')
    .selectAll()
    .where('id', '=', walletId)
    .where('deleted_at', 'is', null)
    .where('user_id', 'is not', null)
  return forUpdate(query, db).executeTakeFirst()
}

/**
 * Holds the wallet row (shared lock, PostgreSQL) for the transaction, so an owner, user or deletion
 * change in progress (`lockWallet`) commits first and the access check after it sees it; transfers
 * (`for key share`) are not held up. SQLite serializes writers anyway.
 */
export async function holdWallet(db: Trx, walletId: number): Promise<void> {
  await holdRow(db, 'wallets', walletId)
}

/** `canUseWallet`, read once the wallet is held (`holdWallet`): for a request that then writes. */
export async function holdUsableWallet(db: Trx, userId: number, walletId: number): Promise<boolean> {
  await holdWallet(db, walletId)
  return canUseWallet(db, userId, walletId)
}

export async function markWalletDeleted(db: Executor, walletId: number): Promise<void> {
  await db.updateTable('wallets').set({ deleted_at: nowIso() }).where('id', '=', walletId).execute()
}

export async function setWalletOwner(db: Executor, walletId: number, userId: number): Promise<void> {
  await db.updateTable('wallets').set({ user_id: userId }).where('id', '=', walletId).execute()
}

// Assigned users.

export async function listWalletUsers(db: Executor, walletId: number) {
  return db
    .selectFrom('wallet_users')
    .innerJoin('users', 'users.id', 'wallet_users.user_id')
    .select(['users.id', 'users.username'])
    .where('wallet_users.wallet_id', '=', walletId)
    .orderBy('users.id')
    .execute()
}

export async function isWalletUser(db: Executor, walletId: number, userId: number): Promise<boolean> {
  const row = await db
    .selectFrom('wallet_users')
    .select('user_id')
    .where('wallet_id', '=', walletId)
    .where('user_id', '=', userId)
    .executeTakeFirst()
  return row !== undefined
}

export async function insertWalletUser(db: Executor, walletId: number, userId: number): Promise<void> {
  await db.insertInto('wallet_users').values({ wallet_id: walletId, user_id: userId, created_at: nowIso() }).execute()
}

/** Removes one assignment; false when the user was not assigned. */
export async function deleteWalletUser(db: Executor, walletId: number, userId: number): Promise<boolean> {
  const result = await db.deleteFrom('wallet_users').where('wallet_id', '=', walletId).where('user_id', '=', userId).executeTakeFirst()
  return Number(result.numDeletedRows) > 0
}

export async function deleteWalletUsers(db: Executor, walletId: number): Promise<void> {
  await db.deleteFrom('wallet_users').where('wallet_id', '=', walletId).execute()
}

// Wallet session keys.

/**
 * The key with this token hash while its wallet is live. Lookups of concurrent requests share one
 * query (`coalesce.ts`): every request with a wallet key makes one.
 */
const liveKeyByHash = coalescedStatement(
  'select ws.id, ws.wallet_id, ws.last_used_at, ws.scopes, ws.limits, ws.token_hash ' +
    'from wallet_sessions ws inner join wallets w on w.id = ws.wallet_id ' +
    'where ws.token_hash = $keys and w.deleted_at is null',
  'text',
  (row: WalletKeyRow & { token_hash: string }) => row.token_hash,
)

export type WalletKeyRow = { id: number; wallet_id: number; last_used_at: string | null; scopes: string; limits: string | null }

export async function findLiveWalletKey(db: Executor, by: { tokenHash: string } | { id: number }): Promise<WalletKeyRow | undefined> {
  if ('tokenHash' in by) return liveKeyByHash(db, by.tokenHash)
  return liveKeys(db, [by.id]).executeTakeFirst()
}

/** The keys among `keyIds` that are not revoked and whose wallet is live. */
export async function findLiveWalletKeyIds(db: Executor, keyIds: readonly number[]): Promise<Set<number>> {
  if (keyIds.length === 0) return new Set()
  return new Set((await liveKeys(db, keyIds).execute()).map((row) => row.id))
}

function liveKeys(db: Executor, keyIds: readonly number[]) {
  return db
    .selectFrom('wallet_sessions')
    .innerJoin('wallets', 'wallets.id', 'wallet_sessions.wallet_id')
    .select([
      'wallet_sessions.id',
      'wallet_sessions.wallet_id',
      'wallet_sessions.last_used_at',
      'wallet_sessions.scopes',
      'wallet_sessions.limits',
    ])
    .where('wallet_sessions.id', 'in', keyIds)
    .where('wallets.deleted_at', 'is', null)
}

/**
 * Marks the key as used now. The keys marked in the same turn of the event loop are written by one
 * statement (`db/coalesce.ts` useMarks); the promise settles once that statement has.
 */
export const touchWalletKey = useMarks('wallet_sessions')

export async function insertWalletSession(
  db: Executor,
  key: { walletId: number; userId: number; name: string; tokenHash: string; scopes: string; limits: string | null },
) {
  return db
    .insertInto('wallet_sessions')
    .values({
      wallet_id: key.walletId,
      user_id: key.userId,
      name: key.name,
      token_hash: key.tokenHash,
      created_at: nowIso(),
      last_used_at: null,
      scopes: key.scopes,
      limits: key.limits,
    })
    .returning(['id', 'wallet_id', 'name', 'scopes', 'limits'])
    .executeTakeFirstOrThrow()
}

export async function listWalletSessions(db: Executor, walletId: number) {
  return db
    .selectFrom('wallet_sessions')
    .select(['id', 'wallet_id', 'name', 'created_at', 'last_used_at', 'scopes', 'limits'])
    .where('wallet_id', '=', walletId)
    .orderBy('id')
    .execute()
}

/** Deletes one key of the wallet; false when the wallet has no such key. */
export async function deleteWalletSession(db: Executor, walletId: number, sessionId: number): Promise<boolean> {
  const result = await db.deleteFrom('wallet_sessions').where('id', '=', sessionId).where('wallet_id', '=', walletId).executeTakeFirst()
  return Number(result.numDeletedRows) > 0
}

/** Deletes every key of the wallet, or only those one user created. */
export async function deleteWalletSessions(db: Executor, walletId: number, createdBy?: number): Promise<void> {
  let query = db.deleteFrom('wallet_sessions').where('wallet_id', '=', walletId)
  if (createdBy !== undefined) query = query.where('user_id', '=', createdBy)
  await query.execute()
}

/**
 * Moves user sessions whose active wallet is `walletId` to their user's primary wallet: every
 * such session, or only those of one user.
 */
export async function moveSessionsToPrimary(db: Executor, walletId: number, userId?: number): Promise<void> {
  let query = db
    .updateTable('user_sessions')
    .set((eb) => ({
      wallet_id: eb
        .selectFrom('users')
        .select('users.primary_wallet_id')
        .whereRef('users.id', '=', 'user_sessions.user_id')
        .$castTo<number>(),
    }))
    .where('wallet_id', '=', walletId)
  if (userId !== undefined) query = query.where('user_id', '=', userId)
  await query.execute()
}
