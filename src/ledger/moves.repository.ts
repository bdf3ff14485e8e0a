import { CompiledQuery, sql, type RawBuilder } from 'kysely'
import type { Executor, Trx } from '../db/database.ts'
import { anyOf, insertRows, isPostgres, nowIso, rowsWrite, runWrites, type Write } from '../db/dialect.ts'
import { drawTransactionIds } from '../db/ids.ts'
import {
  IdempotencyConflict,
  JOURNAL_SCOPE,
  type EventWriter,
  type Hold,
  type HoldEventType,
  type Line,
  type Transaction,
  type WalletLabel,
} from './ledger.types.ts'
import { addParts, bySoonest, type Lot, type LotPart } from './lots.ts'

/**
 * The write path's statements: what a batch of moves (`moves.ts`) reads and locks, and what it
 * writes. Each statement's text is the same whatever the batch size (rows travel as arrays on
 * PostgreSQL, one run per row on SQLite), so each is prepared and planned once. On PostgreSQL a
 * batch is two round trips: `LOCK_MOVES` (turns, locks, ids) and `writeMoves` (every write as one
 * CTE per table); on SQLite, which has one writer, the reads take no locks and ids follow the largest used.
 */

/** A move as the statements see it: its wallets, lines and, with a key, the idempotency record. */
export interface MoveRecord {
  from: number
  to: number
  lines: Line[]
  /** `walletId`: whose keys it is among, when not the sender's (the operator's reversals). */
  idempotency?: { key: string; requestHash: string; walletId?: number }
  /** A new hold instead of a move: its lines are reserved in `from`. */
  reserve?: { expiresIn: number }
  /** The hold it settles: what that hold reserves in `from` is released. */
  settle?: { hold: Pick<Hold, 'id' | 'assets'> }
}

export interface WalletState extends WalletLabel {
  live: boolean
}

export interface Locked {
  wallets: Map<number, WalletState>
  /** Current quantity by `holdingKey(walletId, assetId)`; absent when there is no holding row. */
  holdings: Map<string, number>
  /**
   * What pending holds reserve, by `holdingKey`, where anything is: the `held` column less what
   * holds past their expiry (and not settled by this batch) still count in it, so that an expired
   * hold frees its assets at its expiry whether or not the expiry job has run (`findHeld`).
   */
  held: Map<string, number>
  /** Credit limits by `holdingKey`, where there is one. */
  credit: Map<string, number>
  /** PostgreSQL: ids taken with the locks, enough for every move. */
  reserved?: Ids
  /** When the batch happens, read once it holds its wallets' turns: the time of its transactions and holds. */
  now: string
  /** The holdings (`holdingKey`) that have had units with an expiry: only these have lots. */
  dated: Set<string>
  /** Their lots, soonest first, `held` as `held` above (holds past their expiry not counted). */
  lots: Map<string, Lot[]>
  /** What each hold being settled reserved of units with an expiry, by hold id and asset id. */
  holdLots: Map<number, Map<number, LotPart[]>>
}

/** Ids taken for a batch: its transactions', and a slot per hold event (`drawTransactionIds`). */
export type Ids = { transactions: number[]; slots: number[] }

export const holdingKey = (walletId: number, assetId: number) => `${walletId}:${assetId}`
export const lotKey = (walletId: number, assetId: number, expiresAt: string) => `${walletId}:${assetId}:${expiresAt}`

/** Units of one asset and expiry instant, of a transaction or a hold. */
export interface LotLine {
  assetId: number
  expiresAt: string
  quantity: number
}

/** A move records a Transaction when something moves: not a hold, not a void or an expiry. */
export function recordsTransaction(move: Pick<MoveRecord, 'reserve' | 'lines'>): boolean {
  return !move.reserve && move.lines.length > 0
}

/** Whether a move records a hold event (a hold made or settled): its row takes a slot of the transactions' ids. */
export function recordsHoldEvent(move: Pick<MoveRecord, 'reserve' | 'settle'>): boolean {
  return move.reserve !== undefined || move.settle !== undefined
}

/** A holding another batch created before this one's write: run the batch again (`holdingWrites`). */
class HoldingRace extends Error {
  // Retried like a serialization failure (db/retry.ts isRetryable).
  readonly code = '40001'
  constructor() {
    super('a holding was created concurrently')
  }
}

/**
 * A wallet's turn (PostgreSQL): an advisory lock per wallet, in id order, held to commit. Everything
 * that changes a wallet takes it before drawing ids, so a wallet's moves commit in id order; an
 * advisory lock writes nothing, unlike locking the wallet row (docs/performance.md#the-write-path).
 */
