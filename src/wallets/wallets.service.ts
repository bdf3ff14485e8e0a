import { describeSession, findUserById, findUserByUsername, recordActiveWallet, recordPrimaryWallet } from '../accounts/accounts.service.ts'
import { KeptReads, readKept } from '../db/commit-state.ts'
import type { Db, Executor, Trx } from '../db/database.ts'
import { inTransaction, isUniqueViolation } from '../db/dialect.ts'
import type { WalletRow } from '../db/tables.ts'
import type { UserAuth } from '../http/auth.ts'
import { AppError } from '../http/errors.ts'
import { createToken, hashToken } from '../http/tokens.ts'
import type { KeyLimits, KeyScope } from '../http/key-scopes.ts'
import { randomAddress } from './addresses.ts'
import { readKeyUsage } from './key-usage.ts'
import { describeKey, limitsToStore, normalScopes, readPolicy, type AssetCatalogue, type LimitsBody } from './key-policy.ts'
import * as wallets from './wallets.repository.ts'

// Writing last_used_at on every request would turn every read into a write; once a minute is enough.
const TOUCH_INTERVAL_MS = 60_000

/** The live keys among `keyIds` (not revoked, their wallet not deleted): what the event streams check their keys against. */
export function findLiveWalletKeyIds(db: Executor, keyIds: readonly number[]): Promise<Set<number>> {
  return wallets.findLiveWalletKeyIds(db, keyIds)
}

type KeyPolicy = ReturnType<typeof readPolicy>

/** A request's wallet key: its id, wallet, scopes and limits. */
export interface AuthenticatedKey {
  keyId: number
  walletId: number
  scopes: readonly KeyScope[]
  limits: KeyLimits | undefined
}

/** Wallet keys as requests meet them, with what spans requests: rows kept while nothing commits, and parsed policies. */
export interface WalletKeysService {
  /** Authenticates a request's wallet key (by its hash): the key, marked as used (at most once a minute); undefined when there is none. */
  authenticate(tokenHash: string): Promise<AuthenticatedKey | undefined>
  /**
   * The limits of a live wallet key by id, `{ limits: undefined }` for one without any; undefined
   * once the key is revoked or its wallet deleted. A schedule's runs are charged to the key that created it.
   */
  findLimits(db: Executor, keyId: number): Promise<{ limits: KeyLimits | undefined } | undefined>
}

/** The most recently parsed key policies kept, and the key rows kept by token hash. */
const KEPT_KEYS = 10_000

export function createWalletKeysService({ db }: { db: Db }): WalletKeysService {
  // Key rows by token hash, kept while nothing has been committed since they were read
  // (`db/commit-state.ts`); revoking a key or deleting its wallet is a commit, so it is seen at once.
  const kept = new KeptReads<string, wallets.WalletKeyRow>(KEPT_KEYS)
  // Scopes and limits parsed once per key and text: they never change after creation, and under
  // writes a key's row is read again for each request.
  const policies = new Map<number, { scopes: string; limits: string | null; policy: KeyPolicy }>()

  function policyOf(key: wallets.WalletKeyRow): KeyPolicy {
    const known = policies.get(key.id)
    if (known && known.scopes === key.scopes && known.limits === key.limits) return known.policy
    const policy = readPolicy(key.id, key.scopes, key.limits)
    if (policies.size >= KEPT_KEYS) policies.delete(policies.keys().next().value as number)
    policies.set(key.id, { scopes: key.scopes, limits: key.limits, policy })
    return policy
  }

  return {
    async authenticate(tokenHash) {
      const key = await readKept(db, kept, tokenHash, (hash) => wallets.findLiveWalletKey(db, { tokenHash: hash }))
      if (!key) return undefined
      if (!key.last_used_at || Date.now() - Date.parse(key.last_used_at) > TOUCH_INTERVAL_MS) await wallets.touchWalletKey(db, key.id)
      return { keyId: key.id, walletId: key.wallet_id, ...policyOf(key) }
    },
    async findLimits(executor, keyId) {
      const key = await wallets.findLiveWalletKey(executor, { id: keyId })
      return key && { limits: policyOf(key).limits }
    },
  }
}

/** A live (not deleted) user wallet by id; never the mint wallet. */
export function findLiveWalletById(db: Executor, walletId: number): Promise<WalletRow | undefined> {
  return wallets.findWalletByIdShared(db, walletId)
}

