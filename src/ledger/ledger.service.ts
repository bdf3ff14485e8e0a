import crypto from 'node:crypto'
import type { Db, Executor } from '../db/database.ts'
import { inTransaction, isUniqueViolation } from '../db/dialect.ts'
import { AppError } from '../http/errors.ts'
import { findPrimaryWalletByUsername } from '../accounts/accounts.repository.ts'
import { findWalletByAddress, findWalletById } from '../wallets/wallets.repository.ts'
import * as assets from './assets.repository.ts'
import { inGroupCommit } from './group-commit.ts'
import { IdempotencyConflict, moveAssets } from './moves.ts'
import * as ledger from './transactions.repository.ts'
import { MINT_WALLET_ID, type Line, type Transaction } from './transactions.repository.ts'

export interface SendRequest {
  recipient: string | number
  type?: 0 | 1 | 2
  memo?: string
  assets: Record<string, number>
}

export interface SendResult {
  status: number
  body: Transaction
  replayed: boolean
}

/** Resolves the recipient of a transfer. Throws U003 (unknown username) or W000 (unknown wallet). */
async function resolveRecipient(db: Executor, recipient: string | number, type: 0 | 1 | 2): Promise<number> {
  const text = String(recipient)
  if (type === 0) {
    const walletId = /^[A-Za-z0-9]{2,32}$/.test(text) ? await findPrimaryWalletByUsername(db, text) : undefined
    if (walletId === undefined) throw new AppError('U003', `no user "${text}"`)
    return walletId
  }
  if (type === 1) {
    const wallet = /^[a-z]{3,24}$/.test(text) ? await findWalletByAddress(db, text) : undefined
    if (!wallet) throw new AppError('W000', `no wallet at address "${text}"`)
    return wallet.id
  }
  if (!/^[1-9][0-9]{0,15}$/.test(text) || !Number.isSafeInteger(Number(text))) throw new AppError('G000', 'recipient must be a wallet id')
  const wallet = await findWalletById(db, Number(text))
  if (!wallet) throw new AppError('W000', `no wallet ${text}`)
  return wallet.id
}

/** Resolves asset names to live assets. Throws I001 naming the first unknown one. */
async function resolveLines(db: Executor, requested: Record<string, number>): Promise<Line[]> {
  const names = Object.keys(requested)
  const found = await Promise.all(names.map((name) => assets.findAssetByName(db, name)))
  const lines = new Map<number, Line>()
  names.forEach((name, index) => {
    const asset = found[index]
    if (!asset) throw new AppError('I001', `no asset named "${name}"`)
    const quantity = (lines.get(asset.id)?.quantity ?? 0) + requested[name]
    if (!Number.isSafeInteger(quantity)) throw new AppError('I003', `the quantity of ${asset.name} exceeds ${ledger.MAX_QUANTITY}`)
    lines.set(asset.id, { asset, quantity })
  })
  return [...lines.values()]
}

/**
 * What an Idempotency-Key's request is, for telling a retry from a different request: the fields
 * that decide what the transfer does, written one way. Unknown fields are ignored (contract §1),
 * a missing memo is the empty one, a wallet id may be a string or a number, and asset names are
 * case-insensitive (quantities of one asset named twice add up, as the transfer does).
 */
function fingerprint(request: SendRequest): string {
  const type = request.type ?? 0
  const assets = new Map<string, number>()
  for (const [name, quantity] of Object.entries(request.assets)) {
    const key = name.toLowerCase()
    assets.set(key, (assets.get(key) ?? 0) + quantity)
  }
  const lines = [...assets].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
  const canonical = JSON.stringify([type, type === 2 ? Number(request.recipient) : request.recipient, request.memo ?? '', lines])
  return crypto.createHash('sha256').update(canonical).digest('hex')
}

/** Keys whose first request is still running in this process (contract: G004). */
const inFlight = new Set<string>()

async function replay(db: Executor, walletId: number, key: string, requestHash: string): Promise<SendResult | undefined> {
  const stored = await db.selectFrom('idempotency_keys').selectAll().where('wallet_id', '=', walletId).where('key', '=', key).executeTakeFirst()
  if (!stored) return undefined
  if (stored.request_hash !== requestHash) throw new AppError('G003', 'this Idempotency-Key was used for a different request')
  return { status: stored.status_code, body: JSON.parse(stored.response_body) as Transaction, replayed: true }
}

/**
 * POST /wallet/transactions: sends assets from the wallet to a recipient, all or nothing.
 * With an Idempotency-Key, a repeat of the same request returns the first response and moves
 * nothing. Throws, in this order: G003/G004 (key), U003/W000 (recipient), W013, I001, I002, I003.
 */