function walletTurns(walletIds: number[]): RawBuilder<unknown> {
  const ordered = [...new Set(walletIds)].sort((a, b) => a - b)
  return sql`select count(pg_advisory_xact_lock(id)) as taken from unnest(${ordered}::bigint[]) as id`
}

/** Waits for and takes the turns of these wallets (`walletTurns`). Nothing on SQLite, which has one writer. */
export async function takeWalletTurns(trx: Trx, walletIds: number[]): Promise<void> {
  if (isPostgres(trx)) await walletTurns(walletIds).execute(trx)
}

type WalletRow = { id: number; address: string; deleted_at: string | null; username: string | null }

// The username as a subquery: an index probe per wallet, where a join's generic plan scans every user.
const SELECT_WALLETS = `select wallets.id, wallets.address, wallets.deleted_at,
    (select users.username from users where users.primary_wallet_id = wallets.id) as username
  from wallets`
const SELECT_HOLDINGS = 'select wallet_id, asset_id, quantity, held, credit_limit, dated from holdings'

/**
 * `lockMoves` on PostgreSQL: $1 wallets in id order, $2 assets, $3/$4 how many transaction ids and
 * slots for hold events (`drawTransactionIds`). Each `(select count(*) …) >= 0` forces order:
 * turns, then wallets, then holdings, then ids.
 * Raw text rather than a Kysely template, so it is not compiled again for every batch.
 */
const LOCK_MOVES = `
  with t as materialized (select count(pg_advisory_xact_lock(id)) as taken from unnest($1::bigint[]) as id),
  w as materialized (${SELECT_WALLETS}
    where wallets.id = any($1::bigint[]) and (select taken from t) >= 0 order by wallets.id for key share of wallets),
  h as materialized (${SELECT_HOLDINGS}
    where wallet_id = any($1::bigint[]) and asset_id = any($2::bigint[]) and (select count(*) from w) >= 0
    order by wallet_id, asset_id for update)
  select coalesce((select json_agg(w) from w), '[]') as wallets,
         coalesce((select json_agg(h) from h), '[]') as holdings,
         array(select nextval('transactions_id_seq') from generate_series(1, $3::int)
           where (select count(*) from w) + (select count(*) from h) >= 0) as transactions,
         array(select nextval('transactions_id_seq') from generate_series(1, $4::int)
           where (select count(*) from w) + (select count(*) from h) >= 0) as slots`

type HoldingRow = { wallet_id: number; asset_id: number; quantity: number; held: number; credit_limit: number; dated: number }

/**
 * Reads and locks every wallet and holding the moves touch, in id order so concurrent batches cannot
 * deadlock. Ids are drawn only once the locks are held, so a wallet's ids grow in commit order and
 * paging with `after` never skips a later commit (a failed move leaves a gap). Wallet rows are locked
 * `for key share`, so a wallet being deleted or handed over is waited for.
 */
