import type { Trx } from '../db/database.ts'
import { nowIso } from '../db/dialect.ts'
import { AppError } from '../http/errors.ts'
import {
  compareAssetNames,
  MAX_QUANTITY,
  MINT_WALLET_ID,
  type EventWriter,
  type Hold,
  type HoldStatus,
  type Line,
  type Metadata,
  type Transaction,
  type TransactionKind,
  type WalletLabel,
} from './ledger.types.ts'
import { addParts, expiredOf, takeFirst, takeSoonest, type Lot, type LotPart } from './lots.ts'
import {
  findReversible,
  holdingKey,
  lockMoves,
  lotKey,
  reserveHoldIds,
  recordsHoldEvent,
  recordsTransaction,
  reserveIds,
  writeMoves,
  type BatchWrites,
  type IdempotencyRow,
  type Locked,
  type LotLine,
  type Reversible,
} from './moves.repository.ts'
import { holdingChanges } from './holding-changes.ts'
import { insufficientDetail, spendable } from './spendable.ts'
import { toTransaction } from './transactions.shape.ts'
import type { KeyCharge } from '../wallets/key-policy.ts'
import { readKeyUsage, recordKeyUses, type KeyUse } from '../wallets/key-usage.ts'

/**
 * The ledger's write rules: the one place that decides whether a move may happen. Every spending
 * path (transfer, hold, batch member, burn, reversal, sweep, expiry) passes through `applyUnits`,
 * inside the caller's database transaction: lock every wallet and holding in id order
 * (`lockMoves`), check each move in memory as if one ran after the other (`checkMove`), then write
 * the moves that pass in one set-based statement per table (`writeMoves`).
 */

export interface Move {
  from: number
  to: number
  /** What moves from `from` to `to`, recorded as one Transaction; none for a hold's void or expiry. */
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
  /** The schedule whose run this is. */
  scheduleId?: number
  /** Stored with the move's response (POST /wallet/transactions with an Idempotency-Key). */
  idempotency?: { key: string; requestHash: string; walletId?: number }
  /** A hold instead of a move: checked as a transfer, then reserved in `from` (`held`); nothing moves. */
  reserve?: { expiresIn: number }
  /** The pending hold settled first (capture, void, expiry): released in `from`, then a capture's lines move. */
  settle?: Settlement
  /** The wallet key it is made through, when that key has `per_day` caps (K001 against its last 24 hours). */
  key?: KeyCharge
  /** Units with an expiry that mint gives out: an issuance with `expires_at`, a reversal out of mint. */
  lots?: LotLine[]
  /** An expiry (kind `expiry`): the instant whose expired units of its one line return to mint. */
  expire?: string
}

export interface Settlement {
  hold: Hold
  status: Exclude<HoldStatus, 'pending'>
  /** When it settled: now, or for an expiry the hold's `expires_at`. */
  at: string
}

/** Moves checked and written together: a transfer alone (`applyMoves`), or a batch request's transfers. */
export interface Unit {
  moves: Move[]
  /** All or nothing: the first move that fails leaves the whole unit out; otherwise each move stands alone. */
  atomic: boolean
  /** A batch request's Idempotency-Key: its response is stored with the unit's writes, if any move is written. */
  idempotency?: UnitIdempotency
}

export interface UnitIdempotency {
  walletId: number
  key: string
  requestHash: string
  /**
   * The response to store: its status and its JSON text, composed from each transaction's JSON
   * (`bodyOf`: serialised once for the row, the events and every stored response).
   */
  respond: (outcomes: Outcome[], bodyOf: (transaction: Transaction) => string) => { status: number; json: string }
}

/** What became of a move; in a failed atomic unit only the failing move carries an error, the others `undefined`. */
export type Outcome = ({ ok: true } & Applied) | { ok: false; error: unknown }

/** What a move recorded: its Transaction (unless nothing moved: a hold, a void, an expiry), and the Hold it created or settled. */
export interface Applied {
  transaction?: Transaction
  hold?: Hold
}

