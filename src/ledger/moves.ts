import type { Executor } from '../db/database.ts'
import { nowIso } from '../db/dialect.ts'
import { AppError } from '../http/errors.ts'
import { compareAssetNames, MAX_QUANTITY, MINT_WALLET_ID, type EventWriter, type Hold, type HoldStatus, type Line, type Transaction, type WalletLabel } from './ledger.types.ts'
import { holdingKey, lockMoves, reserveHoldIds, reserveIds, writeMoves, type BatchWrites, type Locked } from './moves.repository.ts'
import { toTransaction } from './transactions.repository.ts'

/**
 * The ledger's write rules, for one move or a whole batch of them: the one place that decides
 * whether a move may happen.
 *
 * A move sends every line from one wallet to another as one recorded Transaction. A hold
 * (`reserve`) is checked exactly like a move and reserves its lines in the sender instead of
 * moving them; a settlement (`settle`: capture, void, expiry) first releases what its hold
 * reserves, then moves a capture's lines. `applyMoves` runs a batch inside the caller's database
 * transaction in three steps:
 *
 * 1. lock (`moves.repository.ts` lockMoves): every wallet and holding the batch touches, read and
 *    locked in id order; on PostgreSQL with the wallets' turns and the ids of the new rows.
 * 2. check (here): each move in order against those balances in memory, exactly as one transfer
 *    after the other would: W000 (a wallet deleted), then I002 (only `quantity - held` may be
 *    spent) / I003 per line in (wallet, asset) order. A move that fails changes nothing; its
 *    outcome carries its error. Every spending path (transfer, hold, burn, sweep, and what else
 *    moves assets) passes through this one check.
 * 3. write (`moves.repository.ts` writeMoves): the moves that pass, one set-based statement per
 *    table (holdings, transactions, lines, the events of the event writer, idempotency keys); on
 *    PostgreSQL all in one statement.
 */

export interface Move {
  from: number
  to: number
  /** What moves from `from` to `to`, recorded as one Transaction; none for a hold's void or expiry. */
  lines: Line[]
  memo: string
  /** Stored with the move's response (POST /wallet/transactions with an Idempotency-Key). */
  idempotency?: { key: string; requestHash: string }
  /**
   * A hold instead of a move (POST /wallet/holds): the lines are checked exactly as a transfer's,
   * then reserved in `from` (`held`) for `to`, and a pending Hold is recorded; nothing moves.
   */
  reserve?: { metadata: Record<string, string>; expiresIn: number }
  /**
   * The pending hold this move settles first (a capture, void or expiry): everything it holds in
   * `from` is released, then `lines` (a capture's) move as a transfer's would.
   */
  settle?: Settlement
}

export interface Settlement {
  hold: Hold
  status: Exclude<HoldStatus, 'pending'>
  /** When it settled: now, or for an expiry the hold's `expires_at`. */
  at: string
}

/** What a move recorded: its Transaction (unless nothing moved), and the Hold it created or settled. */
export interface Applied {
  transaction: Transaction | undefined
  hold: Hold | undefined
}

export type Outcome = ({ ok: true } & Applied) | { ok: false; error: unknown }

interface Planned {
  index: number
  move: Move
  lines: Line[]
  createdAt: string
}

/** The change a batch makes to one holding: to its quantity, and to what pending holds reserve of it. */
export interface HoldingDelta {
  quantity: number
  held: number
}

/**
 * Checks each move in order against the locked balances and, for those that pass, changes the
 * balances as the move would. Returns the error of each failing move by index, the moves that
 * pass, and the net change of every holding they touch.
 */