export async function lockMoves(trx: Trx, moves: MoveRecord[], clock: () => string): Promise<Locked> {
  // Loops, not `flatMap`, which costs V8 1-2 µs a move of a batch of hundreds.
  const wallets = new Set<number>()
  // Every pairing of these wallets and assets: a superset, so the statement's text stays fixed.
  const assets = new Set<number>()
  const settled: number[] = []
  for (const move of moves) {
    wallets.add(move.from).add(move.to)
    for (const line of move.lines) assets.add(line.asset.id)
    if (move.settle) {
      settled.push(move.settle.hold.id)
      for (const line of move.settle.hold.assets) assets.add(line.asset.id)
    }
  }
  const walletIds = [...wallets].sort((a, b) => a - b)
  const assetIds = [...assets]
  let walletRows: WalletRow[]
  let holdingRows: HoldingRow[]
  let reserved: Ids | undefined
  if (isPostgres(trx)) {
    // Enough for every move that could pass; one that fails leaves a gap.
    const transactions = moves.filter(recordsTransaction).length
    const slots = moves.filter(recordsHoldEvent).length
    const { rows } = await trx.executeQuery<{ wallets: WalletRow[]; holdings: HoldingRow[]; transactions: string[]; slots: string[] }>(
      CompiledQuery.raw(LOCK_MOVES, [walletIds, assetIds, transactions, slots]),
    )
    walletRows = rows[0].wallets
    holdingRows = rows[0].holdings
    const sorted = (values: string[]) => values.map(Number).sort((x, y) => x - y)
    reserved = { transactions: sorted(rows[0].transactions), slots: sorted(rows[0].slots) }
  } else {
    // SQLite has one writer: nothing to lock, and ids are taken once the batch knows how many.
    walletRows = (
      await sql<WalletRow>`${sql.raw(SELECT_WALLETS)} where ${anyOf(trx, sql.ref('wallets.id'), walletIds)} order by wallets.id`.execute(
        trx,
      )
    ).rows
    holdingRows = (
      await sql<HoldingRow>`${sql.raw(SELECT_HOLDINGS)}
        where ${anyOf(trx, sql.ref('wallet_id'), walletIds)} and ${anyOf(trx, sql.ref('asset_id'), assetIds)}
        order by wallet_id, asset_id`.execute(trx)
    ).rows
  }
  const states = new Map<number, WalletState>()
  for (const row of walletRows) {
    const state: WalletState = { address: row.address, live: row.deleted_at === null }
    if (row.username !== null) state.username = row.username
    states.set(Number(row.id), state)
  }
  const holdings = new Map(holdingRows.map((row) => [holdingKey(Number(row.wallet_id), Number(row.asset_id)), Number(row.quantity)]))
  // The batch's one instant, read once it holds its turns: its transactions' time, and what has expired by then.
  const now = clock()
  const held = await findHeld(trx, holdingRows, settled, now)
  const datedRows = holdingRows.filter((row) => Number(row.dated) === 1)
  const dated = new Set(datedRows.map((row) => holdingKey(Number(row.wallet_id), Number(row.asset_id))))
  // Only what a move spends, holds or settles from is measured by its lots; what a wallet receives
  // is added to its lots by instant, never read, so a receiving holding's lots are not loaded.
  const senders = new Set(moves.map((move) => move.from))
  const spentRows = datedRows.filter((row) => senders.has(Number(row.wallet_id)))
  const { lots, holdLots } =
    spentRows.length === 0 ? { lots: new Map<string, Lot[]>(), holdLots: new Map() } : await findLots(trx, spentRows, settled, now)
  const credit = new Map<string, number>()
  for (const row of holdingRows)
    if (Number(row.credit_limit) > 0) credit.set(holdingKey(Number(row.wallet_id), Number(row.asset_id)), Number(row.credit_limit))
  return { wallets: states, holdings, held, credit, reserved, dated, lots, holdLots, now }
}

type LotRow = { wallet_id: number; asset_id: number; expires_at: string; quantity: number | string; held: number | string }

/**
 * The lots of these dated holdings, soonest first, `held` counted as `findHeld` counts it; and what
 * the holds in `settled` reserved of them. Read after the turns, so it sees what those waited for.
 */
export async function findLots(
  db: Executor,
  holdings: { wallet_id: number; asset_id: number }[],
  settled: number[],
  now: string,
): Promise<{ lots: Map<string, Lot[]>; holdLots: Map<number, Map<number, LotPart[]>> }> {
  const walletIds = [...new Set(holdings.map((row) => Number(row.wallet_id)))]
  const assetIds = [...new Set(holdings.map((row) => Number(row.asset_id)))]
  const wanted = new Set(holdings.map((row) => holdingKey(Number(row.wallet_id), Number(row.asset_id))))
  const { rows } = await sql<LotRow>`
    select wallet_id, asset_id, expires_at, quantity, held from lots
    where ${anyOf(db, sql.ref('wallet_id'), walletIds)} and ${anyOf(db, sql.ref('asset_id'), assetIds)} and quantity > 0`.execute(db)
  const lots = new Map<string, Lot[]>()
  for (const row of rows) {
    const key = holdingKey(Number(row.wallet_id), Number(row.asset_id))
    if (!wanted.has(key)) continue
    const lot = { expiresAt: row.expires_at, quantity: Number(row.quantity), held: Number(row.held) }
    const list = lots.get(key)
    if (list) list.push(lot)
    else lots.set(key, [lot])
  }
  // One row per instant (the primary key), so each holding's list needs only ordering.
  for (const list of lots.values()) list.sort(bySoonest)
  if (rows.some((row) => Number(row.held) > 0)) {
    const { rows: lapsed } = await sql<LotRow>`
      select holds.sending_wallet_id as wallet_id, hold_lots.asset_id, hold_lots.expires_at, sum(hold_lots.quantity) as held, 0 as quantity
      from holds join hold_lots on hold_lots.hold_id = holds.id
      where holds.status = 'pending' and holds.expires_at <= ${now}
        and ${anyOf(db, sql.ref('holds.sending_wallet_id'), walletIds)} and ${anyOf(db, sql.ref('hold_lots.asset_id'), assetIds)}
        and not ${anyOf(db, sql.ref('holds.id'), settled)}
      group by holds.sending_wallet_id, hold_lots.asset_id, hold_lots.expires_at`.execute(db)
    for (const row of lapsed) {
      const key = holdingKey(Number(row.wallet_id), Number(row.asset_id))
      if (lots.has(key)) lots.set(key, addParts(lots.get(key), [{ expiresAt: row.expires_at, quantity: Number(row.held) }], -1, 'held'))
    }
  }
  const holdLots = new Map<number, Map<number, LotPart[]>>()
  if (settled.length > 0) {
    const { rows: reserved } = await sql<{ hold_id: number; asset_id: number; expires_at: string; quantity: number | string }>`
      select hold_id, asset_id, expires_at, quantity from hold_lots where ${anyOf(db, sql.ref('hold_id'), settled)}`.execute(db)
    for (const row of reserved) {
      const byAsset = holdLots.get(Number(row.hold_id)) ?? new Map<number, LotPart[]>()
      const parts = [...(byAsset.get(Number(row.asset_id)) ?? []), { expiresAt: row.expires_at, quantity: Number(row.quantity) }]
      byAsset.set(Number(row.asset_id), parts.sort(bySoonest))
      holdLots.set(Number(row.hold_id), byAsset)
    }
  }
  return { lots, holdLots }
}