interface Planned {
  /** The unit's index in the batch, and the move's in the unit. */
  index: number
  member: number
  move: Move
  lines: Line[]
  createdAt: string
  /** Each holding the move changes, as it stands right after it: [wallet, asset, quantity]. */
  balances: [number, number, number][]
  /** The units with an expiry it moves or reserves. */
  lots: LotLine[]
}

/** The lots of the batch's dated holdings as the moves change them, and each lot's net change to write. */
class LotBook {
  readonly lots: Map<string, Lot[]>
  readonly dated: Set<string>
  readonly newlyDated = new Set<string>()
  readonly deltas = new Map<string, { quantity: number; held: number }>()

  constructor(
    locked: Locked,
    readonly now: string,
  ) {
    this.lots = new Map(locked.lots)
    this.dated = new Set(locked.dated)
  }

  /** Units of the holding that have expired and are not yet returned to mint. */
  expired(key: string): number {
    return this.dated.has(key) ? expiredOf(this.lots.get(key), this.now) : 0
  }

  /** The dated units a spend or a hold of `quantity` from the holding takes, soonest-expiring first. */
  soonest(walletId: number, assetId: number, quantity: number): LotPart[] {
    const key = holdingKey(walletId, assetId)
    return this.dated.has(key) ? takeSoonest(this.lots.get(key), quantity, this.now) : []
  }

  /** Adds `parts` (negative: `sign` -1) to the holding's lots' quantity or held, remembering how to undo it. */
  change(walletId: number, assetId: number, parts: LotPart[], sign: 1 | -1, field: 'quantity' | 'held', undo: (() => void)[]): void {
    if (parts.length === 0 || walletId === MINT_WALLET_ID) return
    const key = holdingKey(walletId, assetId)
    const before = this.lots.get(key)
    this.lots.set(key, addParts(before, parts, sign, field))
    undo.push(() => (before === undefined ? this.lots.delete(key) : this.lots.set(key, before)))
    if (!this.dated.has(key)) {
      this.dated.add(key)
      this.newlyDated.add(key)
      undo.push(() => {
        this.dated.delete(key)
        this.newlyDated.delete(key)
      })
    }
    for (const part of parts) {
      const at = lotKey(walletId, assetId, part.expiresAt)
      const previous = this.deltas.get(at)
      undo.push(() => (previous === undefined ? this.deltas.delete(at) : this.deltas.set(at, previous)))
      const next = { ...(previous ?? { quantity: 0, held: 0 }) }
      next[field] += sign * part.quantity
      this.deltas.set(at, next)
    }
  }
}

/**
 * The units with an expiry a move takes: an expiry's own lot, mint's as the move says, a capture's
 * from its hold, any other spend's soonest-expiring first (so units are not left to lapse).
 */
function lotsMoved(move: Move, book: LotBook, holdLots: Locked['holdLots']): LotLine[] {
  const moved: LotLine[] = []
  for (const { asset, quantity } of move.lines) {
    let parts: LotPart[]
    if (move.expire) parts = [{ expiresAt: move.expire, quantity }]
    else if (move.from === MINT_WALLET_ID) parts = (move.lots ?? []).filter((lot) => lot.assetId === asset.id)
    else if (move.settle) parts = takeFirst(holdLots.get(move.settle.hold.id)?.get(asset.id), quantity)
    else parts = book.soonest(move.from, asset.id, quantity)
    for (const part of parts) moved.push({ assetId: asset.id, ...part })
  }
  return moved
}

const partsOf = (lines: LotLine[], assetId: number): LotPart[] =>
  lines.filter((line) => line.assetId === assetId).map(({ expiresAt, quantity }) => ({ expiresAt, quantity }))

/** Adds `delta` to the value under `key`, remembering the value before (to undo a unit). */
function addTo<K>(map: Map<K, number>, key: K, delta: number, undo: (() => void)[]): void {
  const before = map.get(key)
  undo.push(() => (before === undefined ? map.delete(key) : map.set(key, before)))
  map.set(key, (before ?? 0) + delta)
}

