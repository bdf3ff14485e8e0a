import { sql } from 'kysely'
import type { Executor } from '../db/database.ts'
import { anyOf, isPostgres, nowIso, rowsOf, runWrites, walletTurns, type Write } from '../db/dialect.ts'
import { eventWallets, transactionEventWrites } from '../events/outbox.ts'
import { AppError } from '../http/errors.ts'
import { compareAssetNames } from './assets.repository.ts'
import { MAX_QUANTITY, MINT_WALLET_ID, toTransaction, type Line, type Transaction, type WalletLabel } from './transactions.repository.ts'

/**
 * The one implementation of the ledger's write rules, for one move or a whole batch of them.
 *
 * A move sends every line from one wallet to another as one recorded Transaction. A batch is
 * applied in two steps inside the caller's database transaction:
 *
 * 1. `lockMoves` reads every wallet the batch touches and every holding it touches, in id order,
 *    so that concurrent batches lock in the same order; on PostgreSQL in one statement, which also
 *    reserves the ids of the new transactions and events. It first takes each wallet's turn
 *    (`walletTurns`): two moves of one wallet run one after the other, so the one that draws the
 *    lower id commits first (a client paging history with `after` never passes a transaction that
 *    commits later). Wallet rows are then locked `for key share`, so a wallet being deleted or
 *    handed over is waited for, not interleaved; holdings are locked for update.
 * 2. `applyMoves` checks the moves in order against those balances in memory, exactly as one
 *    transfer after the other would (W000, then I002 / I003 per line in (wallet, asset) order),
 *    takes the ids of the new transactions and events, and writes the moves that pass with one
 *    set-based statement per table: holdings, transactions, their lines, the outbox events and
 *    webhook deliveries (`events/outbox.ts`; a delivery for each event whose wallet has a webhook
 *    when the writes run, all locks held) and idempotency keys. On PostgreSQL these go to the
 *    server as one statement (`runWrites`). A move that fails changes nothing; its outcome
 *    carries its error.
 *
 * The statements have the same text whatever the batch size (rows travel as arrays on
 * PostgreSQL, as JSON on SQLite), so both databases prepare and plan each one once.
 */

export interface Move {
  from: number
  to: number
  lines: Line[]
  memo: string
  /** Stored with the move's response (POST /wallet/transactions with an Idempotency-Key). */
  idempotency?: { key: string; requestHash: string }
}

export type Outcome = { ok: true; transaction: Transaction } | { ok: false; error: unknown }

interface WalletState extends WalletLabel {
  live: boolean
}

export interface Locked {
  wallets: Map<number, WalletState>
  /** Current quantity by `${walletId}:${assetId}`; absent when there is no holding row. */
  holdings: Map<string, number>
  /** PostgreSQL: ids taken with the locks, enough for every move. */
  reserved?: Ids
}

/**
 * An Idempotency-Key that another instance stored first, found while writing the batch: the batch
 * must be rolled back and run again without these moves (which answer with the stored response).
 */
export class IdempotencyConflict extends Error {
  constructor(readonly indexes: number[]) {
    super('an Idempotency-Key of this batch was stored by another request')
  }
}

/** A holding changed by another batch between the lock and the write: run the batch again. */
class HoldingRace extends Error {
  // Retried like a serialization failure (dialect.ts isRetryable).
  readonly code = '40001'
  constructor() {
    super('a holding was created concurrently')
  }
}

const holdingKey = (walletId: number, assetId: number) => `${walletId}:${assetId}`

type WalletRow = { id: number; address: string; deleted_at: string | null; username: string | null }
type HoldingRow = { wallet_id: number; asset_id: number; quantity: number }
type Ids = { transactions: number[]; events: number[] }

/**
 * Reads and locks every wallet and holding the moves touch (step 1 above). On PostgreSQL this is
 * one statement, which also reserves ids for the transactions and events of every move (a move
 * that then fails leaves a gap); the ids are drawn only once the locks are held, and a wallet's
 * lock is held to the commit, so they grow in commit order for every wallet.
 */
