import { sql } from 'kysely'
import type { Executor } from '../db/database.ts'
import { nowIso } from '../db/dialect.ts'
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
