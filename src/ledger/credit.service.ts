import { sql } from 'kysely'
import type { Db, Executor, Trx } from '../db/database.ts'
import { inTransaction, isPostgres, nowIso } from '../db/dialect.ts'
import { AppError } from '../http/errors.ts'
import { findLiveWalletById } from '../wallets/wallets.service.ts'
import { findAssetById, holdAsset, isAssetExpiring } from './assets.repository.ts'
import { MINT_WALLET_ID, type EventWriter } from './ledger.types.ts'
import { findHeld, holdingKey, takeWalletTurns } from './moves.repository.ts'

/** A credit limit as `PUT /wallets/{id}/credit` answers it. */
export interface CreditLimit {
  wallet_id: number
  asset_id: number
  limit: number
}

export interface CreditService {
  /**
   * PUT /wallets/{id}/credit (admin): the wallet's holding of the asset may go down to `-limit`
   * from now on (0 removes the credit). A limit below what the wallet owes is allowed: it then
   * spends nothing of that asset until it is back above `-limit`. Throws W002 (no such wallet, the
   * mint, or no such asset), C000 (a limit on an asset ever issued with an expiry).
   */
  setLimit(walletId: number, assetId: number, limit: number): Promise<CreditLimit>
  /** Throws C001 when the wallet owes (a holding below zero), in the caller's transaction (wallet deletion). */
  refuseDebt(trx: Trx, walletId: number): Promise<void>
}

export function createCreditService({ db, events, clock }: { db: Db; events: EventWriter; clock: () => string }): CreditService {
  return {
    setLimit: (walletId, assetId, limit) => setLimit(db, events, clock, walletId, assetId, limit),
    refuseDebt: async (trx, walletId) => {
      const owed = await trx
        .selectFrom('holdings')
        .select(['asset_id', 'quantity'])
        .where('wallet_id', '=', walletId)
        .where('quantity', '<', 0)
        .orderBy('asset_id')
        .executeTakeFirst()
      if (owed) throw new AppError('C001', `the wallet owes ${-Number(owed.quantity)} of asset ${owed.asset_id}`)
    },
  }
}

async function setLimit(
  db: Db,
  events: EventWriter,
  clock: () => string,
  walletId: number,
  assetId: number,
  limit: number,
): Promise<CreditLimit> {
  return inTransaction(db, async (trx) => {
    // The wallet's turn, as every move of it takes: the limit changes between its moves, never
    // during one, and the last transaction id read below orders it among them.
    await takeWalletTurns(trx, [walletId])
    if (!(await findLiveWalletById(trx, walletId))) throw new AppError('W002', `no wallet ${walletId}`)
    await holdAsset(trx, assetId)
    const asset = await findAssetById(trx, assetId)
    if (!asset) throw new AppError('W002', `no asset ${assetId}`)
    // Credit and expiry don't mix: a debt of units that expire has no meaning (`docs/credit.md`).
    if (limit > 0 && (await isAssetExpiring(trx, assetId)))
      throw new AppError('C000', `${asset.name} has been issued with an expiry: it cannot be lent`)
    const before = await trx
      .selectFrom('holdings')
      .select(['wallet_id', 'asset_id', 'quantity', 'held', 'credit_limit'])
      .where('wallet_id', '=', walletId)
      .where('asset_id', '=', assetId)
      .executeTakeFirst()
    const updated = await trx
      .updateTable('holdings')
      .set({ credit_limit: limit })
      .where('wallet_id', '=', walletId)
      .where('asset_id', '=', assetId)
      .executeTakeFirst()
    if (Number(updated.numUpdatedRows) === 0 && limit > 0)
      await trx.insertInto('holdings').values({ wallet_id: walletId, asset_id: assetId, quantity: 0, credit_limit: limit }).execute()
    await trx
      .insertInto('credit_limits')
      .values({
        wallet_id: walletId,
        asset_id: assetId,
        credit_limit: limit,
        set_at: nowIso(),
        after_transaction: await lastTransactionId(trx),
      })
      .execute()
    // A new limit is a change of what the wallet can spend: balance monitors follow it as they follow moves.
    if (events.watchBalances && Number(before?.credit_limit ?? 0) !== limit) {
      const quantity = Number(before?.quantity ?? 0)
      const held = before ? ((await findHeld(trx, [before], [], clock())).get(holdingKey(walletId, assetId)) ?? 0) : 0
      const state = { quantity, held, creditLimit: Number(before?.credit_limit ?? 0) }
      await events.watchBalances(trx, [{ walletId, asset, before: state, after: { ...state, creditLimit: limit } }])
    }
    return { wallet_id: walletId, asset_id: assetId, limit }
  })
}

/**
 * The last transaction id drawn so far. Under the wallet's turn, every transaction of the wallet
 * committed before has an id at most this, and every later one draws a greater id.
 */
async function lastTransactionId(db: Executor): Promise<number> {
  const { rows } = isPostgres(db)
    ? await sql<{ last: string | number }>`select case when is_called then last_value else 0 end as last from transactions_id_seq`.execute(
        db,
      )
    : await sql<{ last: number }>`
        select max(coalesce((select seq from sqlite_sequence where name = 'transactions'), 0),
                   coalesce((select max(id) from transactions), 0)) as last`.execute(db)
  return Number(rows[0].last)
}

/**
 * What wallets below zero owe, by asset name, and how many wallets owe anything (`/metrics`). Only
 * a holding that has had a credit limit can be below zero (mint aside), so the read starts from the
 * limits ever set (`credit_limits`), not from every holding.
 */
export async function findDebts(db: Executor): Promise<{ owed: Map<string, number>; wallets: number }> {
  const { rows } = await sql<{ name: string; wallet_id: number | string; quantity: number | string }>`
    select assets.name, holdings.wallet_id, holdings.quantity
    from (select distinct wallet_id, asset_id from credit_limits) as credit
    join holdings on holdings.wallet_id = credit.wallet_id and holdings.asset_id = credit.asset_id
    join assets on assets.id = holdings.asset_id
    where holdings.quantity < 0 and holdings.wallet_id <> ${MINT_WALLET_ID}`.execute(db)
  const owed = new Map<string, number>()
  for (const row of rows) owed.set(row.name, (owed.get(row.name) ?? 0) - Number(row.quantity))
  return { owed, wallets: new Set(rows.map((row) => Number(row.wallet_id))).size }
}
