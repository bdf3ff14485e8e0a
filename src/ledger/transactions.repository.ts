import { sql, type Expression, type ExpressionBuilder, type Selectable, type SqlBool } from 'kysely'
import type { Executor } from '../db/database.ts'
import type { DB, TransactionsTable } from '../db/tables.ts'
import { toAsset } from './assets.repository.ts'
import { compareAssetNames, JOURNAL_SCOPE, type Line, type Metadata, type Transaction, type TransactionKind, type WalletLabel } from './ledger.types.ts'

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

/** A transaction's own fields, as stored (`metadata` parsed). */
export interface TransactionFields {
  id: number
  sending_wallet_id: number
  receiving_wallet_id: number
  memo: string
  created_at: string
  kind: TransactionKind
  reverses: number | null
  hold_id: number | null
  metadata: Metadata
}

export function toTransaction(row: TransactionFields, lines: Line[], labels: Map<number, WalletLabel>): Transaction {
  const sender = labels.get(row.sending_wallet_id)
  const receiver = labels.get(row.receiving_wallet_id)
  // Fields in the order of the stored answers (`body`), which migration 0008 extended at the end.
  return {
    id: row.id,
    sending_wallet_id: row.sending_wallet_id,
    receiving_wallet_id: row.receiving_wallet_id,
    sending_wallet_address: sender?.address ?? '',
    receiving_wallet_address: receiver?.address ?? '',
    created_at: row.created_at,
    memo: row.memo,
    assets: lines.map((line) => ({ quantity: line.quantity, asset: line.asset })),
    ...(sender?.username ? { sending_username: sender.username } : {}),
    ...(receiver?.username ? { receiving_username: receiver.username } : {}),
    kind: row.kind,
    // Each link only on its own kind.
    ...(row.kind === 'reversal' && row.reverses !== null ? { reverses: row.reverses } : {}),
    ...(row.kind === 'capture' && row.hold_id !== null ? { hold_id: row.hold_id } : {}),
    metadata: row.metadata,
  }
}

/** The columns `hydrate` turns into Transactions. */
const STORED_FIELDS = ['id', 'sending_wallet_id', 'receiving_wallet_id', 'memo', 'created_at', 'kind', 'reverses', 'hold_id', 'metadata'] as const
type StoredFields = Pick<Selectable<TransactionsTable>, (typeof STORED_FIELDS)[number]>

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
  kind?: TransactionKind
  /** Metadata entries that must all match exactly (at most 5). */
  metadata?: [key: string, value: string][]
}

/** What every page query of history filters on besides its wallet and its id range. */
type Narrowing = Pick<TransactionFilter, 'assetId' | 'since' | 'until' | 'kind' | 'metadata'>

/**
 * One page of a wallet's transactions, newest first, plus whether more exist; the one query of
 * history (the JSON list, the admin's view of a wallet and the CSV statement page through it).
 * The cost follows the page size, not the length of the history, whatever the filters:
 * - unfiltered, or by asset, time or `transfer`: each side (sent, received) is read through its
 *   own (wallet, id) index;
 * - by another kind: through the partial (wallet, kind, id) index of each side (migration 0008);
 * - by metadata: through the (wallet, key, value, transaction) key of `transaction_metadata`,
 *   which holds a row for each side, so one walk covers both.
 */
