import type { Executor } from '../db/database.ts'
import { nowIso } from '../db/dialect.ts'
import { AppError } from '../http/errors.ts'
import { compareAssetNames, MAX_QUANTITY, MINT_WALLET_ID, type EventWriter, type Line, type Metadata, type Transaction, type TransactionKind } from './ledger.types.ts'
import { findReversible, holdingKey, lockMoves, reserveIds, writeMoves, type BatchWrites, type Locked, type Reversible } from './moves.repository.ts'
import { toTransaction } from './transactions.repository.ts'

/**
 * The ledger's write rules, for one move or a whole batch of them: the one place that decides
 * whether a move may happen.
 *
 * A move sends every line from one wallet to another as one recorded Transaction. `applyMoves`
 * runs a batch inside the caller's database transaction in three steps:
 *
 * 1. lock (`moves.repository.ts` lockMoves): every wallet and holding the batch touches, read and
 *    locked in id order; on PostgreSQL with the wallets' turns and the ids of the new rows.
 * 2. check (here): each move in order against those balances in memory, exactly as one transfer
 *    after the other would: W000 (a wallet deleted), then for a reversal T001 (its original is a
 *    reversal, or less than asked is left of it: `findReversible`), then I002 / I003 per line in
 *    (wallet, asset) order. A move that fails changes nothing; its outcome carries its error.
 * 3. write (`moves.repository.ts` writeMoves): the moves that pass, one set-based statement per
 *    table (holdings, transactions, lines, the events of the event writer, idempotency keys); on
 *    PostgreSQL all in one statement.
 */

export interface Move {
  from: number
  to: number
  lines: Line[]
  memo: string
  /** What the transaction is (`ledger.types.ts` TransactionKind). */
  kind: TransactionKind
  /** Stored with the transaction and filterable; none is `{}`. */
  metadata?: Metadata
  /** A reversal's original transaction. */
  reverses?: number
  /** A capture's hold. */
  holdId?: number
  /** Stored with the move's response (POST /wallet/transactions with an Idempotency-Key). */
  idempotency?: { key: string; requestHash: string; walletId?: number }
}

export type Outcome = { ok: true; transaction: Transaction } | { ok: false; error: unknown }

interface Planned {
  index: number
  move: Move
  lines: Line[]
  createdAt: string
}

/**
 * Checks each move in order against the locked balances and, for those that pass, changes the
 * balances as the move would. Returns the error of each failing move by index, the moves that
 * pass, and the net change of every holding they touch.
 */
function planMoves(moves: Move[], locked: Locked, reversible: Map<number, Reversible>): { failed: Map<number, AppError>; planned: Planned[]; deltas: Map<string, number> } {
  const balances = new Map(locked.holdings)
  const failed = new Map<number, AppError>()
  const planned: Planned[] = []
  const deltas = new Map<string, number>()
  moves.forEach((move, index) => {
    const error = checkMove(move, locked, balances, reversible)
    if (error) {
      failed.set(index, error)
      return
    }
    // What this reversal takes back is no longer left for the next.
    const left = move.reverses === undefined ? undefined : reversible.get(move.reverses)?.left
    for (const line of left ? move.lines : []) left?.set(line.asset.id, (left.get(line.asset.id) ?? 0) - line.quantity)
    for (const { walletId, line, delta } of changesOf(move)) {
      const key = holdingKey(walletId, line.asset.id)
      balances.set(key, (balances.get(key) ?? 0) + delta)
      deltas.set(key, (deltas.get(key) ?? 0) + delta)
    }
    const lines = [...move.lines].sort((a, b) => compareAssetNames(a.asset.name, b.asset.name))
    planned.push({ index, move, lines, createdAt: nowIso() })
  })
  return { failed, planned, deltas }
}