/**
 * What pending holds reserve now, by `holdingKey`: the `held` column less holds past their expiry
 * (except those in `settled`), so an expired hold frees its assets whether or not the expiry job ran.
 * Read only when something is held, and after the turns, which every change of a hold takes.
 */
export async function findHeld(
  db: Executor,
  holdings: { wallet_id: number; asset_id: number; held: number }[],
  settled: number[] = [],
  now = nowIso(),
): Promise<Map<string, number>> {
  const reserving = holdings.filter((row) => Number(row.held) > 0)
  const held = new Map(reserving.map((row) => [holdingKey(Number(row.wallet_id), Number(row.asset_id)), Number(row.held)]))
  if (reserving.length === 0) return held
  const walletIds = [...new Set(reserving.map((row) => Number(row.wallet_id)))]
  const assetIds = [...new Set(reserving.map((row) => Number(row.asset_id)))]
  const { rows } = await sql<{ wallet_id: number; asset_id: number; quantity: number | string }>`
    select holds.sending_wallet_id as wallet_id, hold_assets.asset_id, sum(hold_assets.quantity) as quantity
    from holds join hold_assets on hold_assets.hold_id = holds.id
    where holds.status = 'pending' and holds.expires_at <= ${now}
      and ${anyOf(db, sql.ref('holds.sending_wallet_id'), walletIds)} and ${anyOf(db, sql.ref('hold_assets.asset_id'), assetIds)}
      and not ${anyOf(db, sql.ref('holds.id'), settled)}
    group by holds.sending_wallet_id, hold_assets.asset_id`.execute(db)
  for (const row of rows) {
    const key = holdingKey(Number(row.wallet_id), Number(row.asset_id))
    if (held.has(key)) held.set(key, (held.get(key) ?? 0) - Number(row.quantity))
  }
  return held
}

/** Ids for the batch's new holds: drawn from the sequence (PostgreSQL), or after the largest ever used (SQLite, one writer). */
export async function reserveHoldIds(trx: Trx, count: number): Promise<number[]> {
  if (isPostgres(trx)) {
    const { rows } = await sql<{ id: string }>`select nextval('holds_id_seq') as id from generate_series(1, ${count}::int)`.execute(trx)
    return rows.map((row) => Number(row.id)).sort((x, y) => x - y)
  }
  const { rows } = await sql<{ last: number }>`
    select max(coalesce((select seq from sqlite_sequence where name = 'holds'), 0),
               coalesce((select max(id) from holds), 0)) as last`.execute(trx)
  return Array.from({ length: count }, (_, i) => rows[0].last + 1 + i)
}

/** What is left to reverse of a transaction, by asset id, and whether it may be reversed at all. */
export interface Reversible {
  /** False for a reversal (never reversed itself). */
  reversible: boolean
  left: Map<number, number>
}

/**
 * What is left to reverse of each transaction: what it moved less what its reversals moved back.
 * Read under the turns of its two wallets, which every reversal of it takes, so none can interleave.
 */