export async function lockMoves(trx: Executor, moves: Move[]): Promise<Locked> {
  const walletIds = [...new Set(moves.flatMap((move) => [move.from, move.to]))]
  // Every pairing of these wallets and assets: a superset of the holdings the moves touch, in
  // one statement of fixed text; the few extra rows (multi-asset batches only) are locked too.
  const assetIds = [...new Set(moves.flatMap((move) => move.lines.map((line) => line.asset.id)))]
  // The username as a subquery: an index probe per wallet (a join let PostgreSQL's generic plan
  // scan every user for each batch).
  const selectWallets = sql`
    select wallets.id, wallets.address, wallets.deleted_at,
      (select users.username from users where users.primary_wallet_id = wallets.id) as username
    from wallets
    where ${anyOf(trx, sql.ref('wallets.id'), walletIds)}`
  const selectHoldings = sql`
    select wallet_id, asset_id, quantity from holdings
    where ${anyOf(trx, sql.ref('wallet_id'), walletIds)} and ${anyOf(trx, sql.ref('asset_id'), assetIds)}`
  let walletRows: WalletRow[]
  let holdingRows: HoldingRow[]
  let reserved: Ids | undefined
  if (isPostgres(trx)) {
    const events = moves.reduce((count, move) => count + eventWallets(move.from, move.to).length, 0)
    // Each `(select count(*) …) >= 0` is evaluated before the scan it guards: wallets are locked
    // first, then holdings, then ids are drawn.
    const { rows } = await sql<{ wallets: WalletRow[]; holdings: HoldingRow[]; transactions: string[]; events: string[] }>`
      with t as materialized (${walletTurns(walletIds)}),
      w as materialized (${selectWallets} and (select taken from t) >= 0 order by wallets.id for key share of wallets),
      h as materialized (${selectHoldings} and (select count(*) from w) >= 0 order by wallet_id, asset_id for update)
      select coalesce((select json_agg(w) from w), '[]') as wallets,
             coalesce((select json_agg(h) from h), '[]') as holdings,
             array(select nextval('transactions_id_seq') from generate_series(1, ${moves.length}::int) where (select count(*) from w) + (select count(*) from h) >= 0) as transactions,
             array(select nextval('events_id_seq') from generate_series(1, ${events}::int) where (select count(*) from w) + (select count(*) from h) >= 0) as events`.execute(trx)
    walletRows = rows[0].wallets
    holdingRows = rows[0].holdings
    const sorted = (values: string[]) => values.map(Number).sort((x, y) => x - y)
    reserved = { transactions: sorted(rows[0].transactions), events: sorted(rows[0].events) }
  } else {
    // SQLite has one writer: nothing to lock, and ids are taken once the batch knows how many.
    walletRows = (await sql<WalletRow>`${selectWallets} order by wallets.id`.execute(trx)).rows
    holdingRows = (await sql<HoldingRow>`${selectHoldings} order by wallet_id, asset_id`.execute(trx)).rows
  }
  const wallets = new Map<number, WalletState>()
  for (const row of walletRows) {
    const state: WalletState = { address: row.address, live: row.deleted_at === null }
    if (row.username !== null) state.username = row.username
    wallets.set(Number(row.id), state)
  }
  const holdings = new Map(holdingRows.map((row) => [holdingKey(Number(row.wallet_id), Number(row.asset_id)), Number(row.quantity)]))
  return { wallets, holdings, reserved }
}

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
export function planMoves(moves: Move[], locked: Locked): { failed: Map<number, AppError>; planned: Planned[]; deltas: Map<string, number> } {
  const balances = new Map(locked.holdings)
  const failed = new Map<number, AppError>()
  const planned: Planned[] = []
  const deltas = new Map<string, number>()
  moves.forEach((move, index) => {
    const error = checkMove(move, locked, balances)
    if (error) {
      failed.set(index, error)
      return
    }
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

function checkMove(move: Move, locked: Locked, balances: Map<string, number>): AppError | undefined {
  for (const walletId of [move.from, move.to]) {
    if (!locked.wallets.get(walletId)?.live) return new AppError('W000', `wallet ${walletId} has been deleted`)
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
 * Applies the moves, in order, against the rows `lockMoves` locked (step 2 above): one outcome per
 * move. Throws only when the batch as a whole cannot commit (a database error, a retryable race,
 * or an IdempotencyConflict), and the caller must then roll the transaction back.
 */
export async function applyMoves(trx: Executor, moves: Move[], locked: Locked): Promise<Outcome[]> {
  const { failed, planned, deltas } = planMoves(moves, locked)
  const outcomes: Outcome[] = moves.map((_, index) => ({ ok: false, error: failed.get(index) }))
  if (planned.length === 0) return outcomes

  const eventCount = planned.reduce((count, { move }) => count + eventWallets(move.from, move.to).length, 0)
  const ids = locked.reserved
    ? { transactions: locked.reserved.transactions.slice(0, planned.length), events: locked.reserved.events.slice(0, eventCount) }
    : await reserveIds(trx, planned.length, eventCount)
  const transactions = planned.map(({ move, lines, createdAt }, i) =>
    toTransaction({ id: ids.transactions[i], sending_wallet_id: move.from, receiving_wallet_id: move.to, memo: move.memo, created_at: createdAt }, lines, locked.wallets),
  )
  // Each transaction as answered: stored on its row (its events' data) and with its Idempotency-Key.
  const bodies = transactions.map((transaction) => JSON.stringify(transaction))
  const holdings = holdingWrites(trx, deltas, locked)
  const keys = idempotencyWrite(trx, planned, transactions, bodies)
  const writes = [
    ...holdings.writes,
    ...transactionWrites(trx, planned, transactions, bodies),
    ...transactionEventWrites(trx, transactions, ids.events),
    ...(keys ? [keys.write] : []),
  ]
  const results = await runWrites(trx, writes)
  if (holdings.created && results[holdings.created.index].length !== holdings.created.count) throw new HoldingRace()
  if (keys) keys.check(results[writes.indexOf(keys.write)])
  planned.forEach(({ index }, i) => (outcomes[index] = { ok: true, transaction: transactions[i] }))
  return outcomes
}

/** One move in the caller's transaction (issue, burn, wallet deletion); throws the move's error. */
export async function moveAssets(trx: Executor, move: Move): Promise<Transaction> {
  const [outcome] = await applyMoves(trx, [move], await lockMoves(trx, [move]))
  if (!outcome.ok) throw outcome.error
  return outcome.transaction
}

/** SQLite: ids for the batch's new transactions and events, after the largest ever used. */
async function reserveIds(trx: Executor, transactions: number, events: number): Promise<Ids> {
  // SQLite has one writer, and this transaction is it from its first write until commit; the next
  // ids follow the largest ever used (AUTOINCREMENT keeps that in sqlite_sequence).
  const { rows } = await sql<{ transactions: number; events: number }>`
    select max(coalesce((select seq from sqlite_sequence where name = 'transactions'), 0), coalesce((select max(id) from transactions), 0)) as transactions,
           max(coalesce((select seq from sqlite_sequence where name = 'events'), 0), coalesce((select max(id) from events), 0)) as events`.execute(trx)
  const after = (last: number, count: number) => Array.from({ length: count }, (_, i) => last + 1 + i)
  return { transactions: after(rows[0].transactions, transactions), events: after(rows[0].events, events) }
}

/**
 * Adds each holding's net change. Holdings that existed are locked, so they are updated in
 * place. New ones are inserted, and the change is added to, not written over, a row that another
 * batch created since the lock; should that sum leave the allowed range, the row is not written
 * (`created` tells how many must come back) and the batch runs again: it then finds the row and
 * locks it. New holdings never start below zero (only mint's may), so the insert itself cannot
 * trip the overdraft check.
 */
function holdingWrites(trx: Executor, deltas: Map<string, number>, locked: Locked): { writes: Write[]; created?: { index: number; count: number } } {
  const changed: [number, number, number][] = []
  const created: [number, number, number][] = []
  for (const [key, delta] of deltas) {
    const [walletId, assetId] = key.split(':').map(Number)
    if (!locked.holdings.has(key)) created.push([walletId, assetId, delta])
    // An existing holding that ends where it started needs no write.
    else if (delta !== 0) changed.push([walletId, assetId, delta])
  }
  // In (wallet, asset) order, like every lock the ledger takes.
  for (const rows of [changed, created]) rows.sort((a, b) => a[0] - b[0] || a[1] - b[1])
  const writes: Write[] = []
  if (changed.length > 0) {
    writes.push({
      statement: sql`
        update holdings set quantity = holdings.quantity + r.quantity
        from ${rowsOf(trx, HOLDING_COLUMNS, changed)}
        where holdings.wallet_id = r.wallet_id and holdings.asset_id = r.asset_id`,
    })
  }
  if (created.length === 0) return { writes }
  writes.push({
    statement: sql`
      insert into holdings (wallet_id, asset_id, quantity)
      select wallet_id, asset_id, quantity from ${rowsOf(trx, HOLDING_COLUMNS, created)} where true
      on conflict (wallet_id, asset_id) do update set quantity = holdings.quantity + excluded.quantity
      where holdings.quantity + excluded.quantity between ${-MAX_QUANTITY} and ${MAX_QUANTITY}`,
    returning: 'wallet_id',
  })
  return { writes, created: { index: writes.length - 1, count: created.length } }
}

const HOLDING_COLUMNS = [
  ['wallet_id', 'bigint'],
  ['asset_id', 'bigint'],
  ['quantity', 'bigint'],
] as const

function transactionWrites(trx: Executor, planned: Planned[], transactions: Transaction[], bodies: string[]): Write[] {
  const rows = transactions.map((t, i) => [t.id, t.sending_wallet_id, t.receiving_wallet_id, t.memo, t.created_at, bodies[i]])
  const lines = planned.flatMap(({ lines }, i) => lines.map((line) => [transactions[i].id, line.asset.id, line.quantity]))
  return [
    {
      statement: sql`
        insert into transactions (id, sending_wallet_id, receiving_wallet_id, memo, created_at, body)
        select id, sending_wallet_id, receiving_wallet_id, memo, created_at, body from ${rowsOf(trx, TRANSACTION_COLUMNS, rows)}`,
    },
    {
      statement: sql`
        insert into transaction_assets (transaction_id, asset_id, quantity)
        select transaction_id, asset_id, quantity from ${rowsOf(trx, LINE_COLUMNS, lines)}`,
    },
  ]
}

const TRANSACTION_COLUMNS = [
  ['id', 'bigint'],
  ['sending_wallet_id', 'bigint'],
  ['receiving_wallet_id', 'bigint'],
  ['memo', 'text'],
  ['created_at', 'text'],
  ['body', 'text'],
] as const
const LINE_COLUMNS = [
  ['transaction_id', 'bigint'],
  ['asset_id', 'bigint'],
  ['quantity', 'bigint'],
] as const

/**
 * Stores the response of each move sent with an Idempotency-Key. `check` throws
 * IdempotencyConflict, naming the moves, for keys that another request stored meanwhile.
 */
function idempotencyWrite(trx: Executor, planned: Planned[], transactions: Transaction[], bodies: string[]): { write: Write; check: (stored: Record<string, unknown>[]) => void } | undefined {
  const keyed = planned.flatMap(({ move, index }, i) => (move.idempotency ? [{ index, walletId: move.from, ...move.idempotency, transaction: transactions[i], body: bodies[i] }] : []))
  if (keyed.length === 0) return undefined
  const rows = keyed.map((k) => [k.walletId, k.key, k.requestHash, k.body, k.transaction.created_at])
  return {
    write: {
      statement: sql`
        insert into idempotency_keys (wallet_id, key, request_hash, status_code, response_body, created_at)
        select wallet_id, key, request_hash, 201, response_body, created_at from ${rowsOf(trx, IDEMPOTENCY_COLUMNS, rows)} where true
        on conflict (wallet_id, key) do nothing`,
      returning: 'wallet_id, key',
    },
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
  ['response_body', 'text'],
  ['created_at', 'text'],
] as const
