import type { Db, Executor } from '../db/database.ts'
import { inTransaction, isUniqueViolation } from '../db/dialect.ts'
import type { WalletRow } from '../db/tables.ts'
import { AppError } from '../http/errors.ts'
import { randomAddress } from './addresses.ts'
import * as wallets from './wallets.repository.ts'

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
  return rows.map((row) => (row.webhook ? { id: row.id, address: row.address, user_id: row.user_id as number, webhook: row.webhook } : { id: row.id, address: row.address, user_id: row.user_id as number }))
}

/** GET /user/assigned_wallets: live wallets the user is assigned to. */
export async function listAssignedWallets(db: Db, userId: number) {
  const rows = await wallets.listAssignedWallets(db, userId)
  return rows.map((row) => ({ id: row.id, address: row.address, user_id: row.user_id as number }))
}