/**
 * Checks each unit's moves in order against the locked balances, applying those that pass so the
 * next move sees them (a failed atomic unit is undone). Returns failures, passed moves and net changes.
 */
function planMoves(
  units: Unit[],
  locked: Locked,
  reversible: Map<number, Reversible>,
  keyUsage: Map<string, number>,
): {
  failed: Map<number, Map<number, AppError>>
  planned: Planned[]
  deltas: Map<string, number>
  heldDeltas: Map<string, number>
  book: LotBook
} {
  const book = new LotBook(locked, locked.now)
  const balances = new Map(locked.holdings)
  const held = new Map(locked.held)
  const failed = new Map<number, Map<number, AppError>>()
  const planned: Planned[] = []
  const deltas = new Map<string, number>()
  const heldDeltas = new Map<string, number>()
  units.forEach((unit, index) => {
    const undo: (() => void)[] = []
    const passed: Planned[] = []
    for (const [member, move] of unit.moves.entries()) {
      // What the hold being settled reserves is free again before the move is checked.
      const undoRelease: (() => void)[] = []
      for (const line of move.settle?.hold.assets ?? []) addTo(held, holdingKey(move.from, line.asset.id), -line.quantity, undoRelease)
      const changes = changesOf(move)
      const error = checkMove(move, changes, locked, balances, held, reversible, keyUsage, book)
      if (error) {
        for (const step of undoRelease.reverse()) step()
        failed.set(index, (failed.get(index) ?? new Map<number, AppError>()).set(member, error))
        if (!unit.atomic) continue
        for (const step of undo.reverse()) step()
        return
      }
      undo.push(...undoRelease)
      // A capture moves its reserved units with their expiry, even a past one; released units expire as usual.
      for (const line of move.settle?.hold.assets ?? []) {
        const reserved = move.settle ? locked.holdLots.get(move.settle.hold.id)?.get(line.asset.id) : undefined
        book.change(move.from, line.asset.id, reserved ?? [], -1, 'held', undo)
      }
      for (const line of move.settle?.hold.assets ?? []) addTo(heldDeltas, holdingKey(move.from, line.asset.id), -line.quantity, undo)
      // What a reversal takes back is no longer left for the next.
      const left = move.reverses === undefined ? undefined : reversible.get(move.reverses)?.left
      if (left) for (const line of move.lines) addTo(left, line.asset.id, -line.quantity, undo)
      // What a capped key moves or holds counts for its next move at once.
      for (const line of chargedLines(move)) addTo(keyUsage, holdingKey(move.key?.keyId ?? 0, line.asset.id), line.quantity, undo)
      const after: [number, number, number][] = []
      let lots: LotLine[]
      if (move.reserve) {
        lots = move.lines.flatMap(({ asset, quantity }) =>
          book.soonest(move.from, asset.id, quantity).map((part) => ({ assetId: asset.id, ...part })),
        )
        for (const line of move.lines) {
          addTo(held, holdingKey(move.from, line.asset.id), line.quantity, undo)
          addTo(heldDeltas, holdingKey(move.from, line.asset.id), line.quantity, undo)
          book.change(move.from, line.asset.id, partsOf(lots, line.asset.id), 1, 'held', undo)
        }
      } else {
        lots = lotsMoved(move, book, locked.holdLots)
        for (const line of lots.length === 0 ? [] : move.lines) {
          book.change(move.from, line.asset.id, partsOf(lots, line.asset.id), -1, 'quantity', undo)
          book.change(move.to, line.asset.id, partsOf(lots, line.asset.id), 1, 'quantity', undo)
        }
        for (const { walletId, line, delta } of changes) {
          const key = holdingKey(walletId, line.asset.id)
          addTo(balances, key, delta, undo)
          addTo(deltas, key, delta, undo)
          after.push([walletId, line.asset.id, balances.get(key) as number])
        }
      }
      const lines = move.lines.length < 2 ? move.lines : [...move.lines].sort((a, b) => compareAssetNames(a.asset.name, b.asset.name))
      passed.push({ index, member, move, lines, createdAt: locked.now, balances: after, lots })
    }
    planned.push(...passed)
  })
  return { failed, planned, deltas, heldDeltas, book }
}

