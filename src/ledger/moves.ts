import type { Executor } from '../db/database.ts'
import { nowIso } from '../db/dialect.ts'
import { AppError } from '../http/errors.ts'
import { compareAssetNames, MAX_QUANTITY, MINT_WALLET_ID, type EventWriter, type Line, type Metadata, type Transaction, type TransactionKind } from './ledger.types.ts'
import { findReversible, holdingKey, lockMoves, reserveIds, writeMoves, type BatchWrites, type IdempotencyRow, type Locked, type Reversible } from './moves.repository.ts'
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
 *    table (holdings, transactions, lines, running balances, the events of the event writer,
 *    idempotency keys); on PostgreSQL all in one statement.
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

/**
 * Moves checked and written together, in arrival order with the other units of a batch: a
 * transfer alone (`applyMoves`), or the transfers of a batch request (`batches.service.ts`).
 */
export interface Unit {
  moves: Move[]
  /**
   * All or nothing (an atomic batch, an issuance to many wallets): the first move that fails
   * leaves every move of the unit out, and the balances as they were before it. Otherwise each
   * move passes or fails alone, as separate transfers would.
   */
  atomic: boolean
  /**
   * A batch request's Idempotency-Key: its response (made from the unit's outcomes) is stored with
   * the unit's writes, when at least one of its moves is written.
   */
  idempotency?: UnitIdempotency
}

export interface UnitIdempotency {
  walletId: number
  key: string
  requestHash: string
  respond: (outcomes: Outcome[]) => { status: number; body: unknown }
}

/**
 * What became of a move. In a unit that failed as a whole, the move that failed carries its error
 * and the others `error: undefined` (left out with their unit).
 */
export type Outcome = { ok: true; transaction: Transaction } | { ok: false; error: unknown }

interface Planned {
  /** The unit's index in the batch, and the move's in the unit. */
  index: number
  member: number
  move: Move
  lines: Line[]
  createdAt: string
  /** Each holding the move changes, as it stands right after it: [wallet, asset, quantity]. */
  balances: [number, number, number][]
}

/** Adds `delta` to the value under `key`, remembering the value before (to undo a unit). */
function addTo<K>(map: Map<K, number>, key: K, delta: number, undo: (() => void)[]): void {
  const before = map.get(key)
  undo.push(() => (before === undefined ? map.delete(key) : map.set(key, before)))
  map.set(key, (before ?? 0) + delta)
}

/**
 * Checks each unit's moves in order against the locked balances and, for those that pass, changes
 * the balances as the move would (an atomic unit that fails takes its changes back). Returns the
 * error of each failing move by unit and move index, the moves that pass, and the net change of
 * every holding they touch.
 */