function planMoves(moves: Move[], locked: Locked): { failed: Map<number, AppError>; planned: Planned[]; deltas: Map<string, HoldingDelta> } {
  const balances = new Map(locked.holdings)
  const held = new Map(locked.held)
  const failed = new Map<number, AppError>()
  const planned: Planned[] = []
  const deltas = new Map<string, HoldingDelta>()
  const change = (key: string, quantity: number, reserved: number) => {
    const delta = deltas.get(key) ?? { quantity: 0, held: 0 }
    deltas.set(key, { quantity: delta.quantity + quantity, held: delta.held + reserved })
  }
  moves.forEach((move, index) => {
    // What the hold being settled reserves becomes free before the move is checked.
    for (const line of move.settle?.hold.assets ?? []) {
      const key = holdingKey(move.from, line.asset.id)
      held.set(key, (held.get(key) ?? 0) - line.quantity)
    }
    const error = checkMove(move, locked, balances, held)
    if (error) {
      for (const line of move.settle?.hold.assets ?? []) {
        const key = holdingKey(move.from, line.asset.id)
        held.set(key, (held.get(key) ?? 0) + line.quantity)
      }
      failed.set(index, error)
      return
    }
    for (const line of move.settle?.hold.assets ?? []) change(holdingKey(move.from, line.asset.id), 0, -line.quantity)
    if (move.reserve) {
      for (const line of move.lines) {
        const key = holdingKey(move.from, line.asset.id)
        held.set(key, (held.get(key) ?? 0) + line.quantity)
        change(key, 0, line.quantity)
      }
    } else {
      for (const { walletId, line, delta } of changesOf(move)) {
        const key = holdingKey(walletId, line.asset.id)
        balances.set(key, (balances.get(key) ?? 0) + delta)
        change(key, delta, 0)
      }
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

/**
 * The rules of one move, in order: W000 (a wallet deleted), then per line in (wallet, asset)
 * order I002 (a sender may spend only what pending holds leave free: `quantity - held`; mint
 * has no limit) or I003 (a holding would pass the limit). A hold is checked as the transfer it
 * may become. Releasing a hold (a void or an expiry: no lines) needs nothing.
 */
function checkMove(move: Move, locked: Locked, balances: Map<string, number>, held: Map<string, number>): AppError | undefined {
  if (move.lines.length === 0) return undefined
  for (const walletId of [move.from, move.to]) {
    if (!locked.wallets.get(walletId)?.live) return new AppError('W000', `wallet ${walletId} has been deleted`)
  }
  for (const { walletId, line, delta } of changesOf(move)) {
    const key = holdingKey(walletId, line.asset.id)
    const quantity = balances.get(key) ?? 0
    if (delta < 0 && walletId !== MINT_WALLET_ID) {
      const reserved = held.get(key) ?? 0
      if (quantity - reserved < line.quantity) {
        const detail = reserved > 0 ? `wallet holds ${quantity} of ${line.asset.name} of which ${reserved} held: ${quantity - reserved} free, ${line.quantity} requested` : `wallet holds ${quantity} of ${line.asset.name}, ${line.quantity} requested`
        return new AppError('I002', detail)
      }
    } else if (Math.abs(quantity + delta) > MAX_QUANTITY) {
      return new AppError('I003', `the holding of ${line.asset.name} would exceed ${MAX_QUANTITY}`)
    }
  }
  return undefined
}

/** How many events a move records: its transaction's, and its hold's. */
function countEvents(move: Move, events: EventWriter): number {
  const hold = { sending_wallet_id: move.from, receiving_wallet_id: move.to }
  return (recordsTransaction(move) ? events.countEvents(move.from, move.to) : 0) + (move.reserve || move.settle ? events.countHoldEvents(hold) : 0)
}

/** A move records a Transaction when something moves: not a hold, not a void or an expiry. */
function recordsTransaction(move: Move): boolean {
  return !move.reserve && move.lines.length > 0
}

/**
 * Applies the moves, in order (lock, check, write): one outcome per move. Throws only when the
 * batch as a whole cannot commit (a database error, a retryable race, or an IdempotencyConflict),
 * and the caller must then roll the transaction back.
 */
export async function applyMoves(trx: Executor, moves: Move[], events: EventWriter): Promise<Outcome[]> {
  const locked = await lockMoves(trx, moves, moves.reduce((count, move) => count + countEvents(move, events), 0))
  const { failed, planned, deltas } = planMoves(moves, locked)
  const outcomes: Outcome[] = moves.map((_, index) => ({ ok: false, error: failed.get(index) }))
  if (planned.length === 0) return outcomes

  const recording = planned.filter(({ move }) => recordsTransaction(move))
  const eventCount = planned.reduce((count, { move }) => count + countEvents(move, events), 0)
  const holdCount = planned.filter(({ move }) => move.reserve).length
  const ids = locked.reserved
    ? { transactions: locked.reserved.transactions.slice(0, recording.length), events: locked.reserved.events.slice(0, eventCount) }
    : await reserveIds(trx, recording.length, eventCount)
  const holdIds = holdCount > 0 ? await reserveHoldIds(trx, holdCount) : []
  let nextTransaction = 0
  let nextHold = 0
  const batch: BatchWrites = {
    moves: planned.map(({ index, move, lines, createdAt }) => {
      const transaction = recordsTransaction(move)
        ? toTransaction({ id: ids.transactions[nextTransaction++], sending_wallet_id: move.from, receiving_wallet_id: move.to, memo: move.memo, created_at: createdAt }, lines, locked.wallets)
        : undefined
      let hold: Hold | undefined
      if (move.reserve) hold = toNewHold(holdIds[nextHold++], move, move.reserve, lines, createdAt, locked.wallets)
      else if (move.settle) hold = { ...move.settle.hold, status: move.settle.status, settled_at: move.settle.at, transaction_id: transaction?.id ?? null }
      return { index, move, lines, transaction, hold }
    }),
    deltas,
    eventIds: ids.events,
  }
  await writeMoves(trx, batch, locked, events)
  for (const { index, transaction, hold } of batch.moves) outcomes[index] = { ok: true, transaction, hold }
  return outcomes
}

/** The Hold a reserving move records: pending, labelled like a Transaction. */
function toNewHold(id: number, move: Move, reserve: NonNullable<Move['reserve']>, lines: Line[], createdAt: string, labels: Map<number, WalletLabel>): Hold {
  const sender = labels.get(move.from)
  const receiver = labels.get(move.to)
  const hold: Hold = {
    id,
    status: 'pending',
    sending_wallet_id: move.from,
    receiving_wallet_id: move.to,
    sending_wallet_address: sender?.address ?? '',
    receiving_wallet_address: receiver?.address ?? '',
    memo: move.memo,
    metadata: reserve.metadata,
    assets: lines.map((line) => ({ quantity: line.quantity, asset: line.asset })),
    created_at: createdAt,
    expires_at: new Date(Date.parse(createdAt) + reserve.expiresIn * 1000).toISOString(),
    settled_at: null,
    transaction_id: null,
  }
  if (sender?.username) hold.sending_username = sender.username
  if (receiver?.username) hold.receiving_username = receiver.username
  return hold
}

/** One move in the caller's transaction (issue, burn, wallet deletion, a hold's settlement); throws the move's error. */
export async function applyMove(trx: Executor, move: Move, events: EventWriter): Promise<Applied> {
  const [outcome] = await applyMoves(trx, [move], events)
  if (!outcome.ok) throw outcome.error
  return { transaction: outcome.transaction, hold: outcome.hold }
}

/** One move that moves something, in the caller's transaction (issue, burn, wallet deletion); throws the move's error. */
export async function moveAssets(trx: Executor, move: Move, events: EventWriter): Promise<Transaction> {
  return transactionOf(await applyMove(trx, move, events))
}

/** The Transaction a move recorded; for moves that always record one (a transfer, a capture). */
export function transactionOf(applied: Applied): Transaction {
  if (!applied.transaction) throw new Error('the move recorded no transaction')
  return applied.transaction
}
