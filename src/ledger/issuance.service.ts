import type { Db, Executor } from '../db/database.ts'
import { inTransaction } from '../db/dialect.ts'
import { AppError } from '../http/errors.ts'
import { findLiveWalletById } from '../wallets/wallets.service.ts'
import * as assets from './assets.repository.ts'
import { MINT_WALLET_ID, type EventWriter, type Transaction } from './ledger.types.ts'
import { takeWalletTurns } from './moves.repository.ts'
import { moveAssets } from './moves.ts'

/** A live user wallet for the admin routes; W002 otherwise (unknown, deleted, or mint). */
async function adminWallet(db: Executor, walletId: number) {
  const wallet = await findLiveWalletById(db, walletId)
  if (!wallet) throw new AppError('W002', `no wallet ${walletId}`)
  return wallet
}

async function adminAsset(db: Executor, assetId: number) {
  const asset = await assets.findAssetById(db, assetId)
  if (!asset) throw new AppError('W002', `no asset ${assetId}`)
  return asset
}

/**
 * POST /wallets/{id}/assets: issues new units from mint. Throws W002, I003. The asset is read
 * after holding its row, so an issuance racing the asset's deletion waits for it and then finds
 * it gone: a deleted asset is never held (`assets.service.ts` deleteAsset).
 */
export async function issueAsset(db: Db, events: EventWriter, walletId: number, assetId: number, quantity: number): Promise<Transaction> {
  await adminWallet(db, walletId)
  return inTransaction(db, async (trx) => {
    await assets.holdAsset(trx, assetId)
    const asset = await adminAsset(trx, assetId)
    return moveAssets(trx, { from: MINT_WALLET_ID, to: walletId, lines: [{ asset, quantity }], memo: 'issue' }, events)
  })
}

/**
 * DELETE /wallets/{id}/assets/{assetId}: burns `quantity` (or all that is free: what pending holds
 * do not reserve) back to mint. Returns the Transaction, or undefined when there was nothing
 * free to burn. Throws W002, I002 (more than is free).
 */
export async function burnAsset(db: Db, events: EventWriter, walletId: number, assetId: number, quantity?: number): Promise<Transaction | undefined> {
  await adminWallet(db, walletId)
  const asset = await adminAsset(db, assetId)
  return inTransaction(db, async (trx) => {
    // The turns the burn takes anyway, first: what is free cannot change before it is burned.
    await takeWalletTurns(trx, [MINT_WALLET_ID, walletId])
    const amount = quantity ?? (await assets.findFreeQuantity(trx, walletId, assetId))
    if (amount <= 0) return undefined
    return moveAssets(trx, { from: walletId, to: MINT_WALLET_ID, lines: [{ asset, quantity: amount }], memo: 'burn' }, events)
  })
}