type Change = { walletId: number; line: Line; delta: number }

/** Both sides of every line, in the fixed order in which they are checked: wallet id, then asset id. */
function changesOf(move: Move): Change[] {
  // One line (most moves): its two sides in wallet order, without sorting.
  if (move.lines.length === 1) {
    const line = move.lines[0]
    const sent = { walletId: move.from, line, delta: -line.quantity }
    const received = { walletId: move.to, line, delta: line.quantity }
    return move.from < move.to ? [sent, received] : [received, sent]
  }
  return move.lines
    .flatMap((line) => [
      { walletId: move.from, line, delta: -line.quantity },
      { walletId: move.to, line, delta: line.quantity },
    ])
    .sort((a, b) => a.walletId - b.walletId || a.line.asset.id - b.line.asset.id)
}

/**
 * The rules of one move, in a fixed order so the error is predictable: W000 (a deleted wallet),
 * T001 (reversal), K001 (key cap), then per line in (wallet, asset) order I002 (`spendable.ts`;
 * mint has no limit) or I003 (the holding's limit). A hold is checked as the transfer it may become.
 */
function checkMove(
  move: Move,
  changes: Change[],
  locked: Locked,
  balances: Map<string, number>,
  held: Map<string, number>,
  reversible: Map<number, Reversible>,
  keyUsage: Map<string, number>,
  book: LotBook,
): AppError | undefined {
  if (move.lines.length === 0) return undefined
  // An expiry returns what has already expired, from a deleted wallet too.
  if (move.expire) return undefined
  for (const walletId of [move.from, move.to]) {
    if (!locked.wallets.get(walletId)?.live) return new AppError('W000', `wallet ${walletId} has been deleted`)
  }
  if (move.reverses !== undefined) {
    const original = reversible.get(move.reverses)
    if (!original?.reversible) return new AppError('T001', `transaction ${move.reverses} is a reversal, which cannot be reversed`)
    for (const line of move.lines) {
      const left = original.left.get(line.asset.id) ?? 0
      if (line.quantity > left)
        return new AppError(
          'T001',
          `${left} of ${line.asset.name} is left to reverse of transaction ${move.reverses}, ${line.quantity} requested`,
        )
    }
  }
  for (const line of chargedLines(move)) {
    const cap = move.key?.perDay.get(line.asset.id) ?? 0
    const used = keyUsage.get(holdingKey(move.key?.keyId ?? 0, line.asset.id)) ?? 0
    if (used + line.quantity > cap)
      return new AppError(
        'K001',
        `per_day cap of ${line.asset.name} is ${cap}: ${Math.max(cap - used, 0)} left, ${line.quantity} requested`,
      )
  }
  for (const { walletId, line, delta } of changes) {
    const key = holdingKey(walletId, line.asset.id)
    const quantity = balances.get(key) ?? 0
    if (delta < 0 && walletId !== MINT_WALLET_ID) {
      const holding = { quantity, held: held.get(key) ?? 0, creditLimit: locked.credit.get(key) ?? 0, expired: book.expired(key) }
      if (spendable(holding, move.kind) < line.quantity)
        return new AppError('I002', insufficientDetail(holding, move.kind, line.asset.name, line.quantity))
    } else if (Math.abs(quantity + delta) > MAX_QUANTITY) {
      return new AppError('I003', `the holding of ${line.asset.name} would exceed ${MAX_QUANTITY}`)
    }
  }
  return undefined
}

/** The lines of a move that count against its key's `per_day` caps: those of a capped asset. */
function chargedLines(move: Move): Line[] {
  const key = move.key
  if (key === undefined || move.settle) return []
  return move.lines.filter((line) => key.perDay.has(line.asset.id))
}

/**
 * Applies the units in order (lock, check, write): one outcome per move. Throws only when the batch
 * cannot commit as a whole (database error, retryable race, IdempotencyConflict); the caller rolls back.
 */
