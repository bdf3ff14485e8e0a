import type { Database } from '../db/database.ts'
import { nowIso } from '../db/dialect.ts'
import { createAssetsService, type AssetsService } from './assets.service.ts'
import { createBatchesService, type BatchesService } from './batches.service.ts'
import { createCreditService, type CreditService } from './credit.service.ts'
import { createExpiryService, type ExpiryService } from './expiry.service.ts'
import { GroupCommitter } from './group-committer.ts'
import { createHistoryService, type HistoryService } from './history.service.ts'
import { createHoldsService, type HoldsService } from './holds.service.ts'
import { Idempotency } from './idempotency.ts'
import { createIssuanceService, type IssuanceService } from './issuance.service.ts'
import type { EventWriter, Transaction } from './ledger.types.ts'
import { PageCache } from './page-cache.ts'
import { createReversalsService, type ReversalsService } from './reversals.service.ts'
import { createTransfersService, type TransfersService } from './transfers.service.ts'
import type { BatchTracing } from '../telemetry/tracing.ts'

export { takeWalletTurns } from './moves.repository.ts'
export type { SendRequest, SendResult } from './idempotency.ts'
export type { CaptureRequest, HoldRequest } from './holds.service.ts'
export type { BatchBody, BatchRequest } from './batches.service.ts'
export type { IssuanceRequest } from './issuance.service.ts'
export type { ReversalRequest } from './reversals.service.ts'

/**
 * The ledger's services, built once per app (`buildApp`) or per CLI run from the storage, the
 * event writer and the config, and closed with them: every write of assets goes through one of them.
 */
export interface Ledger {
  transfers: TransfersService
  batches: BatchesService
  holds: HoldsService
  reversals: ReversalsService
  issuance: IssuanceService
  assets: AssetsService
  history: HistoryService
  credit: CreditService
  expiry: ExpiryService
  /** The ledger's time: of its transactions and holds, and what has expired by then. */
  clock: () => string
  /** Waits for the transfers in flight to commit (the app is closing). */
  close(): Promise<void>
}

export interface LedgerDeps {
  database: Database
  /** Records the events of every transaction written (`events/outbox.ts`). */
  events: EventWriter
  /** Most transfers committed together; by default `DEFAULT_MAX_BATCH` of the dialect. */
  maxBatch?: number
  /** Told the size of every batch of transfers committed together (metrics). */
  onBatch?: (size: number) => void
  /** Told the transactions of every batch of transfers once it committed (the journal's sequencer). */
  onCommit?: (transactions: Transaction[]) => void
  /** Traces each batch, when traces are on. */
  tracing?: BatchTracing
  /** How long a key's first request holds it (G004) before a repeat may run; `Idempotency`'s default if not given. */
  idempotencyLeaseMs?: number
  /** Now, as a stored timestamp; the system clock unless given (tests move it past expiries). */
  clock?: () => string
  /** Runs each group commit after this turn's I/O (`setImmediate` unless given; `http/arrivals.ts`). */
  afterIo?: (work: () => void) => void
}

/**
 * Transfers per group commit (docs/performance.md#the-write-path): room for several batch requests
 * of 100, which then share one commit's fixed costs; single transfers rarely fill it.
 */
export const DEFAULT_MAX_BATCH = { sqlite: 500, postgres: 500 } as const

export function createLedger({
  database,
  events,
  maxBatch,
  onBatch,
  onCommit,
  tracing,
  idempotencyLeaseMs,
  clock = nowIso,
  afterIo,
}: LedgerDeps): Ledger {
  const { db, dialect } = database
  // SQLite has one connection: a transaction begun early would hold it from every other query.
  const committer = new GroupCommitter(db, events, {
    maxBatch: maxBatch ?? DEFAULT_MAX_BATCH[dialect],
    beginEarly: dialect === 'postgres',
    onBatch,
    onCommit,
    tracing,
    clock,
    afterIo,
  })
  // One key space per wallet for transfers, batches, refunds and holds, and one set of keys in flight (G004).
  const idempotency = new Idempotency(db, idempotencyLeaseMs)
  return {
    transfers: createTransfersService({ db, events, committer, idempotency, clock }),
    batches: createBatchesService({ db, events, committer, idempotency, clock }),
    holds: createHoldsService({ db, events, committer, idempotency, clock }),
    reversals: createReversalsService({ db, events, idempotency, clock }),
    issuance: createIssuanceService({ db, events, clock }),
    assets: createAssetsService({ db }),
    history: createHistoryService({ db, pages: new PageCache(), clock }),
    credit: createCreditService({ db, events, clock }),
    expiry: createExpiryService({ db, events, clock }),
    clock,
    close: () => committer.close(),
  }
}