/** Which of these ids are live user wallets (never the mint wallet): one query for many (issuance to many wallets). */
export function findLiveWalletIds(db: Executor, walletIds: number[]): Promise<Set<number>> {
  return wallets.findLiveWalletIds(db, walletIds)
}

/** A live user wallet by address; never the mint wallet. */
export function findLiveWalletByAddress(db: Executor, address: string): Promise<WalletRow | undefined> {
  return wallets.findWalletByAddress(db, address)
}

/**
 * True when the user owns the live wallet or is assigned to it, read once the wallet row is held
 * against a change of access in progress (`wallets.repository.ts` holdWallet): for a request that
 * then grants something lasting in the same transaction.
 */
export function holdUsableWallet(trx: Trx, userId: number, walletId: number): Promise<boolean> {
  return wallets.holdUsableWallet(trx, userId, walletId)
}

/**
 * Creates a wallet owned by the user, at the given address or a random one.
 * Throws W011 when the address is taken (by any wallet, deleted ones included).
 */
export async function createWalletFor(db: Executor, userId: number, address?: string): Promise<WalletRow> {
  if (address !== undefined) {
    if (await wallets.addressExists(db, address)) throw new AppError('W011', `address "${address}" is taken`)
    try {
      return await wallets.insertWallet(db, userId, address)
    } catch (error) {
      if (isUniqueViolation(error)) throw new AppError('W011', `address "${address}" is taken`)
      throw error
    }
  }
  for (;;) {
    const candidate = randomAddress()
    if (!(await wallets.addressExists(db, candidate))) return wallets.insertWallet(db, userId, candidate)
  }
}

/** POST /user/wallets. Throws W011. */
export async function createWallet(db: Db, userId: number, address?: string) {
  const wallet = await inTransaction(db, (trx) => createWalletFor(trx, userId, address))
  return { id: wallet.id, address: wallet.address, user_id: userId }
}

/** GET /user/wallets: live wallets the user owns, with their webhook when one is set. */
export async function listOwnedWallets(db: Db, userId: number) {
  const rows = await wallets.listOwnedWallets(db, userId)
  return rows.map((row) =>
    row.webhook
      ? { id: row.id, address: row.address, user_id: row.user_id as number, webhook: row.webhook }
      : { id: row.id, address: row.address, user_id: row.user_id as number },
  )
}

/** GET /user/assigned_wallets: live wallets the user is assigned to. */
export async function listAssignedWallets(db: Db, userId: number) {
  const rows = await wallets.listAssignedWallets(db, userId)
  return rows.map((row) => ({ id: row.id, address: row.address, user_id: row.user_id as number }))
}

/*
 * The routes below act on the session's active wallet (`auth.walletId`). Sessions are moved off a
 * wallet when their user loses access to it, so W000 ("a wallet the caller may not use") only
 * answers a request that raced such a change.
 */

/** The active wallet when the caller owns it or is assigned to it. Throws W000. */
async function usableWallet(db: Executor, auth: UserAuth): Promise<number> {
  if (!(await wallets.canUseWallet(db, auth.userId, auth.walletId)))
    throw new AppError('W000', "your session's active wallet is not available to you")
  return auth.walletId
}

/**
 * `usableWallet` for a request that then writes something lasting: read once the wallet row is
 * held (`holdWallet`), so a change of access in progress is waited for and seen.
 */
async function heldUsableWallet(trx: Trx, auth: UserAuth): Promise<number> {
  if (!(await wallets.holdUsableWallet(trx, auth.userId, auth.walletId)))
    throw new AppError('W000', "your session's active wallet is not available to you")
  return auth.walletId
}

/**
 * The active wallet, locked for the rest of the transaction, when the caller owns it.
 * Throws W000 when it has been deleted, W006 when the caller does not own it (status 400, as the
 * interface requires for POST /wallet/users).
 */
async function lockOwnedWallet(trx: Trx, auth: UserAuth): Promise<WalletRow> {
  const wallet = await wallets.lockWallet(trx, auth.walletId)
  if (!wallet) throw new AppError('W000', "your session's active wallet no longer exists")
  if (wallet.user_id !== auth.userId) throw new AppError('W006', 'only the owner of the wallet may do this')
  return wallet
}

/**
 * POST /wallet/users: gives the user read/write access to the active wallet. Returns `{id, username}`.
 * Throws, in this order: W000, W006 (caller is not the owner), U003 (no such user), W003 (already
 * assigned, or the owner).
 */