function planMoves(units: Unit[], locked: Locked, reversible: Map<number, Reversible>): { failed: Map<number, Map<number, AppError>>; planned: Planned[]; deltas: Map<string, number> } {
  const balances = new Map(locked.holdings)
  const failed = new Map<number, Map<number, AppError>>()
  const planned: Planned[] = []
  const deltas = new Map<string, number>()
  units.forEach((unit, index) => {
    const undo: (() => void)[] = []
    const passed: Planned[] = []
    for (const [member, move] of unit.moves.entries()) {
      const error = checkMove(move, locked, balances, reversible)
      if (error) {
        failed.set(index, (failed.get(index) ?? new Map<number, AppError>()).set(member, error))
        if (!unit.atomic) continue
        for (const step of undo.reverse()) step()
        return
      }
      // What a reversal takes back is no longer left for the next.
      const left = move.reverses === undefined ? undefined : reversible.get(move.reverses)?.left
      if (left) for (const line of move.lines) addTo(left, line.asset.id, -line.quantity, undo)
      const after: [number, number, number][] = []
      for (const { walletId, line, delta } of changesOf(move)) {
        const key = holdingKey(walletId, line.asset.id)
        addTo(balances, key, delta, undo)
        addTo(deltas, key, delta, undo)
        after.push([walletId, line.asset.id, balances.get(key) as number])
      }
      const lines = [...move.lines].sort((a, b) => compareAssetNames(a.asset.name, b.asset.name))
      passed.push({ index, member, move, lines, createdAt: nowIso(), balances: after })
    }
    planned.push(...passed)
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
 * Applies the units, in order (lock, check, write): per unit, one outcome per move. Throws only
 * when the batch as a whole cannot commit (a database error, a retryable race, or an
 * IdempotencyConflict naming units), and the caller must then roll the transaction back.
 */
export async function applyUnits(trx: Executor, units: Unit[], events: EventWriter): Promise<Outcome[][]> {
  const moves = units.flatMap((unit) => unit.moves)
  const locked = await lockMoves(trx, moves, events)
  // Reversals: what is left of their originals, read now that the batch holds its wallets' turns.
  const originals = [...new Set(moves.flatMap((move) => (move.reverses === undefined ? [] : [move.reverses])))]
  const reversible = originals.length === 0 ? new Map<number, Reversible>() : await findReversible(trx, originals)
  const { failed, planned, deltas } = planMoves(units, locked, reversible)
  const outcomes: Outcome[][] = units.map((unit, index) => unit.moves.map((_, member) => ({ ok: false, error: failed.get(index)?.get(member) })))
  if (planned.length === 0) return outcomes

  const eventCount = planned.reduce((count, { move }) => count + events.countEvents(move.from, move.to), 0)
  const ids = locked.reserved
    ? { transactions: locked.reserved.transactions.slice(0, planned.length), events: locked.reserved.events.slice(0, eventCount) }
    : await reserveIds(trx, planned.length, eventCount)
  const written = planned.map(({ index, member, move, lines, createdAt, balances }, i) => ({
    index,
    member,
    move,
    lines,
    balances,
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
  }))
  for (const { index, member, transaction } of written) outcomes[index][member] = { ok: true, transaction }
  const batch: BatchWrites = { moves: written, deltas, eventIds: ids.events, keys: idempotencyRecords(units, outcomes, written) }
  await writeMoves(trx, batch, locked, events)
  return outcomes
}

/**
 * The Idempotency-Keys to store with the batch, each with its unit's index: a transfer's with its
 * Transaction (201), a batch request's with the response it makes of its outcomes. A unit of which
 * nothing is written stores nothing, like a transfer that fails: a retry runs it again.
 */
function idempotencyRecords(units: Unit[], outcomes: Outcome[][], written: BatchWrites['moves']): IdempotencyRow[] {
  const keys: IdempotencyRow[] = []
  for (const { index, move, transaction } of written) {
    if (move.idempotency) keys.push({ index, walletId: move.from, ...move.idempotency, status: 201, body: JSON.stringify(transaction), createdAt: transaction.created_at })
  }
  units.forEach((unit, index) => {
    const first = outcomes[index].find((outcome) => outcome.ok)
    if (!unit.idempotency || !first) return
    const { walletId, key, requestHash, respond } = unit.idempotency
    const { status, body } = respond(outcomes[index])
    keys.push({ index, walletId, key, requestHash, status, body: JSON.stringify(body), createdAt: first.transaction.created_at })
  })
  return keys
}

/** The move of a failed atomic unit that failed it, with its index in the unit and its error. */
export function firstFailure(outcomes: Outcome[]): { index: number; error: unknown } | undefined {
  const index = outcomes.findIndex((outcome) => !outcome.ok && outcome.error !== undefined)
  const outcome = outcomes[index]
  return outcome && !outcome.ok ? { index, error: outcome.error } : undefined
}

/** The Transactions of a unit whose every move was written (an atomic unit that passed). */
export function committed(outcomes: Outcome[]): Transaction[] {
  return outcomes.map((outcome) => {
    if (!outcome.ok) throw new Error('a unit answered as committed has a move left out')
    return outcome.transaction
  })
}

/** Applies the moves in order, each a unit of its own: one outcome per move (`applyUnits`). */
export async function applyMoves(trx: Executor, moves: Move[], events: EventWriter): Promise<Outcome[]> {
  const outcomes = await applyUnits(
    trx,
    moves.map((move) => ({ moves: [move], atomic: true })),
    events,
  )
  return outcomes.map(([outcome]) => outcome)
}

/** One move in the caller's transaction (issue, burn, wallet deletion); throws the move's error. */
export async function moveAssets(trx: Executor, move: Move, events: EventWriter): Promise<Transaction> {
  const [outcome] = await applyMoves(trx, [move], events)
  if (!outcome.ok) throw outcome.error
  return outcome.transaction
}
