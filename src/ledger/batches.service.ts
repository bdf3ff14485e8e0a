import type { KeyLimits } from '../http/key-scopes.ts'
import type { Db } from '../db/database.ts'
import { rehearsal, unrecordedTransaction, type DryRun, type UnrecordedTransaction } from './dry-run.ts'
import { AppError, ERROR_MEANINGS, ERRORS, type ErrorCode } from '../http/errors.ts'
import type { GroupCommitter } from './group-committer.ts'
import { fingerprintBatch, type Answer, type Idempotency, type SendRequest } from './idempotency.ts'
import type { EventWriter, Transaction } from './ledger.types.ts'
import { committed, firstFailure, transactionOf, type Move, type Outcome, type Unit, type UnitIdempotency } from './moves.ts'
import { Lookups, resolveTransfers } from './lookups.ts'

/**
 * POST /wallet/transactions/batch: up to 100 transfers of one wallet in one request, the way
 * through a transfer's (`transfers.service.ts`) for each of them, then into the group committer as
 * one unit (`moves.ts` Unit), checked in its place in the arrival order with the other transfers.
 *
 * - Atomic (the default): every transfer is resolved first, in request order (recipient, own
 *   wallet, asset names); the first that fails fails the request. Then the ledger checks the
 *   transfers in order against the balances; the first that fails leaves all of them out. Either
 *   way nothing moves, and the error is that transfer's, its detail starting `transfers[i]: `.
 * - Not atomic: each transfer commits or fails alone; the answer lists every outcome in order.
 * - One Idempotency-Key for the whole batch, stored with its transfers when at least one commits.
 */

export interface BatchRequest {
  transfers: SendRequest[]
  atomic?: boolean
}

export interface ErrorDescription {
  code: ErrorCode
  message: string
  detail: string
}

export type BatchResult = { status: 201; transaction: Transaction } | { status: number; error: ErrorDescription }

export type BatchBody = { transactions: Transaction[] } | { results: BatchResult[] }

/** A batch's answer as a dry run shows it (`dry-run.ts`). */
export type UnrecordedBatchBody =
  | { transactions: UnrecordedTransaction[] }
  | { results: ({ status: 201; transaction: UnrecordedTransaction } | { status: number; error: ErrorDescription })[] }

/**
 * The error of item `index` of a list in the request (`transfers[2]: …`, `entries[7]: …`) with its
 * code and status. An error that is not the ledger's (a database fault) is returned as it is.
 */
export function itemError(list: string, index: number, error: unknown): unknown {
  if (!(error instanceof AppError)) return error
  return new AppError(error.code, `${list}[${index}]: ${error.detail ?? ERROR_MEANINGS[error.code]}`, { headers: error.headers })
}

function describeError(error: AppError): ErrorDescription {
  return { code: error.code, message: ERRORS[error.code].message, detail: error.detail ?? ERROR_MEANINGS[error.code] }
}

type Reply = { status: number; body: BatchBody }
/** The unit's Idempotency-Key record with the response it stores, when the request has a key. */
type Keyed = (respond: UnitIdempotency['respond']) => UnitIdempotency | undefined
/** How a unit is run: in the group commit, or for a dry run rolled back. */
type RunUnit = (unit: Unit) => Promise<Outcome[]>

export interface BatchesServiceDeps {
  db: Db
  events: EventWriter
  committer: GroupCommitter
  /** Shared with single transfers: one key space per wallet, one set of keys in flight (G004). */
  idempotency: Idempotency
  clock: () => string
}

export interface BatchesService {
  /**
   * Sends the batch's transfers from the wallet. Atomic: answers 201 `{transactions}` in request
   * order, or throws the first failing transfer's error (U003, W000, G000, W013, K002, I001, I003,
   * K001, I002) with its detail starting `transfers[i]: `. Not atomic: answers 200 `{results}` in
   * request order. Throws G003 / G004 for its Idempotency-Key as a transfer does.
   */
  send(walletId: number, request: BatchRequest, idempotencyKey?: string, limits?: KeyLimits): Promise<Answer<BatchBody>>
  /**
   * `send` as a dry run (`dry-run.ts`): the body it would answer, each Transaction unrecorded, and
   * the wallet's holdings after it; nothing written. Throws `send`'s refusals but G003/G004.
   */
  dryRun(walletId: number, request: BatchRequest, limits?: KeyLimits): Promise<DryRun<UnrecordedBatchBody>>
}