export async function findReversible(trx: Trx, transactionIds: number[]): Promise<Map<number, Reversible>> {
  const { rows: moved } = await sql<{ id: number; kind: string; asset_id: number; quantity: number }>`
    select transactions.id, transactions.kind, transaction_assets.asset_id, transaction_assets.quantity
    from transactions join transaction_assets on transaction_assets.transaction_id = transactions.id
    where ${anyOf(trx, sql.ref('transactions.id'), transactionIds)}`.execute(trx)
  const { rows: reversed } = await sql<{ reverses: number; asset_id: number; quantity: number | string }>`
    select transactions.reverses, transaction_assets.asset_id, sum(transaction_assets.quantity) as quantity
    from transactions join transaction_assets on transaction_assets.transaction_id = transactions.id
    where ${anyOf(trx, sql.ref('transactions.reverses'), transactionIds)}
    group by transactions.reverses, transaction_assets.asset_id`.execute(trx)
  const found = new Map<number, Reversible>()
  for (const row of moved) {
    const id = Number(row.id)
    const entry = found.get(id) ?? { reversible: row.kind !== 'reversal', left: new Map<number, number>() }
    entry.left.set(Number(row.asset_id), Number(row.quantity))
    found.set(id, entry)
  }
  for (const row of reversed) {
    const left = found.get(Number(row.reverses))?.left
    const assetId = Number(row.asset_id)
    if (left) left.set(assetId, (left.get(assetId) ?? 0) - Number(row.quantity))
  }
  return found
}

/** SQLite: ids for the batch's new transactions, then its hold events' slots, after the largest ever used. */
export async function reserveIds(trx: Trx, transactions: number, slots: number): Promise<Ids> {
  const ids = await drawTransactionIds(trx, transactions + slots)
  return { transactions: ids.slice(0, transactions), slots: ids.slice(transactions) }
}

/** What a batch writes: the moves that passed, as recorded, and the net change of every holding. */
export interface BatchWrites {
  /** Each written move with its unit's index in the batch (and its own in the unit), its record and its Transaction, in batch order. */
  moves: {
    index: number
    member: number
    move: MoveRecord
    lines: Line[]
    transaction?: Transaction
    /** The transaction's JSON, serialised once: stored on its row, in its events and in any stored response. */
    body?: string
    hold?: Hold
    balances: [wallet: number, asset: number, quantity: number][]
    /** The units with an expiry it moved (its transaction's) or reserved (its hold's). */
    lots: LotLine[]
  }[]
  /** Net change by `holdingKey`. */
  deltas: Map<string, number>
  /** Net change of each lot, by `lotKey`: its quantity and what holds reserve of it. */
  lotDeltas: Map<string, { quantity: number; held: number }>
  /** Holdings (`holdingKey`) that get their first units with an expiry in this batch. */
  newlyDated: Set<string>
  /** Net change of what pending holds reserve, by `holdingKey`. */
  heldDeltas: Map<string, number>
  /** One reserved sequence id per event, in transaction order. */
  /** One slot of the transactions' ids per hold event, in order. */
  eventSlots: number[]
  /** The Idempotency-Keys stored with the batch, each with its response. */
  keys: IdempotencyRow[]
}

/** An Idempotency-Key and the response stored with it; `index` names its unit in the batch. */
export interface IdempotencyRow {
  index: number
  walletId: number
  key: string
  requestHash: string
  status: number
  body: string
  createdAt: string
}

/**
 * Writes a batch: holdings, transactions and lines, holds, lots, events and idempotency keys. Throws
 * HoldingRace (the batch runs again) and IdempotencyConflict naming the units whose key was taken.
 */
export async function writeMoves(trx: Trx, batch: BatchWrites, locked: Locked, events: EventWriter): Promise<void> {
  const recorded = batch.moves.filter((written) => written.transaction)
  const transactions = recorded.map((written) => written.transaction as Transaction)
  // Each transaction as answered, stored on its row (its events' data).
  const bodies = recorded.map((written) => written.body ?? JSON.stringify(written.transaction))
  const holdings = holdingWrites(trx, batch, locked)
  const holds = holdWrites(trx, batch)
  const keys = idempotencyWrite(trx, batch.keys)
  const holdEvents: { type: HoldEventType; hold: Hold }[] = []
  for (const { move, hold } of batch.moves)
    if (hold) holdEvents.push({ type: (move.reserve ? 'hold.created' : `hold.${hold.status}`) as HoldEventType, hold })
  const writes = [
    ...holdings.writes,
    ...(recorded.length > 0 ? transactionWrites(trx, recorded, bodies) : []),
    ...holds.writes,
    ...lotWrites(trx, batch),
    ...events.eventWrites(trx, transactions),
    ...events.holdEventWrites(trx, holdEvents, batch.eventSlots),
    ...(keys ? [keys.write] : []),
  ]
  const results = await runWrites(trx, writes)
  if (holdings.created && results[holdings.created.index].length !== holdings.created.count) throw new HoldingRace()
  // The caller locked every hold it settles and found it pending: anything else is a bug, never a second outcome.
  if (holds.settled && results[writes.indexOf(holds.settled.write)].length !== holds.settled.count)
    throw new Error('a hold being settled was not pending')
  if (keys) keys.check(results[writes.indexOf(keys.write)])
}