export async function assignUser(db: Db, auth: UserAuth, username: string) {
  try {
    return await inTransaction(db, async (trx) => {
      const wallet = await lockOwnedWallet(trx, auth)
      const user = await findUserByUsername(trx, username)
      if (!user) throw new AppError('U003', `no user "${username}"`)
      if (user.id === wallet.user_id) throw new AppError('W003', 'the owner cannot be assigned to their own wallet')
      if (await wallets.isWalletUser(trx, wallet.id, user.id)) throw new AppError('W003', `${user.username} is already assigned`)
      await wallets.insertWalletUser(trx, wallet.id, user.id)
      return { id: user.id, username: user.username }
    })
  } catch (error) {
    if (isUniqueViolation(error)) throw new AppError('W003', `${username} is already assigned`)
    throw error
  }
}

/** The users assigned to a wallet (the owner not included), for the operator's view of it. */
export function listWalletUsers(db: Db, walletId: number) {
  return wallets.listWalletUsers(db, walletId)
}

/** GET /wallet/users: the users assigned to the active wallet (the owner not included). Throws W000. */
export async function listAssignedUsers(db: Db, auth: UserAuth) {
  return wallets.listWalletUsers(db, await usableWallet(db, auth))
}

/**
 * DELETE /wallet/users/{userid}: ends the user's access at once. Their sessions that had the wallet
 * active move to their primary wallet and the wallet keys they created for it are revoked.
 * Throws, in this order: W000, W006, U003 (the user is not assigned).
 */
export async function removeUser(db: Db, auth: UserAuth, userId: number): Promise<void> {
  await inTransaction(db, async (trx) => {
    const wallet = await lockOwnedWallet(trx, auth)
    if (!(await wallets.deleteWalletUser(trx, wallet.id, userId)))
      throw new AppError('U003', `user ${userId} is not assigned to this wallet`)
    await wallets.deleteWalletSessions(trx, wallet.id, userId)
    await wallets.moveSessionsToPrimary(trx, wallet.id, userId)
  })
}

/**
 * PUT /wallet/owner: hands the active wallet to one of its assigned users; the caller becomes an
 * assigned user in their place. Returns the wallet `{id, address, user_id}`.
 * Throws, in this order: W000, W006, W012 (it is the caller's primary wallet), W007 (the new
 * owner is not assigned).
 */
export async function transferOwnership(db: Db, auth: UserAuth, newOwnerId: number) {
  return inTransaction(db, async (trx) => {
    const wallet = await lockOwnedWallet(trx, auth)
    const caller = await findUserById(trx, auth.userId)
    if (caller?.primary_wallet_id === wallet.id) throw new AppError('W012', 'make another wallet your primary wallet first')
    if (!(await wallets.deleteWalletUser(trx, wallet.id, newOwnerId)))
      throw new AppError('W007', `user ${newOwnerId} is not assigned to this wallet`)
    await wallets.setWalletOwner(trx, wallet.id, newOwnerId)
    await wallets.insertWalletUser(trx, wallet.id, auth.userId)
    return { id: wallet.id, address: wallet.address, user_id: newOwnerId }
  })
}

/** What a new key may do: its scopes (absent: read, send, hold) and limits (`key-policy.ts`). */
export interface NewKey {
  name?: string
  scopes?: KeyScope[]
  limits?: LimitsBody
}

/**
 * POST /wallet/sessions: issues a key to the active wallet with the given scopes and limits, for
 * the owner or an assigned user. Returns the key object with its `token`; only the token's hash is
 * stored, so this is the one time it is shown. Throws W000 (also for a recipient that is no
 * wallet), I001 (a cap on an unknown asset), G000 (an unknown limit).
 */
export async function createWalletSession(db: Db, auth: UserAuth, body: NewKey, assets: AssetCatalogue) {
  const limits = await limitsToStore(body.limits, assets, (ids) => wallets.findLiveWalletIds(db, ids))
  const key = await inTransaction(db, async (trx) => {
    // Not while the user is being removed from it: removal revokes the keys they created first.
    const walletId = await heldUsableWallet(trx, auth)
    const token = createToken('wallet')
    const scopes = normalScopes(body.scopes).join(',')
    const row = await wallets.insertWalletSession(trx, {
      walletId,
      userId: auth.userId,
      name: body.name ?? '',
      tokenHash: hashToken(token),
      scopes,
      limits,
    })
    return { ...row, token }
  })
  return describeKey(key, key.limits === null ? new Map<number, string>() : await assetNames(assets), undefined)
}