export function createBatchesService({ db, events, committer, idempotency, clock }: BatchesServiceDeps): BatchesService {
  /** The batch's transfers resolved in request order (`resolveTransfers`), then run by `run`. */
  const sendWith = async (run: RunUnit, walletId: number, request: BatchRequest, limits: KeyLimits | undefined, keyed: Keyed) => {
    const resolved = await resolveTransfers(new Lookups(db, limits), walletId, request.transfers)
    // A database fault while resolving fails the whole request, as it would a transfer.
    for (const result of resolved) if (result.status === 'rejected' && !(result.reason instanceof AppError)) throw result.reason
    return (request.atomic ?? true) ? sendAtomic(run, resolved, keyed) : sendEach(run, resolved, keyed)
  }
  return {
    send(walletId, request, idempotencyKey, limits) {
      // Without a key, no fingerprint to pay for.
      const fingerprint = idempotencyKey === undefined ? '' : fingerprintBatch(request.transfers, request.atomic ?? true)
      return idempotency.answerOnce<BatchBody>(walletId, idempotencyKey, fingerprint, (record) =>
        sendWith(
          (unit) => committer.runUnit(unit),
          walletId,
          request,
          limits,
          (respond) => record && { walletId, ...record, respond },
        ),
      )
    },
    async dryRun(walletId, request, limits) {
      const rehearsed = rehearsal(db, events, clock, walletId)
      const { body } = await sendWith(
        (unit) => rehearsed.runUnit(unit),
        walletId,
        request,
        limits,
        () => undefined,
      )
      // Not atomic with every transfer refused before the ledger: nothing ran, the holdings are as they are.
      return { dry_run: true, result: unrecordedBatch(body), holdings_after: await rehearsed.holdingsAfter() }
    },
  }
}

function unrecordedBatch(body: BatchBody): UnrecordedBatchBody {
  if ('transactions' in body) return { transactions: body.transactions.map(unrecordedTransaction) }
  return {
    results: body.results.map((result) =>
      'transaction' in result ? { status: 201 as const, transaction: unrecordedTransaction(result.transaction) } : result,
    ),
  }
}

async function sendAtomic(run: RunUnit, resolved: PromiseSettledResult<Move>[], keyed: Keyed): Promise<Reply> {
  const moves: Move[] = []
  for (const [index, result] of resolved.entries()) {
    if (result.status === 'rejected') throw itemError('transfers', index, result.reason)
    moves.push(result.value)
  }
  // The stored response is composed from each transaction's JSON, serialised once for the batch.
  const store: UnitIdempotency['respond'] = (outcomes, bodyOf) => ({
    status: 201,
    json: `{"transactions":[${committed(outcomes).map(bodyOf).join(',')}]}`,
  })
  const outcomes = await run({ moves, atomic: true, idempotency: keyed(store) })
  const failure = firstFailure(outcomes)
  if (failure) throw itemError('transfers', failure.index, failure.error)
  return { status: 201, body: { transactions: committed(outcomes) } }
}

async function sendEach(run: RunUnit, resolved: PromiseSettledResult<Move>[], keyed: Keyed): Promise<Reply> {
  // The transfers that resolved go to the ledger, in request order; `slots` maps them back.
  const slots: number[] = []
  const moves: Move[] = []
  for (const [index, result] of resolved.entries()) {
    if (result.status === 'fulfilled') {
      slots.push(index)
      moves.push(result.value)
    }
  }
  const results = (outcomes: Outcome[]) => {
    const all = resolved.map((result) => (result.status === 'rejected' ? failed(result.reason) : undefined))
    outcomes.forEach(
      (outcome, i) => (all[slots[i]] = outcome.ok ? { status: 201 as const, transaction: transactionOf(outcome) } : failed(outcome.error)),
    )
    return all as BatchResult[]
  }
  // The stored response: each committed transaction's JSON as serialised once for the batch.
  const store: UnitIdempotency['respond'] = (outcomes, bodyOf) => {
    const texts = results(outcomes).map((result) =>
      'transaction' in result ? `{"status":201,"transaction":${bodyOf(result.transaction)}}` : JSON.stringify(result),
    )
    return { status: 200, json: `{"results":[${texts.join(',')}]}` }
  }
  const outcomes = moves.length === 0 ? [] : await run({ moves, atomic: false, idempotency: keyed(store) })
  return { status: 200, body: { results: results(outcomes) } }
}

function failed(error: unknown): BatchResult {
  if (!(error instanceof AppError)) throw new Error('a transfer of a batch failed without an error of the table')
  return { status: error.status, error: describeError(error) }
}