/** Both sides of every line, in the fixed order in which they are checked: wallet id, then asset id. */
function changesOf(move: Move) {
  return move.lines
    .flatMap((line) => [
      { walletId: move.from, line, delta: -line.quantity },
      { walletId: move.to, line, delta: line.quantity },
    ])
    .sort((a, b) => a.walletId - b.walletId || a.line.asset.id - b.line.asset.id)
}

function checkMove(move: Move, locked: Locked, balances: Map<string, number>, reversible: Map<number, Reversible>): AppError | undefined {
  for (const walletId of [move.from, move.to]) {
    if (!locked.wallets.get(walletId)?.live) return new AppError('W000', `wallet ${walletId} has been deleted`)
  }
  if (move.reverses !== undefined) {
    const original = reversible.get(move.reverses)
    if (!original?.reversible) return new AppError('T001', `transaction ${move.reverses} is a reversal, which cannot be reversed`)
    for (const line of move.lines) {
      const left = original.left.get(line.asset.id) ?? 0
      if (line.quantity > left) return new AppError('T001', `${left} of ${line.asset.name} is left to reverse of transaction ${move.reverses}, ${line.quantity} requested`)
    }
  }
  for (const { walletId, line, delta } of changesOf(move)) {
    const held = balances.get(holdingKey(walletId, line.asset.id)) ?? 0
    if (delta < 0 && walletId !== MINT_WALLET_ID) {
      if (held < line.quantity) return new AppError('I002', `wallet holds ${held} of ${line.asset.name}, ${line.quantity} requested`)
    } else if (Math.abs(held + delta) > MAX_QUANTITY) {
      return new AppError('I003', `the holding of ${line.asset.name} would exceed ${MAX_QUANTITY}`)
    }
  }
  return undefined
}

/**
 * Applies the moves, in order (lock, check, write): one outcome per move. Throws only when the
 * batch as a whole cannot commit (a database error, a retryable race, or an IdempotencyConflict),
 * and the caller must then roll the transaction back.
 */
export async function applyMoves(trx: Executor, moves: Move[], events: EventWriter): Promise<Outcome[]> {
  const locked = await lockMoves(trx, moves, events)
  // Reversals: what is left of their originals, read now that the batch holds its wallets' turns.
  const originals = [...new Set(moves.flatMap((move) => (move.reverses === undefined ? [] : [move.reverses])))]
  const reversible = originals.length === 0 ? new Map<number, Reversible>() : await findReversible(trx, originals)
  const { failed, planned, deltas } = planMoves(moves, locked, reversible)
  const outcomes: Outcome[] = moves.map((_, index) => ({ ok: false, error: failed.get(index) }))
  if (planned.length === 0) return outcomes

  const eventCount = planned.reduce((count, { move }) => count + events.countEvents(move.from, move.to), 0)
  const ids = locked.reserved
    ? { transactions: locked.reserved.transactions.slice(0, planned.length), events: locked.reserved.events.slice(0, eventCount) }
    : await reserveIds(trx, planned.length, eventCount)
  const batch: BatchWrites = {
    moves: planned.map(({ index, move, lines, createdAt }, i) => ({
      index,
      move,
      lines,
      transaction: toTransaction(
        {
          id: ids.transactions[i],
          sending_wallet_id: move.from,
          receiving_wallet_id: move.to,
          memo: move.memo,
          created_at: createdAt,
          kind: move.kind,
          reverses: move.reverses ?? null,
          hold_id: move.holdId ?? null,
          metadata: move.metadata ?? {},
        },
        lines,
        locked.wallets,
      ),
    })),
    deltas,
    eventIds: ids.events,
  }
  await writeMoves(trx, batch, locked, events)
  for (const { index, transaction } of batch.moves) outcomes[index] = { ok: true, transaction }
  return outcomes
}

/** One move in the caller's transaction (issue, burn, wallet deletion); throws the move's error. */
export async function moveAssets(trx: Executor, move: Move, events: EventWriter): Promise<Transaction> {
  const [outcome] = await applyMoves(trx, [move], events)
  if (!outcome.ok) throw outcome.error
  return outcome.transaction
}