/**
 * Adds each holding's net change: locked holdings in place; new ones inserted but never over an
 * existing row (`created` counts what must come back). On PostgreSQL the locking statement's
 * snapshot predates the turns it waited for, so a holding another batch created meanwhile is unseen;
 * adding to it would write running balances counted from zero, so the batch runs again instead.
 */
function holdingWrites(
  trx: Trx,
  { deltas, heldDeltas, newlyDated }: BatchWrites,
  locked: Locked,
): { writes: Write[]; created?: { index: number; count: number } } {
  const changed: [number, number, number, number, number][] = []
  const created: [number, number, number, number, number][] = []
  for (const key of new Set([...deltas.keys(), ...heldDeltas.keys(), ...newlyDated])) {
    const [walletId, assetId] = key.split(':').map(Number)
    const delta = deltas.get(key) ?? 0
    const held = heldDeltas.get(key) ?? 0
    const dated = newlyDated.has(key) ? 1 : 0
    // A new holding starts with what the batch moved into it and what a hold of the same batch
    // reserves of that (a transfer funds it and a hold reserves part, both in one batch).
    if (!locked.holdings.has(key)) created.push([walletId, assetId, delta, held, dated])
    // An existing holding that ends where it started needs no write.
    else if (delta !== 0 || held !== 0 || dated !== 0) changed.push([walletId, assetId, delta, held, dated])
  }
  // In (wallet, asset) order, like every lock the ledger takes.
  for (const rows of [changed, created]) rows.sort((a, b) => a[0] - b[0] || a[1] - b[1])
  const writes: Write[] = []
  if (changed.length > 0) {
    writes.push(
      rowsWrite(
        trx,
        HOLDING_COLUMNS,
        changed,
        (r) => sql`
        update holdings set quantity = holdings.quantity + r.quantity, held = holdings.held + r.held,
          dated = case when r.dated = 1 then 1 else holdings.dated end
        from ${r}
        where holdings.wallet_id = r.wallet_id and holdings.asset_id = r.asset_id`,
        undefined,
        // One row per holding (`deltas` is keyed by holding).
        { distinct: true },
      ),
    )
  }
  if (created.length === 0) return { writes }
  writes.push(
    rowsWrite(
      trx,
      HOLDING_COLUMNS,
      created,
      (r) => sql`
        insert into holdings (wallet_id, asset_id, quantity, held, dated)
        select wallet_id, asset_id, quantity, held, dated from ${r} where true
        on conflict (wallet_id, asset_id) do nothing`,
      'wallet_id',
    ),
  )
  return { writes, created: { index: writes.length - 1, count: created.length } }
}

const HOLDING_COLUMNS = [
  ['wallet_id', 'bigint'],
  ['asset_id', 'bigint'],
  ['quantity', 'bigint'],
  ['held', 'bigint'],
  ['dated', 'bigint'],
] as const

