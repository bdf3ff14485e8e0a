import { createUser, hashNewPassword, recordPrimaryWallet } from '../accounts/accounts.service.ts'
import type { Db } from '../db/database.ts'
import { inTransaction, isUniqueViolation } from '../db/dialect.ts'
import { AppError } from '../http/errors.ts'
import { createWalletFor } from '../wallets/wallets.service.ts'

/**
 * POST /users: creates the user and their primary wallet (random address) in one transaction.
 * Throws U000 when the username is taken, case-insensitively.
 */
export async function registerUser(db: Db, username: string, password: string) {
  const passwordHash = await hashNewPassword(password)
  try {
    return await inTransaction(db, async (trx) => {
      const user = await createUser(trx, username, passwordHash)
      const wallet = await createWalletFor(trx, user.id)
      await recordPrimaryWallet(trx, user.id, wallet.id)
      return { id: user.id, username: user.username, primary_wallet_id: wallet.id, wallet_address: wallet.address }
    })
  } catch (error) {
    if (isUniqueViolation(error)) throw new AppError('U000', `username "${username}" is taken`)
    throw error
  }
}
