import { sql } from 'kysely'
import { checkPerTransfer, checkRecipient, perDayCharge } from '../wallets/key-policy.ts'
import type { KeyLimits } from '../http/key-scopes.ts'
import type { Db, Trx } from '../db/database.ts'
import { inTransaction } from '../db/dialect.ts'
import { AppError } from '../http/errors.ts'
import { findAssetById, holdAsset } from './assets.repository.ts'
import { rehearsal, unrecordedTransaction, type DryRun, type UnrecordedTransaction } from './dry-run.ts'
import {
  canonicalAssets,
  canonicalMetadata,
  hashRequest,
  type Idempotency,
  type IdempotencyRecord,
  type SendResult,
} from './idempotency.ts'
import { MINT_WALLET_ID, type EventWriter, type Line, type Metadata, type Transaction } from './ledger.types.ts'
import { findReversible, takeWalletTurns, type LotLine } from './moves.repository.ts'
import { moveAssets, type Move } from './moves.ts'
import { findTransaction } from './transactions.repository.ts'
import { Lookups, resolveLines } from './lookups.ts'

/**
 * Refunds (by the receiving wallet) and reversals (by the operator): one move of kind `reversal`
 * back the other way, checked under both wallets' turns so all reversals together never exceed
 * the original (T001). The operator's keys are mint's (`docs/decisions.md#refunds-and-reversals`).
 */

export interface ReversalRequest {
  memo?: string
  /** Asset name → quantity to move back; by default everything not yet reversed. */
  assets?: Record<string, number>
  metadata?: Metadata
}

/** The kinds a receiving wallet may refund. */
const REFUNDABLE = new Set<Transaction['kind']>(['transfer', 'capture'])

/** A request's fingerprint for its Idempotency-Key: what it is, of which transaction, and its fields written one way. */
function fingerprint(route: 'refund' | 'reversal', transactionId: number, request: ReversalRequest): string {
  return hashRequest([
    route,
    transactionId,
    request.memo ?? '',
    request.assets === undefined ? null : canonicalAssets(request.assets),
    canonicalMetadata(request.metadata),
  ])
}

export interface ReversalsServiceDeps {
  db: Db
  events: EventWriter
  /** A refund's key among the refunding wallet's keys, the operator's among mint's. */
  idempotency: Idempotency
  clock: () => string
}

export interface ReversalsService {
  /**
   * POST /wallet/transactions/{id}/refund: the wallet gives back what it received (all of what is
   * left by default). Throws, in this order: G003/G004 (key), T000 (not a transfer or capture this
   * wallet received), I001 (an asset name), K002 / K001 (the recipients and `per_transfer` caps of
   * the wallet key making it, if any), then from the ledger's rules W000 (a side deleted), T001
   * (more than is left), I002, I003.
   */
  refund(
    walletId: number,
    transactionId: number,
    request: ReversalRequest,
    idempotencyKey?: string,
    limits?: KeyLimits,
  ): Promise<SendResult>
  /**
   * `refund` as a dry run (`dry-run.ts`): the reversal it would record and the wallet's holdings
   * after it; nothing written. Throws `refund`'s refusals but G003/G004.
   */
  dryRunRefund(
    walletId: number,
    transactionId: number,
    request: ReversalRequest,
    limits?: KeyLimits,
  ): Promise<DryRun<UnrecordedTransaction>>
  /**
   * POST /transactions/{id}/reversal: the operator moves back what a transaction moved (all of
   * what is left by default). Throws G003/G004 (key), T000 (no such transaction), T001 (a
   * reversal), I001, then as a refund: W000, T001, I002, I003.
   */
  reverse(transactionId: number, request: ReversalRequest, idempotencyKey?: string): Promise<SendResult>
}

/** How a reversal's database transaction runs: committed, or for a dry run rolled back. */
type Transact = (work: (trx: Trx) => Promise<Transaction>) => Promise<Transaction>

export function createReversalsService({ db, events, idempotency, clock }: ReversalsServiceDeps): ReversalsService {
  const committing: Transact = (work) => inTransaction(db, work)
  /** A refund's way after its Idempotency-Key: the original found among what the wallet received, then moved back. */
  const refundOf = async (
    transact: Transact,
    walletId: number,
    transactionId: number,
    request: ReversalRequest,
    limits?: KeyLimits,
    record?: IdempotencyRecord,
  ) => {
    const original = await findTransaction(db, transactionId)
    if (!original || original.receiving_wallet_id !== walletId || !REFUNDABLE.has(original.kind)) {
      throw new AppError('T000', `wallet ${walletId} received no transfer or capture ${transactionId}`)
    }
    return moveBack({ db, events, clock, transact }, original, request, record, limits)
  }
  return {
    refund(walletId, transactionId, request, idempotencyKey, limits) {
      return idempotency.answerOnce(walletId, idempotencyKey, fingerprint('refund', transactionId, request), async (record) => ({
        status: 201,
        body: await refundOf(committing, walletId, transactionId, request, limits, record),
      }))
    },
    async dryRunRefund(walletId, transactionId, request, limits) {
      const rehearsed = rehearsal(db, events, clock, walletId)
      const reversal = await refundOf((work) => rehearsed.transact(work), walletId, transactionId, request, limits)
      return { dry_run: true, result: unrecordedTransaction(reversal), holdings_after: await rehearsed.holdingsAfter() }
    },
    reverse(transactionId, request, idempotencyKey) {
      return idempotency.answerOnce(MINT_WALLET_ID, idempotencyKey, fingerprint('reversal', transactionId, request), async (record) => {
        const original = await findTransaction(db, transactionId)
        if (!original) throw new AppError('T000', `no transaction ${transactionId}`)
        return { status: 201, body: await moveBack({ db, events, clock, transact: committing }, original, request, record) }
      })
    },
  }
}