/** Each lot's net change (an upsert, under its wallet's turn), and the units with an expiry moved or reserved. */
function lotWrites(trx: Trx, batch: BatchWrites): Write[] {
  const writes: Write[] = []
  const changes = [...batch.lotDeltas].filter(([, change]) => change.quantity !== 0 || change.held !== 0)
  if (changes.length > 0) {
    const rows = changes.map(([key, change]) => {
      const [walletId, assetId, ...time] = key.split(':')
      return [Number(walletId), Number(assetId), time.join(':'), change.quantity, change.held]
    })
    writes.push(
      rowsWrite(
        trx,
        LOT_COLUMNS,
        rows,
        (r) => sql`
        insert into lots (wallet_id, asset_id, expires_at, quantity, held)
        select wallet_id, asset_id, expires_at, quantity, held from ${r} where true
        on conflict (wallet_id, asset_id, expires_at)
        do update set quantity = lots.quantity + excluded.quantity, held = lots.held + excluded.held`,
      ),
    )
  }
  const moved: unknown[][] = []
  const reserved: unknown[][] = []
  for (const { move, transaction, hold, lots } of batch.moves) {
    if (transaction) for (const lot of lots) moved.push([transaction.id, lot.assetId, lot.expiresAt, lot.quantity])
    if (move.reserve && hold) for (const lot of lots) reserved.push([hold.id, lot.assetId, lot.expiresAt, lot.quantity])
  }
  if (moved.length > 0) writes.push(insertRows(trx, 'transaction_lots', TRANSACTION_LOT_COLUMNS, moved))
  if (reserved.length > 0) writes.push(insertRows(trx, 'hold_lots', HOLD_LOT_COLUMNS, reserved))
  return writes
}

const LOT_COLUMNS = [
  ['wallet_id', 'bigint'],
  ['asset_id', 'bigint'],
  ['expires_at', 'text'],
  ['quantity', 'bigint'],
  ['held', 'bigint'],
] as const
const TRANSACTION_LOT_COLUMNS = [
  ['transaction_id', 'bigint'],
  ['asset_id', 'bigint'],
  ['expires_at', 'text'],
  ['quantity', 'bigint'],
] as const
const HOLD_LOT_COLUMNS = [
  ['hold_id', 'bigint'],
  ['asset_id', 'bigint'],
  ['expires_at', 'text'],
  ['quantity', 'bigint'],
] as const

/** New holds with their lines, and the settlement of the holds the batch settles (only while still pending). */
function holdWrites(trx: Trx, batch: BatchWrites): { writes: Write[]; settled?: { write: Write; count: number } } {
  const created: Hold[] = []
  const settled: Hold[] = []
  for (const { move, hold } of batch.moves) {
    if (move.reserve && hold) created.push(hold)
    if (move.settle && hold) settled.push(hold)
  }
  const writes: Write[] = []
  if (created.length > 0) {
    const rows = created.map((h) => [
      h.id,
      h.sending_wallet_id,
      h.receiving_wallet_id,
      h.memo,
      JSON.stringify(h.metadata),
      h.created_at,
      h.expires_at,
    ])
    const lines = created.flatMap((h) => h.assets.map((line) => [h.id, line.asset.id, line.quantity]))
    writes.push(
      rowsWrite(
        trx,
        HOLD_COLUMNS,
        rows,
        (r) => sql`
        insert into holds (id, sending_wallet_id, receiving_wallet_id, memo, metadata, status, created_at, expires_at)
        select id, sending_wallet_id, receiving_wallet_id, memo, metadata, 'pending', created_at, expires_at from ${r}`,
      ),
      insertRows(trx, 'hold_assets', HOLD_LINE_COLUMNS, lines),
    )
  }
  if (settled.length === 0) return { writes }
  const rows = settled.map((h) => [h.id, h.status, h.settled_at, h.transaction_id])
  const write = rowsWrite(
    trx,
    SETTLEMENT_COLUMNS,
    rows,
    (r) => sql`
      update holds set status = r.status, settled_at = r.settled_at, transaction_id = r.transaction_id
      from ${r}
      where holds.id = r.id and holds.status = 'pending'`,
    'holds.id',
    // A hold is settled by one move of the batch at most (`settle`).
    { distinct: true },
  )
  writes.push(write)
  return { writes, settled: { write, count: settled.length } }
}

const HOLD_COLUMNS = [
  ['id', 'bigint'],
  ['sending_wallet_id', 'bigint'],
  ['receiving_wallet_id', 'bigint'],
  ['memo', 'text'],
  ['metadata', 'text'],
  ['created_at', 'text'],
  ['expires_at', 'text'],
] as const
const HOLD_LINE_COLUMNS = [
  ['hold_id', 'bigint'],
  ['asset_id', 'bigint'],
  ['quantity', 'bigint'],
] as const
const SETTLEMENT_COLUMNS = [
  ['id', 'bigint'],
  ['status', 'text'],
  ['settled_at', 'text'],
  ['transaction_id', 'bigint'],
] as const

/**
 * The writes of the moves that record a transaction (`recorded`, each with its transaction). Rows
 * are built in one loop: `flatMap` costs V8 1-2 µs a move, as much as SQLite's append of a line.
 */
