import type { ExpressionBuilder, Selectable } from 'kysely'
import type { Executor, Trx } from '../db/database.ts'
import { forUpdate } from '../db/dialect.ts'
import type { DB, HoldsTable } from '../db/tables.ts'
import type { Hold, HoldStatus, Line, WalletLabel } from './ledger.types.ts'
import { labelWallets, linesByOwner } from './transactions.repository.ts'

/**
 * SQL that reads holds. Their writes (a new hold, its settlement) run with the rest of a batch in
 * `moves.repository.ts`.
 *
 * A hold's stored `status` stays `pending` until the expiry job (or a settlement) writes
 * otherwise; every read here answers a pending row past its `expires_at` as `expired`, settled at
 * `expires_at`, so no read depends on the job having run.
 */

const HOLD_COLUMNS = [
  'id',
  'sending_wallet_id',
  'receiving_wallet_id',
  'memo',
  'metadata',
  'status',
  'created_at',
  'expires_at',
  'settled_at',
  'transaction_id',
] as const

type HoldRow = Selectable<HoldsTable>

/** The status a read answers: a pending hold past its expiry is expired. */
function statusAt(row: Pick<HoldRow, 'status' | 'expires_at'>, now: string): HoldStatus {
  return row.status === 'pending' && row.expires_at <= now ? 'expired' : (row.status as HoldStatus)
}

function toHold(row: HoldRow, lines: Line[], labels: Map<number, WalletLabel>, now: string): Hold {
  const sender = labels.get(Number(row.sending_wallet_id))
  const receiver = labels.get(Number(row.receiving_wallet_id))
  const status = statusAt(row, now)
  const hold: Hold = {
    id: Number(row.id),
    status,
    sending_wallet_id: Number(row.sending_wallet_id),
    receiving_wallet_id: Number(row.receiving_wallet_id),
    sending_wallet_address: sender?.address ?? '',
    receiving_wallet_address: receiver?.address ?? '',
    memo: row.memo,
    metadata: JSON.parse(row.metadata) as Record<string, string>,
    assets: lines.map((line) => ({ quantity: line.quantity, asset: line.asset })),
    created_at: row.created_at,
    expires_at: row.expires_at,
    settled_at: status === 'expired' ? (row.settled_at ?? row.expires_at) : row.settled_at,
    transaction_id: row.transaction_id === null ? null : Number(row.transaction_id),
  }
  if (sender?.username) hold.sending_username = sender.username
  if (receiver?.username) hold.receiving_username = receiver.username
  return hold
}

async function hydrate(db: Executor, rows: HoldRow[], now: string): Promise<Hold[]> {
  if (rows.length === 0) return []
  const lineRows = await db
    .selectFrom('hold_assets')
    .innerJoin('assets', 'assets.id', 'hold_assets.asset_id')
    .select(['hold_assets.hold_id as owner', 'hold_assets.quantity', 'assets.id', 'assets.name', 'assets.value'])
    .where(
      'hold_assets.hold_id',
      'in',
      rows.map((row) => row.id),
    )
    .execute()
  const lines = linesByOwner(lineRows)
  const labels = await labelWallets(
    db,
    rows.flatMap((row) => [Number(row.sending_wallet_id), Number(row.receiving_wallet_id)]),
  )
  return rows.map((row) => toHold(row, lines.get(Number(row.id)) ?? [], labels, now))
}

/** One hold as a read answers it, or undefined. */
export async function findHold(db: Executor, holdId: number, now: string): Promise<Hold | undefined> {
  const row = await db.selectFrom('holds').select(HOLD_COLUMNS).where('id', '=', holdId).executeTakeFirst()
  return row ? (await hydrate(db, [row], now))[0] : undefined
}

/**
 * Locks a hold's row for the rest of the transaction (PostgreSQL; SQLite serializes writers) and
 * reads it as of now, with whether it is still unsettled in storage (`stored`: a hold past its
 * expiry reads as expired before the expiry is written). Taken after its wallets' turns, like
 * every settlement.
 */