export async function applyUnits(trx: Trx, units: Unit[], events: EventWriter, clock: () => string = nowIso): Promise<Outcome[][]> {
  // Loops, not `flatMap`, which costs V8 1-2 µs a move of a batch of hundreds.
  const moves: Move[] = []
  for (const unit of units) for (const move of unit.moves) moves.push(move)
  const locked = await lockMoves(trx, moves, clock)
  // Read under the wallets' turns, so no other reversal of the same original can interleave.
  const originals = [...new Set(moves.filter((move) => move.reverses !== undefined).map((move) => move.reverses as number))]
  const reversible = originals.length === 0 ? new Map<number, Reversible>() : await findReversible(trx, originals)
  // Read under the senders' turns (a key moves only from its own wallet), so no two moves of a key race.
  const caps = new Map(
    moves.filter((move) => move.key).map((move) => [move.key?.keyId ?? 0, [...(move.key?.perDay.keys() ?? [])]] as const),
  )
  const tallies = await readKeyUsage(trx, caps, Date.parse(locked.now))
  const keyUsage = new Map<string, number>()
  for (const [keyId, byAsset] of tallies) for (const [assetId, { used }] of byAsset) keyUsage.set(holdingKey(keyId, assetId), used)
  const { failed, planned, deltas, heldDeltas, book } = planMoves(units, locked, reversible, keyUsage)
  const outcomes: Outcome[][] = units.map((unit, index) =>
    unit.moves.map((_, member) => ({ ok: false, error: failed.get(index)?.get(member) })),
  )
  if (planned.length === 0) return outcomes

  const recording = planned.filter(({ move }) => recordsTransaction(move)).length
  const slotCount = planned.filter(({ move }) => recordsHoldEvent(move)).length
  const holdCount = planned.filter(({ move }) => move.reserve).length
  const ids = locked.reserved
    ? { transactions: locked.reserved.transactions.slice(0, recording), slots: locked.reserved.slots.slice(0, slotCount) }
    : await reserveIds(trx, recording, slotCount)
  const holdIds = holdCount > 0 ? await reserveHoldIds(trx, holdCount) : []
  let nextTransaction = 0
  let nextHold = 0
  const written = planned.map(({ index, member, move, lines, createdAt, balances, lots }) => {
    const transaction = recordsTransaction(move)
      ? toTransaction(
          {
            id: ids.transactions[nextTransaction++],
            sending_wallet_id: move.from,
            receiving_wallet_id: move.to,
            memo: move.memo,
            created_at: createdAt,
            kind: move.kind,
            reverses: move.reverses ?? null,
            hold_id: move.settle?.hold.id ?? move.holdId ?? null,
            metadata: move.metadata ?? {},
            schedule_id: move.scheduleId ?? null,
          },
          lines,
          locked.wallets,
        )
      : undefined
    let hold: Hold | undefined
    if (move.reserve) hold = toNewHold(holdIds[nextHold++], move, move.reserve.expiresIn, lines, createdAt, locked.wallets)
    else if (move.settle)
      hold = { ...move.settle.hold, status: move.settle.status, settled_at: move.settle.at, transaction_id: transaction?.id ?? null }
    return { index, member, move, lines, balances, transaction, body: transaction && JSON.stringify(transaction), hold, lots }
  })
  for (const { index, member, transaction, hold } of written) outcomes[index][member] = { ok: true, transaction, hold }
  const batch: BatchWrites = {
    moves: written,
    deltas,
    heldDeltas,
    lotDeltas: book.deltas,
    newlyDated: book.newlyDated,
    eventSlots: ids.slots,
    keys: idempotencyRecords(units, outcomes, written),
  }
  await writeMoves(trx, batch, locked, events)
  if (caps.size > 0) await recordKeyUses(trx, keyUses(written), tallies)
  if (events.watchBalances) await events.watchBalances(trx, holdingChanges(locked, written))
  return outcomes
}