function transactionWrites(trx: Trx, recorded: BatchWrites['moves'], bodies: string[]): Write[] {
  const rows: unknown[][] = []
  const lines: unknown[][] = []
  const balances: unknown[][] = []
  const tags: unknown[][] = []
  for (const [i, written] of recorded.entries()) {
    const t = written.transaction as Transaction
    const keys = Object.keys(t.metadata)
    rows.push([
      t.id,
      t.sending_wallet_id,
      t.receiving_wallet_id,
      t.memo,
      t.created_at,
      bodies[i],
      t.kind,
      t.reverses ?? null,
      t.hold_id ?? null,
      keys.length === 0 ? null : JSON.stringify(t.metadata),
      t.schedule_id ?? null,
    ])
    for (const line of written.lines) lines.push([t.id, line.asset.id, line.quantity])
    for (const [walletId, assetId, quantity] of written.balances) balances.push([walletId, assetId, t.created_at, t.id, quantity])
    // One row per metadata key for each side and for the journal (`JOURNAL_SCOPE`): migration 0008.
    for (const key of keys)
      for (const scope of [t.sending_wallet_id, t.receiving_wallet_id, JOURNAL_SCOPE]) tags.push([scope, key, t.metadata[key], t.id])
  }
  const writes: Write[] = [
    insertRows(trx, 'transactions', TRANSACTION_COLUMNS, rows),
    insertRows(trx, 'transaction_assets', LINE_COLUMNS, lines),
    // Balances in time: each holding the move changed, as it stands after it (migration 0010).
    insertRows(trx, 'running_balances', BALANCE_COLUMNS, balances),
  ]
  if (tags.length > 0) {
    writes.push(insertRows(trx, 'transaction_metadata', METADATA_COLUMNS, tags))
  }
  return writes
}

const TRANSACTION_COLUMNS = [
  ['id', 'bigint'],
  ['sending_wallet_id', 'bigint'],
  ['receiving_wallet_id', 'bigint'],
  ['memo', 'text'],
  ['created_at', 'text'],
  ['body', 'text'],
  ['kind', 'text'],
  ['reverses', 'bigint'],
  ['hold_id', 'bigint'],
  ['metadata', 'text'],
  ['schedule_id', 'bigint'],
] as const
const METADATA_COLUMNS = [
  ['wallet_id', 'bigint'],
  ['key', 'text'],
  ['value', 'text'],
  ['transaction_id', 'bigint'],
] as const
const BALANCE_COLUMNS = [
  ['wallet_id', 'bigint'],
  ['asset_id', 'bigint'],
  ['created_at', 'text'],
  ['transaction_id', 'bigint'],
  ['quantity', 'bigint'],
] as const
const LINE_COLUMNS = [
  ['transaction_id', 'bigint'],
  ['asset_id', 'bigint'],
  ['quantity', 'bigint'],
] as const

/** Columns of the ledger's rows as the write path writes them; the bench's direct seeding writes the same. */
export const LEDGER_COLUMNS = { transactions: TRANSACTION_COLUMNS, lines: LINE_COLUMNS, balances: BALANCE_COLUMNS }

/**
 * Stores the response of each request sent with an Idempotency-Key. `check` throws
 * IdempotencyConflict, naming the units, for keys that another request stored meanwhile.
 */
function idempotencyWrite(
  trx: Trx,
  keyed: IdempotencyRow[],
): { write: Write; check: (stored: Record<string, unknown>[]) => void } | undefined {
  if (keyed.length === 0) return undefined
  const rows = keyed.map((k) => [k.walletId, k.key, k.requestHash, k.status, k.body, k.createdAt])
  return {
    write: rowsWrite(
      trx,
      IDEMPOTENCY_COLUMNS,
      rows,
      (r) => sql`
        insert into idempotency_keys (wallet_id, key, request_hash, status_code, response_body, created_at)
        select wallet_id, key, request_hash, status_code, response_body, created_at from ${r} where true
        on conflict (wallet_id, key) do nothing`,
      'wallet_id, key',
    ),
    check(stored) {
      if (stored.length === keyed.length) return
      const taken = new Set(stored.map((row) => `${Number(row.wallet_id)}:${String(row.key)}`))
      throw new IdempotencyConflict(keyed.filter((k) => !taken.has(`${k.walletId}:${k.key}`)).map((k) => k.index))
    },
  }
}

const IDEMPOTENCY_COLUMNS = [
  ['wallet_id', 'bigint'],
  ['key', 'text'],
  ['request_hash', 'text'],
  ['status_code', 'bigint'],
  ['response_body', 'text'],
  ['created_at', 'text'],
] as const