export async function listTransactions(db: Executor, filter: TransactionFilter): Promise<{ transactions: Transaction[]; more: boolean }> {
  if (filter.metadata && filter.metadata.length > 0) return pageByMetadata(db, filter.walletId, filter, filter.direction)
  const take = filter.offset + filter.limit + 1
  const rareKind = filter.kind !== undefined && filter.kind !== 'transfer' ? filter.kind : undefined
  const side = (column: 'sending_wallet_id' | 'receiving_wallet_id') => {
    // The wallet is bounded as a range of (wallet, id) pairs, not `wallet = ?`: given an equality,
    // PostgreSQL may instead walk the primary key backwards, through every newer transaction of
    // other wallets, when this wallet holds a large share of all rows (measured in bench/). The
    // same with a kind other than transfer, as (wallet, kind, id) triples.
    const { walletId, before, after } = filter
    const upTo = before === undefined ? '<=' : '<'
    const last = before ?? Number.MAX_SAFE_INTEGER
    const query = db
      .selectFrom('transactions')
      .select(STORED_FIELDS)
      .where((eb) =>
        rareKind === undefined
          ? eb.and([eb(eb.refTuple(column, 'id'), '>', eb.tuple(walletId, after ?? 0)), eb(eb.refTuple(column, 'id'), upTo, eb.tuple(walletId, last))])
          : eb.and([eb(eb.refTuple(column, 'kind', 'id'), '>', eb.tuple(walletId, rareKind, after ?? 0)), eb(eb.refTuple(column, 'kind', 'id'), upTo, eb.tuple(walletId, rareKind, last)), NOT_TRANSFER]),
      )
      .where((eb) => eb.and(narrowing(eb, filter)))
    const ordered = rareKind === undefined ? query.orderBy(column, 'desc') : query.orderBy(column, 'desc').orderBy('kind', 'desc')
    return db.selectFrom(ordered.orderBy('id', 'desc').limit(take).as(column === 'sending_wallet_id' ? 'sent' : 'received')).selectAll()
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
  return page(db, rows, filter.limit)
}

/**
 * The predicate of the partial indexes of kinds (migration 0008), written out as they are: the
 * planners use such an index only for a query that states it (SQLite matches its terms as written;
 * PostgreSQL cannot prove it from a parameter).
 */
const NOT_TRANSFER = sql<SqlBool>`kind <> 'transfer'`

/** The conditions of the filters other than the wallet and the id range. */
function narrowing(eb: ExpressionBuilder<DB, 'transactions'>, filter: Narrowing): Expression<SqlBool>[] {
  const conditions: Expression<SqlBool>[] = []
  if (filter.since !== undefined) conditions.push(eb('transactions.created_at', '>=', filter.since))
  if (filter.until !== undefined) conditions.push(eb('transactions.created_at', '<=', filter.until))
  if (filter.kind !== undefined) conditions.push(eb('transactions.kind', '=', filter.kind))
  if (filter.assetId !== undefined) {
    conditions.push(
      eb.exists(
        eb
          .selectFrom('transaction_assets')
          .select(sql`1`.as('one'))
          .whereRef('transaction_assets.transaction_id', '=', 'transactions.id')
          .where('transaction_assets.asset_id', '=', filter.assetId),
      ),
    )
  }
  return conditions
}

/**
 * A page of the transactions of `scope` (a wallet, or JOURNAL_SCOPE for the whole journal) that
 * carry every metadata entry of the filter: walks the first entry's (scope, key, value,
 * transaction) key backwards and probes that key once per further entry.
 */
async function pageByMetadata(db: Executor, scope: number, filter: Omit<TransactionFilter, 'walletId'>, direction?: 'sent' | 'received') {
  const [[key, value], ...others] = filter.metadata ?? []
  let query = db
    .selectFrom('transaction_metadata as m')
    .innerJoin('transactions', 'transactions.id', 'm.transaction_id')
    .select(STORED_FIELDS.map((field) => `transactions.${field}` as const))
    .where('m.wallet_id', '=', scope)
    .where('m.key', '=', key)
    .where('m.value', '=', value)
    .where((eb) => eb.and(narrowing(eb, filter)))
  if (filter.after !== undefined) query = query.where('m.transaction_id', '>', filter.after)
  if (filter.before !== undefined) query = query.where('m.transaction_id', '<', filter.before)
  if (direction === 'sent') query = query.where('transactions.sending_wallet_id', '=', scope)
  if (direction === 'received') query = query.where('transactions.receiving_wallet_id', '=', scope)
  for (const [otherKey, otherValue] of others) {
    query = query.where((eb) =>
      eb.exists(
        eb
          .selectFrom('transaction_metadata as o')
          .select(sql`1`.as('one'))
          .where('o.wallet_id', '=', scope)
          .where('o.key', '=', otherKey)
          .where('o.value', '=', otherValue)
          .whereRef('o.transaction_id', '=', 'm.transaction_id'),
      ),
    )
  }
  const rows = await query
    .orderBy('m.transaction_id', 'desc')
    .limit(filter.limit + 1)
    .offset(filter.offset)
    .execute()
  return page(db, rows, filter.limit)
}

/** The page of `limit` rows and whether more exist. */
async function page(db: Executor, rows: StoredFields[], limit: number): Promise<{ transactions: Transaction[]; more: boolean }> {
  return { transactions: await hydrate(db, rows.slice(0, limit)), more: rows.length > limit }
}

/**
 * One page of the whole journal (every wallet), newest first, plus whether more exist: the
 * operator's view. Walks the primary key backwards, so a page costs the same at any journal size
 * when unfiltered; a kind other than transfer walks its partial (kind, id) index, and metadata the
 * journal's rows of `transaction_metadata`; other filters narrow the walk as for a wallet.
 */
export async function listJournal(db: Executor, filter: Omit<TransactionFilter, 'walletId' | 'direction'>): Promise<{ transactions: Transaction[]; more: boolean }> {
  if (filter.metadata && filter.metadata.length > 0) return pageByMetadata(db, JOURNAL_SCOPE, filter)
  let query = db
    .selectFrom('transactions')
    .select(STORED_FIELDS)
    .where((eb) => eb.and(narrowing(eb, filter)))
  if (filter.kind !== undefined && filter.kind !== 'transfer') query = query.where(NOT_TRANSFER)
  if (filter.before !== undefined) query = query.where('id', '<', filter.before)
  if (filter.after !== undefined) query = query.where('id', '>', filter.after)
  const rows = await query
    .orderBy('id', 'desc')
    .limit(filter.limit + 1)
    .offset(filter.offset)
    .execute()
  return page(db, rows, filter.limit)
}

/** One transaction by id, as answered; undefined when there is none. */
export async function findTransaction(db: Executor, id: number): Promise<Transaction | undefined> {
  const rows = await db.selectFrom('transactions').select(STORED_FIELDS).where('id', '=', id).execute()
  return (await hydrate(db, rows))[0]
}

/** Line rows (of transactions or holds) grouped by their owner's id, each list by asset name. */
export function linesByOwner(rows: { owner: number; quantity: number; id: number; name: string; value: number }[]): Map<number, Line[]> {
  const sorted = [...rows].sort((a, b) => compareAssetNames(a.name, b.name))
  const lines = new Map<number, Line[]>()
  for (const row of sorted) {
    const owner = Number(row.owner)
    lines.set(owner, [...(lines.get(owner) ?? []), { asset: toAsset(row), quantity: Number(row.quantity) }])
  }
  return lines
}

/** Transactions of these rows, each with its lines (by asset name) and its wallets' labels. */
async function hydrate(db: Executor, rows: StoredFields[]): Promise<Transaction[]> {
  if (rows.length === 0) return []
  const lineRows = await db
    .selectFrom('transaction_assets')
    .innerJoin('assets', 'assets.id', 'transaction_assets.asset_id')
    .select(['transaction_assets.transaction_id as owner', 'transaction_assets.quantity', 'assets.id', 'assets.name', 'assets.value'])
    .where(
      'transaction_assets.transaction_id',
      'in',
      rows.map((row) => row.id),
    )
    .execute()
  const lines = linesByOwner(lineRows)
  const labels = await labelWallets(
    db,
    rows.flatMap((row) => [row.sending_wallet_id, row.receiving_wallet_id]),
  )
  return rows.map((row) =>
    toTransaction({ ...row, kind: row.kind as TransactionKind, metadata: row.metadata === null ? {} : (JSON.parse(row.metadata) as Metadata) }, lines.get(row.id) ?? [], labels),
  )
}

