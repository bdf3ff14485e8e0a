import { CompiledQuery } from 'kysely'
import type { Executor } from '../db/database.ts'
import { isPostgres } from '../db/dialect.ts'
import { toAsset } from './assets.repository.ts'
import { compareAssetNames, JOURNAL_SCOPE, type Asset, type Line, type Metadata, type Transaction, type TransactionKind, type WalletLabel } from './ledger.types.ts'

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
  return shapeTransaction(row, lines, labels.get(row.sending_wallet_id), labels.get(row.receiving_wallet_id))
}

function shapeTransaction(row: TransactionFields, lines: Line[], sender: WalletLabel | undefined, receiver: WalletLabel | undefined): Transaction {
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

type Page = { transactions: Transaction[]; more: boolean }

/**
 * The text and parameters of one statement, written by hand for the executor's dialect (`?` on
 * SQLite, `$n` on PostgreSQL). The page queries are the hot read of the service: building them
 * with Kysely's query builder and compiling them cost more CPU than SQLite took to run them
 * (`docs/performance.md#read-path-one-statement-per-page`). `param` returns the placeholder of
 * the value it appends, so the text is written in the order of its parameters.
 */
class Statement {
  readonly params: unknown[] = []
  readonly postgres: boolean

  constructor(db: Executor) {
    this.postgres = isPostgres(db)
  }

  param(value: unknown): string {
    this.params.push(value)
    return this.postgres ? `$${this.params.length}` : '?'
  }

  /**
   * A row count (LIMIT, OFFSET) written into the text. SQLite ran a page with its counts written
   * out three times faster than with them as parameters (it then knows how few rows each ordered
   * part needs); the counts are a few (page sizes 1-100 and 200, offsets mostly 0), so the kept
   * statements stay few.
   */
  count(value: number): string {
    if (!Number.isSafeInteger(value) || value < 0) throw new Error(`not a row count: ${value}`)
    return String(value)
  }
}

/** The columns of `transactions` a page selection answers, for `pageOf`. */
const STORED_FIELDS = 't.id, t.sending_wallet_id, t.receiving_wallet_id, t.memo, t.created_at, t.kind, t.reverses, t.hold_id, t.metadata'

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
export function listTransactions(db: Executor, filter: TransactionFilter): Promise<Page> {
  if (filter.metadata && filter.metadata.length > 0) return pageByMetadata(db, filter.walletId, filter, filter.direction)
  const q = new Statement(db)
  const take = filter.offset + filter.limit + 1
  const rareKind = filter.kind !== undefined && filter.kind !== 'transfer' ? filter.kind : undefined
  const side = (column: 'sending_wallet_id' | 'receiving_wallet_id') => {
    const { walletId, before, after } = filter
    const upTo = before === undefined ? '<=' : '<'
    const last = before ?? Number.MAX_SAFE_INTEGER
    let range: string
    if (q.postgres) {
      // The wallet is bounded as a range of (wallet, id) pairs, not `wallet = ?`: given an
      // equality, PostgreSQL may instead walk the primary key backwards, through every newer
      // transaction of other wallets, when this wallet holds a large share of all rows (measured
      // in bench/). The same with a kind other than transfer, as (wallet, kind, id) triples.
      range =
        rareKind === undefined
          ? `(t.${column}, t.id) > (${q.param(walletId)}, ${q.param(after ?? 0)}) and (t.${column}, t.id) ${upTo} (${q.param(walletId)}, ${q.param(last)})`
          : `(t.${column}, t.kind, t.id) > (${q.param(walletId)}, ${q.param(rareKind)}, ${q.param(after ?? 0)}) and (t.${column}, t.kind, t.id) ${upTo} (${q.param(walletId)}, ${q.param(rareKind)}, ${q.param(last)}) and ${NOT_TRANSFER}`
    } else {
      // SQLite seeks the same index entries with an equality, and ran the page twice as fast so.
      range = `t.${column} = ${q.param(walletId)}`
      if (rareKind !== undefined) range += ` and t.kind = ${q.param(rareKind)} and ${NOT_TRANSFER}`
      range += ` and t.id > ${q.param(after ?? 0)} and t.id ${upTo} ${q.param(last)}`
    }
    const order = rareKind === undefined ? `t.${column} desc, t.id desc` : `t.${column} desc, t.kind desc, t.id desc`
    return `select * from (select ${STORED_FIELDS} from transactions t where ${[range, ...narrowing(q, filter)].join(' and ')} order by ${order} limit ${q.count(take)}) as ${column === 'sending_wallet_id' ? 'sent' : 'received'}`
  }
  const sides = filter.direction === 'sent' ? side('sending_wallet_id') : filter.direction === 'received' ? side('receiving_wallet_id') : `${side('sending_wallet_id')} union all ${side('receiving_wallet_id')}`
  return pageOf(db, q, `select * from (${sides}) as page order by id desc limit ${q.count(filter.limit + 1)} offset ${q.count(filter.offset)}`, filter.limit)
}

/**
 * The predicate of the partial indexes of kinds (migration 0008), written out as they are: the
 * planners use such an index only for a query that states it (SQLite matches its terms as written;
 * PostgreSQL cannot prove it from a parameter).
 */
const NOT_TRANSFER = `kind <> 'transfer'`

/** The conditions of the filters other than the wallet and the id range, on `transactions t`. */
function narrowing(q: Statement, filter: Narrowing): string[] {
  const conditions: string[] = []
  if (filter.since !== undefined) conditions.push(`t.created_at >= ${q.param(filter.since)}`)
  if (filter.until !== undefined) conditions.push(`t.created_at <= ${q.param(filter.until)}`)
  if (filter.kind !== undefined) conditions.push(`t.kind = ${q.param(filter.kind)}`)
  if (filter.assetId !== undefined) conditions.push(`exists (select 1 from transaction_assets ta where ta.transaction_id = t.id and ta.asset_id = ${q.param(filter.assetId)})`)
  return conditions
}

/**
 * A page of the transactions of `scope` (a wallet, or JOURNAL_SCOPE for the whole journal) that
 * carry every metadata entry of the filter: walks the first entry's (scope, key, value,
 * transaction) key backwards and probes that key once per further entry.
 */
function pageByMetadata(db: Executor, scope: number, filter: Omit<TransactionFilter, 'walletId'>, direction?: 'sent' | 'received'): Promise<Page> {
  const [[key, value], ...others] = filter.metadata ?? []
  const q = new Statement(db)
  const conditions = [`m.wallet_id = ${q.param(scope)}`, `m.key = ${q.param(key)}`, `m.value = ${q.param(value)}`, ...narrowing(q, filter)]
  if (filter.after !== undefined) conditions.push(`m.transaction_id > ${q.param(filter.after)}`)
  if (filter.before !== undefined) conditions.push(`m.transaction_id < ${q.param(filter.before)}`)
  if (direction === 'sent') conditions.push(`t.sending_wallet_id = ${q.param(scope)}`)
  if (direction === 'received') conditions.push(`t.receiving_wallet_id = ${q.param(scope)}`)
  for (const [otherKey, otherValue] of others) {
    conditions.push(
      `exists (select 1 from transaction_metadata o where o.wallet_id = ${q.param(scope)} and o.key = ${q.param(otherKey)} and o.value = ${q.param(otherValue)} and o.transaction_id = m.transaction_id)`,
    )
  }
  const selection = `select ${STORED_FIELDS} from transaction_metadata m inner join transactions t on t.id = m.transaction_id where ${conditions.join(' and ')} order by m.transaction_id desc limit ${q.count(filter.limit + 1)} offset ${q.count(filter.offset)}`
  return pageOf(db, q, selection, filter.limit)
}

/**
 * One page of the whole journal (every wallet), newest first, plus whether more exist: the
 * operator's view. Walks the primary key backwards, so a page costs the same at any journal size
 * when unfiltered; a kind other than transfer walks its partial (kind, id) index, and metadata the
 * journal's rows of `transaction_metadata`; other filters narrow the walk as for a wallet.
 */
export function listJournal(db: Executor, filter: Omit<TransactionFilter, 'walletId' | 'direction'>): Promise<Page> {
  if (filter.metadata && filter.metadata.length > 0) return pageByMetadata(db, JOURNAL_SCOPE, filter)
  const q = new Statement(db)
  const conditions = narrowing(q, filter)
  if (filter.kind !== undefined && filter.kind !== 'transfer') conditions.push(NOT_TRANSFER)
  if (filter.before !== undefined) conditions.push(`t.id < ${q.param(filter.before)}`)
  if (filter.after !== undefined) conditions.push(`t.id > ${q.param(filter.after)}`)
  const where = conditions.length === 0 ? '' : ` where ${conditions.join(' and ')}`
  return pageOf(db, q, `select ${STORED_FIELDS} from transactions t${where} order by t.id desc limit ${q.count(filter.limit + 1)} offset ${q.count(filter.offset)}`, filter.limit)
}

/** One transaction by id, as answered; undefined when there is none. */
export async function findTransaction(db: Executor, id: number): Promise<Transaction | undefined> {
  const q = new Statement(db)
  return (await readTransactions(db, q, `select ${STORED_FIELDS} from transactions t where t.id = ${q.param(id)}`))[0]
}

/** The page of at most `limit` transactions of the selection (which reads one more) and whether more exist. */
async function pageOf(db: Executor, q: Statement, selection: string, limit: number): Promise<Page> {
  const transactions = await readTransactions(db, q, selection)
  return { transactions: transactions.slice(0, limit), more: transactions.length > limit }
}

/**
 * A transaction as `readTransactions`' statement answers it: its own fields, its wallets' labels
 * and its lines, in the order of `TRANSACTIONS_JSON` below.
 */
type TransactionTuple = [
  id: number,
  sendingWalletId: number,
  receivingWalletId: number,
  sendingAddress: string | null,
  receivingAddress: string | null,
  sendingUsername: string | null,
  receivingUsername: string | null,
  createdAt: string,
  memo: string,
  kind: TransactionKind,
  reverses: number | null,
  holdId: number | null,
  metadata: Metadata | null,
  lines: [quantity: number, assetId: number, name: string, value: number][],
]

/**
 * The transactions of `selection` (rows of `transactions` with STORED_FIELDS, newest first),
 * each with its lines and its wallets' addresses and usernames, read by ONE statement that answers
 * them as one JSON text built by the database: one round trip on PostgreSQL, one snapshot of
 * committed data on both storages (three statements outside a transaction were not one on
 * PostgreSQL), and one string for Node to parse instead of rows of three queries to join. The
 * numbers keep their exact values through the JSON (integers as they are; PostgreSQL writes a
 * double precision in its shortest exact form, SQLite with up to 17 digits), and the answer is
 * still serialized by the route's schema, so its bytes are those of the rows read one by one.
 */
async function readTransactions(db: Executor, q: Statement, selection: string): Promise<Transaction[]> {
  const text = q.postgres
    ? `with page as (${selection}) select coalesce(json_agg(${tupleOf('json_build_array', 'json_agg', 'page.metadata::json')} order by page.id desc), '[]')::text as page from page`
    : `with page as (${selection}) select json_group_array(${tupleOf('json_array', 'json_group_array', 'json(page.metadata)')} order by page.id desc) as page from page`
  const { rows } = await db.executeQuery<{ page: string }>(CompiledQuery.raw(text, q.params))
  return (JSON.parse(rows[0].page) as TransactionTuple[]).map(fromTuple)
}

/** The SQL of one TransactionTuple of the row `page`, with the dialect's JSON functions. */
function tupleOf(array: string, aggregate: string, metadata: string): string {
  const address = (column: string) => `(select w.address from wallets w where w.id = page.${column})`
  // A subquery per side, so that each wallet's user is one index probe (a join can scan every user).
  const username = (column: string) => `(select u.username from users u where u.primary_wallet_id = page.${column})`
  const lines = `(select ${aggregate}(${array}(ta.quantity, a.id, a.name, a.value)) from transaction_assets ta inner join assets a on a.id = ta.asset_id where ta.transaction_id = page.id)`
  return `${array}(page.id, page.sending_wallet_id, page.receiving_wallet_id, ${address('sending_wallet_id')}, ${address('receiving_wallet_id')}, ${username('sending_wallet_id')}, ${username('receiving_wallet_id')}, page.created_at, page.memo, page.kind, page.reverses, page.hold_id, ${metadata}, ${lines})`
}

function fromTuple([id, sendingWalletId, receivingWalletId, sendingAddress, receivingAddress, sendingUsername, receivingUsername, createdAt, memo, kind, reverses, holdId, metadata, lines]: TransactionTuple): Transaction {
  const label = (address: string | null, username: string | null): WalletLabel | undefined => (address === null ? undefined : username === null ? { address } : { address, username })
  const assets: Line[] = (lines ?? [])
    .map(([quantity, assetId, name, value]) => ({ quantity, asset: { id: assetId, name, value } satisfies Asset }))
    .sort((a, b) => compareAssetNames(a.asset.name, b.asset.name))
  const row = { id, sending_wallet_id: sendingWalletId, receiving_wallet_id: receivingWalletId, memo, created_at: createdAt, kind, reverses, hold_id: holdId, metadata: metadata ?? {} }
  return shapeTransaction(row, assets, label(sendingAddress, sendingUsername), label(receivingAddress, receivingUsername))
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
