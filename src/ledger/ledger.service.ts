import type { KeyLimits } from '../http/key-scopes.ts'
import type { Database, Executor } from '../db/database.ts'
import { listHoldings } from './assets.repository.ts'
import { sendBatch, type BatchBody, type BatchRequest } from './batches.service.ts'
import { GroupCommitter } from './group-committer.ts'
import { HoldsService, type CaptureRequest, type HoldRequest } from './holds.service.ts'
import { Idempotency, type Answer, type SendRequest, type SendResult } from './idempotency.ts'
import { burnAsset, issueAsset, issueToMany, type IssuanceRequest } from './issuance.service.ts'
import type { EventWriter, Hold, Metadata, Transaction } from './ledger.types.ts'
import { moveAssets } from './moves.ts'
import { refund, reverse, type ReversalRequest } from './reversals.service.ts'
import { TransfersService } from './transfers.service.ts'

export { takeWalletTurns } from './moves.repository.ts'
export type { SendRequest, SendResult } from './idempotency.ts'
export type { CaptureRequest, HoldRequest } from './holds.service.ts'
export type { BatchBody, BatchRequest } from './batches.service.ts'
export type { IssuanceRequest } from './issuance.service.ts'
export type { ReversalRequest } from './reversals.service.ts'

/**
 * The ledger as one part, built once per app (`buildApp`) or per CLI run from its storage, its
 * event writer and its config, and closed with them: every write of assets goes through it.
 */
export interface Ledger {
  /** POST /wallet/transactions (`transfers.service.ts`). */
  send(walletId: number, request: SendRequest, idempotencyKey?: string, limits?: KeyLimits): Promise<SendResult>
  /** POST /wallet/transactions/batch (`batches.service.ts`). */
  sendBatch(walletId: number, request: BatchRequest, idempotencyKey?: string, limits?: KeyLimits): Promise<Answer<BatchBody>>
  /** POST /wallets/{id}/assets (`issuance.service.ts`). */
  issue(walletId: number, assetId: number, quantity: number, metadata?: Metadata): Promise<Transaction>
  /** POST /issuances and `coffer issue --csv` (`issuance.service.ts`). */
  issueToMany(request: IssuanceRequest): Promise<Transaction[]>
  /** DELETE /wallets/{id}/assets/{assetId} (`issuance.service.ts`). */
  burn(walletId: number, assetId: number, quantity?: number): Promise<Transaction | undefined>
  /**
   * Moves every positive holding of `from` to `to` as one Transaction, in the caller's database
   * transaction (wallet deletion); undefined when `from` holds nothing. Throws I003 when a
   * holding of `to` would overflow.
   */
  sweep(trx: Executor, from: number, to: number, memo: string): Promise<Transaction | undefined>
  /** POST /wallet/transactions/{id}/refund (`reversals.service.ts`). */
  refund(
    walletId: number,
    transactionId: number,
    request: ReversalRequest,
    idempotencyKey?: string,
    limits?: KeyLimits,
  ): Promise<SendResult>
  /** POST /transactions/{id}/reversal (`reversals.service.ts`). */
  reverse(transactionId: number, request: ReversalRequest, idempotencyKey?: string): Promise<SendResult>
  /** POST /wallet/holds (`holds.service.ts`). */
  hold(walletId: number, request: HoldRequest, idempotencyKey?: string, limits?: KeyLimits): Promise<Answer<Hold>>
  /** POST /wallet/holds/{id}/capture (`holds.service.ts`). */
  capture(walletId: number, holdId: number, request: CaptureRequest, idempotencyKey?: string): Promise<Answer<Transaction>>
  /** POST /wallet/holds/{id}/void (`holds.service.ts`). */
  voidHold(walletId: number, holdId: number): Promise<Hold>
  /** Writes the expiry of up to `limit` holds whose time has come; answers how many (`hold-expiry.plugin.ts`). */
  expireDueHolds(limit: number): Promise<number>
  /** The wallets on the other side of the wallet's unsettled holds (wallet deletion takes their turns with its own). */
  findHoldCounterparties(db: Executor, walletId: number): Promise<number[]>
  /** Voids (or, past their expiry, expires) every unsettled hold of the wallet, either side, in the caller's transaction (wallet deletion). */
  settleHoldsOf(trx: Executor, walletId: number): Promise<void>
  /** Waits for the transfers in flight to commit (the app is closing). */
  close(): Promise<void>
}

export interface LedgerOptions {
  database: Database
  /** Records the events of every transaction written (`events/outbox.ts`). */
  events: EventWriter
  /** Most transfers committed together; by default `DEFAULT_MAX_BATCH` of the dialect. */
  maxBatch?: number
  /** Told the size of every batch of transfers committed together (metrics). */
  onBatch?: (size: number) => void
}

/**
 * Transfers per group commit, measured (docs/performance.md): SQLite commits in process and gains
 * from large batches; PostgreSQL runs the next batch's BEGIN early, so smaller ones keep it busy.
 */
export const DEFAULT_MAX_BATCH = { sqlite: 128, postgres: 64 } as const

export function createLedger({ database, events, maxBatch, onBatch }: LedgerOptions): Ledger {
  const { db, dialect } = database
  // SQLite has one connection: a transaction begun early would hold it from every other query.
  const committer = new GroupCommitter(db, events, {
    maxBatch: maxBatch ?? DEFAULT_MAX_BATCH[dialect],
    beginEarly: dialect === 'postgres',
    onBatch,
  })
  // One key space per wallet for transfers, batches, refunds and holds, and one set of keys in flight (G004).
  const idempotency = new Idempotency(db)
  const transfers = new TransfersService(db, committer, idempotency)
  const holds = new HoldsService(db, events, committer, idempotency)
  return {
    send: (walletId, request, idempotencyKey, limits) => transfers.send(walletId, request, idempotencyKey, limits),
    sendBatch: (walletId, request, idempotencyKey, limits) =>
      sendBatch({ db, committer, idempotency }, walletId, request, idempotencyKey, limits),
    issue: (walletId, assetId, quantity, metadata) => issueAsset(db, events, walletId, assetId, quantity, metadata),
    issueToMany: (request) => issueToMany(db, events, request),
    burn: (walletId, assetId, quantity) => burnAsset(db, events, walletId, assetId, quantity),
    async sweep(trx, from, to, memo) {
      const lines = (await listHoldings(trx, from)).map(({ asset, quantity }) => ({ asset, quantity }))
      return lines.length === 0 ? undefined : moveAssets(trx, { from, to, lines, memo, kind: 'sweep' }, events)
    },
    refund: (walletId, transactionId, request, idempotencyKey, limits) =>
      refund({ db, events, idempotency }, walletId, transactionId, request, idempotencyKey, limits),
    reverse: (transactionId, request, idempotencyKey) => reverse({ db, events, idempotency }, transactionId, request, idempotencyKey),
    hold: (walletId, request, idempotencyKey, limits) => holds.create(walletId, request, idempotencyKey, limits),
    capture: (walletId, holdId, request, idempotencyKey) => holds.capture(walletId, holdId, request, idempotencyKey),
    voidHold: (walletId, holdId) => holds.void(walletId, holdId),
    expireDueHolds: (limit) => holds.expireDueHolds(limit),
    findHoldCounterparties: (executor, walletId) => holds.findCounterparties(executor, walletId),
    settleHoldsOf: (trx, walletId) => holds.settleHoldsOf(trx, walletId),
    close: () => committer.close(),
  }
}