export async function lockHold(trx: Trx, holdId: number, now: string): Promise<{ hold: Hold; unsettled: boolean } | undefined> {
  const row = await forUpdate(trx.selectFrom('holds').select(HOLD_COLUMNS).where('id', '=', holdId), trx).executeTakeFirst()
  return row ? { hold: (await hydrate(trx, [row], now))[0], unsettled: row.status === 'pending' } : undefined
}

/** The status filter of a list, as the reads answer statuses. */
function hasStatus(status: HoldStatus, now: string) {
  return (eb: ExpressionBuilder<DB, 'holds'>) => {
    if (status === 'pending') return eb.and([eb('status', '=', 'pending'), eb('expires_at', '>', now)])
    if (status === 'expired')
      return eb.or([eb('status', '=', 'expired'), eb.and([eb('status', '=', 'pending'), eb('expires_at', '<=', now)])])
    return eb('status', '=', status)
  }
}

export interface HoldFilter {
  walletId: number
  limit: number
  before?: number
  after?: number
  status?: HoldStatus
  direction?: 'sent' | 'received'
}

/**
 * One page of the holds a wallet is either side of, newest first, plus whether more exist: each
 * side read through its own (wallet, id) index, like a wallet's history.
 */
export async function listHolds(db: Executor, filter: HoldFilter, now: string): Promise<{ holds: Hold[]; more: boolean }> {
  const take = filter.limit + 1
  const side = (column: 'sending_wallet_id' | 'receiving_wallet_id') => {
    const { walletId, before, after } = filter
    let query = db
      .selectFrom('holds')
      .select(HOLD_COLUMNS)
      .where((eb) =>
        eb.and([
          eb(eb.refTuple(column, 'id'), '>', eb.tuple(walletId, after ?? 0)),
          before === undefined
            ? eb(eb.refTuple(column, 'id'), '<=', eb.tuple(walletId, Number.MAX_SAFE_INTEGER))
            : eb(eb.refTuple(column, 'id'), '<', eb.tuple(walletId, before)),
        ]),
      )
    if (filter.status !== undefined) query = query.where(hasStatus(filter.status, now))
    return db
      .selectFrom(
        query
          .orderBy(column, 'desc')
          .orderBy('id', 'desc')
          .limit(take)
          .as(column === 'sending_wallet_id' ? 'sent' : 'received'),
      )
      .selectAll()
  }
  const query =
    filter.direction === 'sent'
      ? side('sending_wallet_id')
      : filter.direction === 'received'
        ? side('receiving_wallet_id')
        : side('sending_wallet_id').unionAll(side('receiving_wallet_id'))
  const rows = await db.selectFrom(query.as('page')).selectAll().orderBy('id', 'desc').limit(take).execute()
  return { holds: await hydrate(db, rows.slice(0, filter.limit), now), more: rows.length > filter.limit }
}

/** Ids of holds still stored as pending whose expiry has come, oldest expiry first (`holds_pending_expiry`). */
export async function findDueHolds(db: Executor, now: string, limit: number): Promise<number[]> {
  const rows = await db
    .selectFrom('holds')
    .select('id')
    .where('status', '=', 'pending')
    .where('expires_at', '<=', now)
    .orderBy('expires_at')
    .limit(limit)
    .execute()
  return rows.map((row) => Number(row.id))
}

/** Ids of the holds stored as pending that the wallet is either side of, and the wallets on their other side. */
export async function findPendingHoldsOf(db: Executor, walletId: number): Promise<{ id: number; counterparty: number }[]> {
  const rows = await db
    .selectFrom('holds')
    .select(['id', 'sending_wallet_id', 'receiving_wallet_id'])
    .where('status', '=', 'pending')
    .where((eb) => eb.or([eb('sending_wallet_id', '=', walletId), eb('receiving_wallet_id', '=', walletId)]))
    .orderBy('id')
    .execute()
  return rows.map((row) => ({
    id: Number(row.id),
    counterparty: Number(row.sending_wallet_id) === walletId ? Number(row.receiving_wallet_id) : Number(row.sending_wallet_id),
  }))
}
