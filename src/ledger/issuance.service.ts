import type { Db, Executor, Trx } from '../db/database.ts'
import { inTransaction } from '../db/dialect.ts'
import { AppError } from '../http/errors.ts'
import { findLiveWalletById, findLiveWalletIds } from '../wallets/wallets.service.ts'
import * as assets from './assets.repository.ts'
import { itemError } from './batches.service.ts'
import { MINT_WALLET_ID, type Asset, type EventWriter, type Metadata, type Transaction } from './ledger.types.ts'
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
  /** When every entry's units expire. */
  expires_at?: string
}

export interface IssuanceServiceDeps {
  db: Db
  events: EventWriter
  clock: () => string
}

/** How far ahead an issuance's `expires_at` may be: at least a minute, at most 10 years. */
const MIN_EXPIRY_MS = 60_000
const MAX_EXPIRY_MS = 10 * 365.25 * 86_400_000

/** `expires_at` as stored (ISO, UTC, milliseconds). Throws G000 unless it is a minute to 10 years after `now`. */
function expiryInstant(expiresAt: string, now: string): string {
  const time = Date.parse(expiresAt)
  const ahead = time - Date.parse(now)
  if (Number.isNaN(time) || ahead < MIN_EXPIRY_MS || ahead > MAX_EXPIRY_MS)
    throw new AppError('G000', `expires_at must be a time at least a minute and at most 10 years ahead`)
  return new Date(time).toISOString()
}

/** The asset as one that has had expiring units (once, under the asset's row held by the caller). */
async function markExpiring(trx: Trx, asset: Asset): Promise<void> {
  await assets.markAssetExpiring(trx, asset.id)
  // Credit and expiry don't mix: read after the mark, which waits for a credit limit being set
  // (it holds the asset's row), so one of the two always sees the other.
  if (await assets.hasCredit(trx, asset.id))
    throw new AppError('C000', `${asset.name} has a credit limit or a debt: its units cannot expire`)
}

export interface IssuanceService {
  /**
   * POST /wallets/{id}/assets: issues new units from mint. Throws W002, I003. The asset is read
   * after holding its row, so an issuance racing the asset's deletion waits for it and then finds
   * it gone: a deleted asset is never held (`assets.service.ts` deleteAsset).
   */
  issue(walletId: number, assetId: number, quantity: number, metadata?: Metadata, expiresAt?: string): Promise<Transaction>
  /**
   * POST /issuances and `coffer issue --csv`: new units of one asset from mint into many wallets
   * (with `expires_at`, units that expire then; G000 unless a minute to 10 years ahead),
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

export function createIssuanceService({ db, events, clock }: IssuanceServiceDeps): IssuanceService {
  return {
    issue: (walletId, assetId, quantity, metadata, expiresAt) =>
      issueToMany(
        db,
        events,
        clock,
        { asset_id: assetId, entries: [{ wallet_id: walletId, quantity }], metadata, expires_at: expiresAt },
        true,
      ).then(([transaction]) => transaction),
    issueToMany: (request) => issueToMany(db, events, clock, request),
    burn: (walletId, assetId, quantity) => burnAsset(db, events, clock, walletId, assetId, quantity),
  }
}

/** One issuance or many; `single` answers as POST /wallets/{id}/assets does (no `entries[i]: `). */
async function issueToMany(
  db: Db,
  events: EventWriter,
  clock: () => string,
  request: IssuanceRequest,
  single = false,
): Promise<Transaction[]> {
  const expiresAt = request.expires_at === undefined ? undefined : expiryInstant(request.expires_at, clock())
  const entryError = (index: number, error: AppError) => (single ? error : itemError('entries', index, error))
  const live = await findLiveWalletIds(
    db,
    request.entries.map((entry) => entry.wallet_id),
  )
  request.entries.forEach((entry, index) => {
    if (!live.has(entry.wallet_id)) throw entryError(index, new AppError('W002', `no wallet ${entry.wallet_id}`))
  })
  return inTransaction(db, async (trx) => {
    // One with an expiry may mark the asset (`markExpiring`), so it locks the row for update at once:
    // two first expiring issuances holding it shared would each wait for the other's share to end.
    await (expiresAt === undefined ? assets.holdAsset(trx, request.asset_id) : assets.lockAsset(trx, request.asset_id))
    const asset = await adminAsset(trx, request.asset_id)
    if (expiresAt !== undefined) await markExpiring(trx, asset)
    const memo = request.memo ?? 'issue'
    const moves = request.entries.map((entry): Move => ({
      from: MINT_WALLET_ID,
      to: entry.wallet_id,
      lines: [{ asset, quantity: entry.quantity }],
      memo,
      kind: 'issuance',
      metadata: request.metadata,
      lots: expiresAt === undefined ? undefined : [{ assetId: asset.id, expiresAt, quantity: entry.quantity }],
    }))
    const [outcomes] = await applyUnits(trx, [{ moves, atomic: true }], events, clock)
    const failure = firstFailure(outcomes)
    // A wallet deleted since it was looked up is W000 to the ledger, W002 on an admin route.
    if (failure) {
      const error = failure.error
      if (!(error instanceof AppError)) throw error
      throw entryError(failure.index, error.code === 'W000' ? new AppError('W002', error.detail) : error)
    }
    return committed(outcomes)
  })
}

async function burnAsset(
  db: Db,
  events: EventWriter,
  clock: () => string,
  walletId: number,
  assetId: number,
  quantity?: number,
): Promise<Transaction | undefined> {
  await adminWallet(db, walletId)
  const asset = await adminAsset(db, assetId)
  return inTransaction(db, async (trx) => {
    // The turns the burn takes anyway, first: what is free cannot change before it is burned.
    await takeWalletTurns(trx, [MINT_WALLET_ID, walletId])
    const amount = quantity ?? (await assets.findSpendable(trx, walletId, assetId, 'burn', clock()))
    if (amount <= 0) return undefined
    const move: Move = { from: walletId, to: MINT_WALLET_ID, lines: [{ asset, quantity: amount }], memo: 'burn', kind: 'burn' }
    return moveAssets(trx, move, events, clock)
  })
}
