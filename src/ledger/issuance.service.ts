import type { Db, Executor } from '../db/database.ts'
import { inTransaction } from '../db/dialect.ts'
import { AppError } from '../http/errors.ts'
import { findLiveWalletById, findLiveWalletIds } from '../wallets/wallets.service.ts'
import * as assets from './assets.repository.ts'
import { itemError } from './batches.service.ts'
import { MINT_WALLET_ID, type EventWriter, type Metadata, type Transaction } from './ledger.types.ts'
import { takeWalletTurns } from './moves.repository.ts'
import { applyUnits, committed, firstFailure, moveAssets, type Move } from './moves.ts'

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

export interface IssuanceRequest {
  asset_id: number
  entries: { wallet_id: number; quantity: number }[]
  memo?: string
  metadata?: Metadata
}

export interface IssuanceServiceDeps {
  db: Db
  events: EventWriter
}

export interface IssuanceService {
  /**
   * POST /wallets/{id}/assets: issues new units from mint. Throws W002, I003. The asset is read
   * after holding its row, so an issuance racing the asset's deletion waits for it and then finds
   * it gone: a deleted asset is never held (`assets.service.ts` deleteAsset).
   */
  issue(walletId: number, assetId: number, quantity: number, metadata?: Metadata): Promise<Transaction>
  /**
   * POST /issuances and `coffer issue --csv`: new units of one asset from mint into many wallets,
   * all or nothing: one Transaction per entry, in the entries' order, in one database transaction
   * (one atomic unit of moves, `moves.ts`). Throws W002 (`entries[i]: ` for the first entry whose
   * wallet is unknown, deleted or mint; no prefix for an unknown asset), then I003 (`entries[i]: `
   * for the first entry that would push a holding past 2^53-1).
   */
  issueToMany(request: IssuanceRequest): Promise<Transaction[]>
  /**
   * DELETE /wallets/{id}/assets/{assetId}: burns `quantity` (or all that is free: what pending
   * holds do not reserve) back to mint. Returns the Transaction, or undefined when there was
   * nothing free to burn. Throws W002, I002 (more than is free).
   */
  burn(walletId: number, assetId: number, quantity?: number): Promise<Transaction | undefined>
}

export function createIssuanceService({ db, events }: IssuanceServiceDeps): IssuanceService {
  return {
    issue: (walletId, assetId, quantity, metadata) => issueAsset(db, events, walletId, assetId, quantity, metadata),
    issueToMany: (request) => issueToMany(db, events, request),
    burn: (walletId, assetId, quantity) => burnAsset(db, events, walletId, assetId, quantity),
  }
}

async function issueAsset(
  db: Db,
  events: EventWriter,
  walletId: number,
  assetId: number,
  quantity: number,
  metadata?: Metadata,
): Promise<Transaction> {
  await adminWallet(db, walletId)
  return inTransaction(db, async (trx) => {
    await assets.holdAsset(trx, assetId)
    const asset = await adminAsset(trx, assetId)
    return moveAssets(
      trx,
      { from: MINT_WALLET_ID, to: walletId, lines: [{ asset, quantity }], memo: 'issue', kind: 'issuance', metadata },
      events,
    )
  })
}

async function issueToMany(db: Db, events: EventWriter, request: IssuanceRequest): Promise<Transaction[]> {
  const live = await findLiveWalletIds(
    db,
    request.entries.map((entry) => entry.wallet_id),
  )
  request.entries.forEach((entry, index) => {
    if (!live.has(entry.wallet_id)) throw itemError('entries', index, new AppError('W002', `no wallet ${entry.wallet_id}`))
  })
  return inTransaction(db, async (trx) => {
    await assets.holdAsset(trx, request.asset_id)
    const asset = await adminAsset(trx, request.asset_id)
    const memo = request.memo ?? 'issue'
    const moves = request.entries.map((entry): Move => ({
      from: MINT_WALLET_ID,
      to: entry.wallet_id,
      lines: [{ asset, quantity: entry.quantity }],
      memo,
      kind: 'issuance',
      metadata: request.metadata,
    }))
    const [outcomes] = await applyUnits(trx, [{ moves, atomic: true }], events)
    const failure = firstFailure(outcomes)
    // A wallet deleted since it was looked up is W000 to the ledger, W002 on an admin route.
    if (failure)
      throw itemError(
        'entries',
        failure.index,
        failure.error instanceof AppError && failure.error.code === 'W000' ? new AppError('W002', failure.error.detail) : failure.error,
      )
    return committed(outcomes)
  })
}

async function burnAsset(
  db: Db,
  events: EventWriter,
  walletId: number,
  assetId: number,
  quantity?: number,
): Promise<Transaction | undefined> {
  await adminWallet(db, walletId)
  const asset = await adminAsset(db, assetId)
  return inTransaction(db, async (trx) => {
    // The turns the burn takes anyway, first: what is free cannot change before it is burned.
    await takeWalletTurns(trx, [MINT_WALLET_ID, walletId])
    const amount = quantity ?? (await assets.findSpendable(trx, walletId, assetId, 'burn'))
    if (amount <= 0) return undefined
    return moveAssets(trx, { from: walletId, to: MINT_WALLET_ID, lines: [{ asset, quantity: amount }], memo: 'burn', kind: 'burn' }, events)
  })
}