/** The reversal of `original`: its receiver sends back the requested quantities, or all that is left. */
async function moveBack(
  { db, events, clock, transact }: { db: Db; events: EventWriter; clock: () => string; transact: Transact },
  original: Transaction,
  request: ReversalRequest,
  idempotency?: IdempotencyRecord,
  limits?: KeyLimits,
): Promise<Transaction> {
  if (original.kind === 'reversal') throw new AppError('T001', `transaction ${original.id} is a reversal, which cannot be reversed`)
  const requested = request.assets === undefined ? undefined : await resolveLines(new Lookups(db), request.assets)
  return transact(async (trx) => {
    // By default what is left now; the ledger checks again under the wallets' turns (T001).
    let lines: Line[]
    if (requested) lines = requested
    else {
      const left = (await findReversible(trx, [original.id])).get(original.id)?.left ?? new Map<number, number>()
      lines = original.assets.flatMap(({ asset }) => ((left.get(asset.id) ?? 0) > 0 ? [{ asset, quantity: left.get(asset.id) ?? 0 }] : []))
      if (lines.length === 0) throw new AppError('T001', `everything transaction ${original.id} moved has been reversed`)
    }
    // As an issuance does: a deleted asset is never held again (`issuance.service.ts`).
    for (const line of lines) {
      await holdAsset(trx, line.asset.id)
      if (!(await findAssetById(trx, line.asset.id))) throw new AppError('I001', `the asset ${line.asset.name} has been deleted`)
    }
    // A refund through a wallet key pays the original sender: the key's recipients and caps apply.
    checkRecipient(limits, original.sending_wallet_id)
    checkPerTransfer(limits, lines)
    const move: Move = {
      from: original.receiving_wallet_id,
      to: original.sending_wallet_id,
      lines,
      memo: request.memo ?? '',
      kind: 'reversal' as const,
      reverses: original.id,
      metadata: request.metadata,
      idempotency,
      key: perDayCharge(limits),
    }
    if (move.from === MINT_WALLET_ID) move.lots = await lotsComingBack(trx, original, lines, clock)
    return moveAssets(trx, move, events, clock)
  })
}

/**
 * Out of mint (a burn or an expiry reversed), units come back with the expiry they had: of what
 * is left to reverse, the units that never expire first, then those that expire latest; units
 * whose expiry has passed cannot come back (T001). Measured under the turns of both wallets,
 * which every reversal of the original takes.
 */
async function lotsComingBack(trx: Trx, original: Transaction, lines: Line[], clock: () => string): Promise<LotLine[]> {
  await takeWalletTurns(trx, [original.sending_wallet_id, original.receiving_wallet_id])
  const { rows } = await sql<{ asset_id: number; expires_at: string; quantity: number | string }>`
    select transaction_lots.asset_id, transaction_lots.expires_at,
      sum(case when transactions.id = ${original.id} then transaction_lots.quantity else -transaction_lots.quantity end) as quantity
    from transaction_lots join transactions on transactions.id = transaction_lots.transaction_id
    where transactions.id = ${original.id} or transactions.reverses = ${original.id}
    group by transaction_lots.asset_id, transaction_lots.expires_at`.execute(trx)
  if (rows.length === 0) return []
  const left = (await findReversible(trx, [original.id])).get(original.id)?.left ?? new Map<number, number>()
  const now = clock()
  const lots: LotLine[] = []
  for (const line of lines) {
    const dated = rows
      .filter((row) => Number(row.asset_id) === line.asset.id && Number(row.quantity) > 0)
      .map((row) => ({ expiresAt: row.expires_at, quantity: Number(row.quantity) }))
    const undated = (left.get(line.asset.id) ?? 0) - dated.reduce((sum, part) => sum + part.quantity, 0)
    let wanted = line.quantity - Math.max(0, Math.min(undated, line.quantity))
    for (const part of dated.filter((candidate) => candidate.expiresAt > now).sort((a, b) => (a.expiresAt < b.expiresAt ? 1 : -1))) {
      if (wanted === 0) break
      const take = Math.min(part.quantity, wanted)
      lots.push({ assetId: line.asset.id, expiresAt: part.expiresAt, quantity: take })
      wanted -= take
    }
    if (wanted > 0)
      throw new AppError('T001', `${wanted} of ${line.asset.name} that transaction ${original.id} moved has expired and cannot come back`)
  }
  return lots
}
