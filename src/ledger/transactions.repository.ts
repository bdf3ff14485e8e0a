import { sql, type ExpressionBuilder } from 'kysely'
import type { Executor } from '../db/database.ts'
import type { DB } from '../db/tables.ts'
import { toAsset } from './assets.repository.ts'
import { compareAssetNames, type Line, type Transaction, type WalletLabel } from './ledger.types.ts'

/** SQL that reads recorded transactions (a wallet's history); the write path is `moves.repository.ts`. */

/** Address and (for primary wallets) username of each wallet, for Transaction objects. */
export async function labelWallets(db: Executor, walletIds: number[]): Promise<Map<number, WalletLabel>> {
  const ids = [...new Set(walletIds)]
  if (ids.length === 0) return new Map()
  const rows = await db
    .selectFrom('wallets')
    // A subquery, so that each wallet's user is one index probe (a join can scan every user).
    .select((eb) => ['wallets.id', 'wallets.address', eb.selectFrom('users').select('users.username').whereRef('users.primary_wallet_id', '=', 'wallets.id').as('username')])
    .where('wallets.id', 'in', ids)
    .execute()
  return new Map(rows.map((row) => [row.id, row.username ? { address: row.address, username: row.username } : { address: row.address }]))
}

export function toTransaction(
  row: { id: number; sending_wallet_id: number; receiving_wallet_id: number; memo: string; created_at: string },
  lines: Line[],
  labels: Map<number, WalletLabel>,
): Transaction {
  const sender = labels.get(row.sending_wallet_id)
  const receiver = labels.get(row.receiving_wallet_id)
  const transaction: Transaction = {
    id: row.id,
    sending_wallet_id: row.sending_wallet_id,
    receiving_wallet_id: row.receiving_wallet_id,
    sending_wallet_address: sender?.address ?? '',
    receiving_wallet_address: receiver?.address ?? '',
    created_at: row.created_at,
    memo: row.memo,
    assets: lines.map((line) => ({ quantity: line.quantity, asset: line.asset })),
  }
  if (sender?.username) transaction.sending_username = sender.username
  if (receiver?.username) transaction.receiving_username = receiver.username
  return transaction
}

export interface TransactionFilter {
  walletId: number
  limit: number
  offset: number
  before?: number
  after?: number
  assetId?: number
  direction?: 'sent' | 'received'
  since?: string
  until?: string
}

/**
 * One page of a wallet's transactions, newest first, plus whether more exist. Each side (sent,
 * received) is read through its own (wallet, id) index, so the cost follows the page size, not
 * the length of the history.
 */
export async function listTransactions(db: Executor, filter: TransactionFilter): Promise<{ transactions: Transaction[]; more: boolean }> {
  const take = filter.offset + filter.limit + 1
  const side = (column: 'sending_wallet_id' | 'receiving_wallet_id') => {
    // The wallet is bounded as a range of (wallet, id) pairs, not `wallet = ?`: given an equality,
    // PostgreSQL may instead walk the primary key backwards, through every newer transaction of
    // other wallets, when this wallet holds a large share of all rows (measured in bench/).
    const { walletId, before, after } = filter
    let query = db
      .selectFrom('transactions')
      .select(['id', 'sending_wallet_id', 'receiving_wallet_id', 'memo', 'created_at'])
      .where((eb) =>
        eb.and([
          eb(eb.refTuple(column, 'id'), '>', eb.tuple(walletId, after ?? 0)),
          before === undefined ? eb(eb.refTuple(column, 'id'), '<=', eb.tuple(walletId, Number.MAX_SAFE_INTEGER)) : eb(eb.refTuple(column, 'id'), '<', eb.tuple(walletId, before)),
        ]),
      )
    if (filter.since !== undefined) query = query.where('created_at', '>=', filter.since)
    if (filter.until !== undefined) query = query.where('created_at', '<=', filter.until)
    if (filter.assetId !== undefined) query = query.where(movesAsset(filter.assetId))
    return db.selectFrom(query.orderBy(column, 'desc').orderBy('id', 'desc').limit(take).as(column === 'sending_wallet_id' ? 'sent' : 'received')).selectAll()
  }
  const query =
    filter.direction === 'sent'
      ? side('sending_wallet_id')
      : filter.direction === 'received'
        ? side('receiving_wallet_id')
        : side('sending_wallet_id').unionAll(side('receiving_wallet_id'))
  const rows = await db
    .selectFrom(query.as('page'))
    .selectAll()
    .orderBy('id', 'desc')
    .limit(filter.limit + 1)
    .offset(filter.offset)
    .execute()
  const more = rows.length > filter.limit
  const page = rows.slice(0, filter.limit)
  return { transactions: await hydrate(db, page), more }
}

/** The filter of transactions that move some of this asset. */
function movesAsset(assetId: number) {
  return (eb: ExpressionBuilder<DB, 'transactions'>) =>
    eb.exists(
      eb
        .selectFrom('transaction_assets')
        .select(sql`1`.as('one'))
        .whereRef('transaction_assets.transaction_id', '=', 'transactions.id')
        .where('transaction_assets.asset_id', '=', assetId),
    )
}

/**
 * One page of the whole journal (every wallet), newest first, plus whether more exist: the
 * operator's view. Walks the primary key backwards, so a page costs the same at any journal size
 * when unfiltered; filters narrow it as for a wallet's history.
 */
export async function listJournal(db: Executor, filter: Omit<TransactionFilter, 'walletId' | 'direction'>): Promise<{ transactions: Transaction[]; more: boolean }> {
  let query = db.selectFrom('transactions').select(['id', 'sending_wallet_id', 'receiving_wallet_id', 'memo', 'created_at'])
  if (filter.before !== undefined) query = query.where('id', '<', filter.before)
  if (filter.after !== undefined) query = query.where('id', '>', filter.after)
  if (filter.since !== undefined) query = query.where('created_at', '>=', filter.since)
  if (filter.until !== undefined) query = query.where('created_at', '<=', filter.until)
  if (filter.assetId !== undefined) query = query.where(movesAsset(filter.assetId))
  const rows = await query
    .orderBy('id', 'desc')
    .limit(filter.limit + 1)
    .offset(filter.offset)
    .execute()
  const more = rows.length > filter.limit
  return { transactions: await hydrate(db, rows.slice(0, filter.limit)), more }
}

async function hydrate(
  db: Executor,
  rows: { id: number; sending_wallet_id: number; receiving_wallet_id: number; memo: string; created_at: string }[],
): Promise<Transaction[]> {
  if (rows.length === 0) return []
  const lineRows = await db
    .selectFrom('transaction_assets')
    .innerJoin('assets', 'assets.id', 'transaction_assets.asset_id')
    .select(['transaction_assets.transaction_id', 'transaction_assets.quantity', 'assets.id', 'assets.name', 'assets.value'])
    .where(
      'transaction_assets.transaction_id',
      'in',
      rows.map((row) => row.id),
    )
    .execute()
  lineRows.sort((a, b) => compareAssetNames(a.name, b.name))
  const lines = new Map<number, Line[]>()
  for (const row of lineRows) {
    const list = lines.get(row.transaction_id) ?? []
    list.push({ asset: toAsset(row), quantity: row.quantity })
    lines.set(row.transaction_id, list)
  }
  const labels = await labelWallets(
    db,
    rows.flatMap((row) => [row.sending_wallet_id, row.receiving_wallet_id]),
  )
  return rows.map((row) => toTransaction(row, lines.get(row.id) ?? [], labels))
}