export async function sendTransaction(db: Db, walletId: number, request: SendRequest, idempotencyKey?: string): Promise<SendResult> {
  const requestHash = idempotencyKey === undefined ? '' : fingerprint(request)
  const flightKey = `${walletId}:${idempotencyKey}`
  if (idempotencyKey !== undefined) {
    const previous = await replay(db, walletId, idempotencyKey, requestHash)
    if (previous) return previous
    if (inFlight.has(flightKey)) throw new AppError('G004', 'the first request with this Idempotency-Key is still running')
    inFlight.add(flightKey)
  }
  try {
    // Both lookups at once; their errors still come in the documented order.
    const [to, lines] = await Promise.allSettled([resolveRecipient(db, request.recipient, request.type ?? 0), resolveLines(db, request.assets)]).then(([recipient, found]) => {
      if (recipient.status === 'rejected') throw recipient.reason
      if (recipient.value === walletId) throw new AppError('W013')
      if (found.status === 'rejected') throw found.reason
      return [recipient.value, found.value] as const
    })
    // Committed together with the transfers that arrive alongside it (group-commit.ts).
    const idempotency = idempotencyKey === undefined ? undefined : { key: idempotencyKey, requestHash }
    const transaction = await inGroupCommit(db, { from: walletId, to, lines, memo: request.memo ?? '', idempotency })
    return { status: 201, body: transaction, replayed: false }
  } catch (error) {
    // Another instance committed the same key first: answer with its result.
    if (idempotencyKey !== undefined && (error instanceof IdempotencyConflict || isUniqueViolation(error))) {
      const previous = await replay(db, walletId, idempotencyKey, requestHash)
      if (previous) return previous
    }
    throw error
  } finally {
    if (idempotencyKey !== undefined) inFlight.delete(flightKey)
  }
}

/** A live user wallet for the admin routes; W002 otherwise (unknown, deleted, or mint). */
async function adminWallet(db: Executor, walletId: number) {
  const wallet = await findWalletById(db, walletId)
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
export async function issueAsset(db: Db, walletId: number, assetId: number, quantity: number): Promise<Transaction> {
  await adminWallet(db, walletId)
  return inTransaction(db, async (trx) => {
    await assets.holdAsset(trx, assetId)
    const asset = await adminAsset(trx, assetId)
    return moveAssets(trx, { from: MINT_WALLET_ID, to: walletId, lines: [{ asset, quantity }], memo: 'issue' })
  })
}

/**
 * DELETE /wallets/{id}/assets/{assetId}: burns `quantity` (or the whole holding) back to mint.
 * Returns the Transaction, or undefined when there was nothing to burn. Throws W002, I002.
 */
export async function burnAsset(db: Db, walletId: number, assetId: number, quantity?: number): Promise<Transaction | undefined> {
  await adminWallet(db, walletId)
  const asset = await adminAsset(db, assetId)
  return inTransaction(db, async (trx) => {
    const amount = quantity ?? (await assets.findHolding(trx, walletId, assetId))
    if (amount === 0) return undefined
    return moveAssets(trx, { from: walletId, to: MINT_WALLET_ID, lines: [{ asset, quantity: amount }], memo: 'burn' })
  })
}

/** GET /wallet/assets. */
export function listHoldings(db: Db, walletId: number) {
  return assets.listHoldings(db, walletId)
}

export interface ListQuery {
  limit?: number
  offset?: number
  before?: number
  after?: number
  asset?: string
  direction?: 'sent' | 'received'
  since?: string
  until?: string
}

/** GET /wallet/transactions: a page, newest first, and whether there is a next page. */
export async function listWalletTransactions(db: Db, walletId: number, query: ListQuery) {
  const filter = await journalFilter(db, query)
  if (!filter) return { transactions: [], more: false }
  return ledger.listTransactions(db, { ...filter, walletId, direction: query.direction })
}

/**
 * GET /admin/transactions: a page of the whole journal, or of one wallet's history when `walletId`
 * is given (deleted wallets included), newest first, and whether there is a next page.
 */
export async function listJournal(db: Db, query: Omit<ListQuery, 'direction'> & { walletId?: number }) {
  const filter = await journalFilter(db, query)
  if (!filter) return { transactions: [], more: false }
  if (query.walletId !== undefined) return ledger.listTransactions(db, { ...filter, walletId: query.walletId })
  return ledger.listJournal(db, filter)
}

/** The query's filters as stored values; undefined when they name an asset that does not exist. */
async function journalFilter(db: Db, query: ListQuery) {
  const since = storedTime(query.since)
  const until = storedTime(query.until)
  let assetId: number | undefined
  if (query.asset !== undefined) {
    const asset = (await assets.findAssetsByNames(db, [query.asset])).get(query.asset.toLowerCase())
    if (!asset) return undefined
    assetId = asset.id
  }
  return { limit: query.limit ?? 10, offset: query.offset ?? 0, before: query.before, after: query.after, assetId, since, until }
}

// Stored timestamps are `YYYY-MM-DDTHH:mm:ss.sssZ` and compared as text, so a bound is written
// the same way; one past year 9999 (a later offset, say) is held at the last such instant.
const LAST_STORABLE = Date.parse('9999-12-31T23:59:59.999Z')

/** A query's timestamp (any offset) as stored timestamps are written; G002 if it names no instant. */
function storedTime(stamp?: string): string | undefined {
  if (stamp === undefined) return undefined
  const time = Date.parse(stamp)
  // The format allows a leap second (23:59:60), which no stored timestamp can be.
  if (Number.isNaN(time)) throw new AppError('G002', `${stamp} is not a valid time`)
  return new Date(Math.min(Math.max(time, 0), LAST_STORABLE)).toISOString()
}