/** GET /wallet/sessions: every key of the active wallet, whoever created it, without tokens. Throws W000. */
export async function listWalletSessions(db: Db, auth: UserAuth, assets: AssetCatalogue) {
  const keys = await wallets.listWalletSessions(db, await usableWallet(db, auth))
  const limited = keys.filter((key) => key.limits !== null)
  const names = limited.length > 0 ? await assetNames(assets) : new Map<number, string>()
  const caps = new Map(limited.map((key) => [key.id, readPolicy(key.id, key.scopes, key.limits).limits?.perDay?.keys() ?? []]))
  const usage = await readKeyUsage(db, caps, Date.now())
  return keys.map((key) => describeKey(key, names, usage.get(key.id)))
}

async function assetNames(assets: AssetCatalogue): Promise<Map<number, string>> {
  return new Map((await assets()).map((asset) => [asset.id, asset.name]))
}

/** DELETE /wallet/sessions/{id}: revokes one key of the active wallet. Throws W000, W005 (no such key on this wallet). */
export async function revokeWalletSession(db: Db, auth: UserAuth, sessionId: number): Promise<void> {
  const walletId = await usableWallet(db, auth)
  if (!(await wallets.deleteWalletSession(db, walletId, sessionId))) throw new AppError('W005', `the wallet has no session ${sessionId}`)
}

/** DELETE /wallet/sessions: revokes every key of the active wallet. Throws W000. */
export async function revokeWalletSessions(db: Db, auth: UserAuth): Promise<void> {
  await wallets.deleteWalletSessions(db, await usableWallet(db, auth))
}

/** PUT /user/wallet: makes a wallet the user owns their primary wallet. Throws W000 unless the user owns the live wallet. */
export async function setPrimaryWallet(db: Db, auth: UserAuth, walletId: number) {
  return inTransaction(db, async (trx) => {
    // Not while the wallet is being handed over or deleted: a primary wallet is always its user's own.
    await wallets.holdWallet(trx, walletId)
    const wallet = await wallets.findWalletById(trx, walletId)
    if (!wallet || wallet.user_id !== auth.userId) throw new AppError('W000', `you own no wallet ${walletId}`)
    await recordPrimaryWallet(trx, auth.userId, walletId)
    return { id: auth.userId, primary_wallet_id: walletId }
  })
}

/** PUT /user/session/wallet: the session acts on another wallet. Throws W000 unless the user owns or is assigned to the live wallet. */
export async function setActiveWallet(db: Db, auth: UserAuth, walletId: number) {
  await inTransaction(db, async (trx) => {
    // Not while the user is being removed from it: removal moves their sessions off it first.
    if (!(await wallets.holdUsableWallet(trx, auth.userId, walletId))) throw new AppError('W000', `you may not use wallet ${walletId}`)
    await recordActiveWallet(trx, auth.sessionId, walletId)
  })
  return describeSession(db, { ...auth, walletId })
}

/**
 * The first half of DELETE /wallet (`flows/wallet-deletion.ts`), in the caller's transaction:
 * locks the active wallet and checks that it may be deleted. Returns it and the caller's primary
 * wallet, where its holdings go. Throws, in this order: W000, W006, W008 (it is the primary wallet).
 */
export async function lockWalletForDeletion(trx: Trx, auth: UserAuth): Promise<{ walletId: number; primaryWalletId: number }> {
  const wallet = await lockOwnedWallet(trx, auth)
  const owner = await findUserById(trx, auth.userId)
  if (!owner?.primary_wallet_id) throw new AppError('W000', 'you have no primary wallet')
  if (owner.primary_wallet_id === wallet.id) throw new AppError('W008', 'make another wallet your primary wallet first')
  return { walletId: wallet.id, primaryWalletId: owner.primary_wallet_id }
}

/**
 * The last half of DELETE /wallet, once its holdings are swept: removes its keys and assignments,
 * moves sessions that had it active to their user's primary wallet, and marks it deleted. The row
 * stays, so history keeps its address and the address is never reused.
 */
export async function finishWalletDeletion(trx: Trx, walletId: number): Promise<void> {
  await wallets.deleteWalletSessions(trx, walletId)
  await wallets.deleteWalletUsers(trx, walletId)
  await wallets.moveSessionsToPrimary(trx, walletId)
  await wallets.markWalletDeleted(trx, walletId)
}