/**
 * The Idempotency-Keys to store with the batch. A unit of which nothing is written stores nothing,
 * like a failed transfer, so a retry runs it again.
 */
function idempotencyRecords(units: Unit[], outcomes: Outcome[][], written: BatchWrites['moves']): IdempotencyRow[] {
  const keys: IdempotencyRow[] = []
  const bodies = new Map<Transaction, string>()
  for (const { index, move, transaction, body, hold } of written) {
    if (transaction && body) bodies.set(transaction, body)
    // A transfer's or a capture's answer is its Transaction; a new hold's, its Hold.
    const answer = transaction ?? hold
    if (move.idempotency && answer)
      keys.push({
        index,
        walletId: move.from,
        ...move.idempotency,
        status: 201,
        body: body ?? JSON.stringify(answer),
        createdAt: answer.created_at,
      })
  }
  const bodyOf = (transaction: Transaction) => bodies.get(transaction) ?? JSON.stringify(transaction)
  units.forEach((unit, index) => {
    const first = outcomes[index].find((outcome) => outcome.ok)
    if (!unit.idempotency || !first?.ok) return
    const { walletId, key, requestHash, respond } = unit.idempotency
    const { status, json } = respond(outcomes[index], bodyOf)
    keys.push({ index, walletId, key, requestHash, status, body: json, createdAt: transactionOf(first).created_at })
  })
  return keys
}

/** What the written moves of capped keys count against them (`key_uses`). */
function keyUses(written: { move: Move; hold?: Hold; transaction?: Transaction }[]): KeyUse[] {
  return written.flatMap(({ move, hold, transaction }) =>
    chargedLines(move).map((line) => ({
      keyId: move.key?.keyId ?? 0,
      assetId: line.asset.id,
      quantity: line.quantity,
      createdAt: hold?.created_at ?? transaction?.created_at ?? nowIso(),
      holdId: move.reserve ? (hold?.id ?? null) : null,
    })),
  )
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
    return transactionOf(outcome)
  })
}

/** The Transaction a move recorded; for moves that always record one (a transfer, an issuance, a capture). */
export function transactionOf(applied: Applied): Transaction {
  if (!applied.transaction) throw new Error('the move recorded no transaction')
  return applied.transaction
}

/** The Hold a reserving move records: pending, labelled like a Transaction. */
function toNewHold(id: number, move: Move, expiresIn: number, lines: Line[], createdAt: string, labels: Map<number, WalletLabel>): Hold {
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
    metadata: move.metadata ?? {},
    assets: lines.map((line) => ({ quantity: line.quantity, asset: line.asset })),
    created_at: createdAt,
    expires_at: new Date(Date.parse(createdAt) + expiresIn * 1000).toISOString(),
    settled_at: null,
    transaction_id: null,
  }
  if (sender?.username) hold.sending_username = sender.username
  if (receiver?.username) hold.receiving_username = receiver.username
  return hold
}

/** Applies the moves in order, each a unit of its own: one outcome per move (`applyUnits`). */
export async function applyMoves(trx: Trx, moves: Move[], events: EventWriter, clock: () => string = nowIso): Promise<Outcome[]> {
  const outcomes = await applyUnits(
    trx,
    moves.map((move) => ({ moves: [move], atomic: true })),
    events,
    clock,
  )
  return outcomes.map(([outcome]) => outcome)
}

/** One move in the caller's transaction (issue, burn, wallet deletion, a hold's settlement); throws the move's error. */
export async function applyMove(trx: Trx, move: Move, events: EventWriter, clock: () => string = nowIso): Promise<Applied> {
  const [outcome] = await applyMoves(trx, [move], events, clock)
  if (!outcome.ok) throw outcome.error
  return outcome
}

/** One move that moves something, in the caller's transaction (issue, burn, wallet deletion); throws the move's error. */
export async function moveAssets(trx: Trx, move: Move, events: EventWriter, clock: () => string = nowIso): Promise<Transaction> {
  return transactionOf(await applyMove(trx, move, events, clock))
}
