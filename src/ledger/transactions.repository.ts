import type { Executor } from '../db/database.ts'
import { isPostgres, readRows } from '../db/dialect.ts'
import { toAsset } from './assets.repository.ts'
import { shapeTransaction } from './transactions.shape.ts'
import {
  compareAssetNames,
  JOURNAL_SCOPE,
  type Asset,
  type Line,
  type Metadata,
  type Transaction,
  type TransactionKind,
  type WalletLabel,
} from './ledger.types.ts'

/** SQL that reads recorded transactions (a wallet's history); the write path is `moves.repository.ts`. */

/** Address and (for primary wallets) username of each wallet, for Transaction objects. */
export async function labelWallets(db: Executor, walletIds: number[]): Promise<Map<number, WalletLabel>> {
  const ids = [...new Set(walletIds)]
  if (ids.length === 0) return new Map()
  const rows = await db
    .selectFrom('wallets')
    // A subquery, so that each wallet's user is one index probe (a join can scan every user).
    .select((eb) => [
      'wallets.id',
      'wallets.address',
      eb.selectFrom('users').select('users.username').whereRef('users.primary_wallet_id', '=', 'wallets.id').as('username'),
    ])
    .where('wallets.id', 'in', ids)
    .execute()
  return new Map(rows.map((row) => [row.id, row.username ? { address: row.address, username: row.username } : { address: row.address }]))
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
  /** Only the runs of this schedule. */
  scheduleId?: number
}

/** What every page query of history filters on besides its wallet and its id range. */
type Narrowing = Pick<TransactionFilter, 'assetId' | 'since' | 'until' | 'kind' | 'metadata' | 'scheduleId'>

type Page = { transactions: Transaction[]; more: boolean }

/**
 * One statement's text and parameters, by hand for the dialect: building the hot page queries with
 * Kysely cost more than running them (`docs/performance.md#reads`).
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

  /** LIMIT and OFFSET written into the text, so SQLite plans for how few rows it needs; their values are few. */
  count(value: number): string {
    if (!Number.isSafeInteger(value) || value < 0) throw new Error(`not a row count: ${value}`)
    return String(value)
  }
}

/** The columns of `transactions` a page selection answers, for `pageOf`. */
const STORED_FIELDS =
  't.id, t.sending_wallet_id, t.receiving_wallet_id, t.memo, t.created_at, t.kind, t.reverses, t.hold_id, t.metadata, t.schedule_id'

/**
 * One page of a wallet's transactions, newest first, and whether more exist: the one query of
 * history, costing by the page size, not the history's length, whatever the filters.
 */
export function listTransactions(db: Executor, filter: TransactionFilter): Promise<Page> {
  const { q, selection } = pageSelection(db, filter)
  return pageOf(db, q, selection, filter.limit)
}

/** A page as the route's JSON text (SQLite) or as transactions (PostgreSQL), the same bytes, with its `PageStamp`. */
export async function listTransactionsAnswer(db: Executor, filter: TransactionFilter): Promise<PageAnswer> {
  const { q, selection } = pageSelection(db, filter)
  if (!q.postgres) return pageText(db, q, selection, filter.limit)
  const { transactions, generation } = await queryTransactions(db, q, selection, true)
  const page = transactions.slice(0, filter.limit)
  return {
    transactions: page,
    more: transactions.length > filter.limit,
    lastId: page.at(-1)?.id,
    stamp: { ids: transactions.map((transaction) => transaction.id).join(','), generation },
  }
}

/** A page's answer: its JSON text, or its transactions; whether more exist, the last one's id (the next page's cursor), and its stamp. */
export type PageAnswer = ({ json: string } | { transactions: Transaction[] }) & {
  more: boolean
  lastId: number | undefined
  stamp: PageStamp
}

/**
 * A page is the same while its row ids and the label generation are: journal rows are never
 * updated (`docs/decisions.md#history-pages-served-from-a-checked-cache`).
 */
export interface PageStamp {
  ids: string
  generation: number
}

/** The label generation, in a statement that reads a page: the same snapshot as the page. */
const GENERATION = '(select generation from page_generation)'

/** The stamp of the page `filter` selects now, ids and generation from one statement (one snapshot). */
export async function readPageStamp(db: Executor, filter: TransactionFilter): Promise<PageStamp> {
  const { q, selection } = pageSelection(db, filter, 't.id')
  const text = q.postgres
    ? `select coalesce(string_agg(page.id::text, ',' order by page.id desc), '') as ids, ${GENERATION} as generation
      from (${selection}) as page`
    : `select coalesce(group_concat(id, ',' order by id desc), '') as ids, ${GENERATION} as generation from (${selection})`
  const [row] = await readRows<PageStamp>(db, text, q.params)
  return { ids: row.ids, generation: Number(row.generation) }
}

/** The statement selecting `listTransactions`' page (one more row than the page, to tell if more exist). */
function pageSelection(db: Executor, filter: TransactionFilter, fields = STORED_FIELDS): { q: Statement; selection: string } {
  if (filter.metadata && filter.metadata.length > 0) return selectionByMetadata(db, filter.walletId, filter, filter.direction, fields)
  if (filter.scheduleId !== undefined) return selectionBySchedule(db, filter, fields)
  const q = new Statement(db)
  const take = filter.offset + filter.limit + 1
  const rareKind = filter.kind !== undefined && filter.kind !== 'transfer' ? filter.kind : undefined
  const side = (column: 'sending_wallet_id' | 'receiving_wallet_id') => {
    const { walletId, before, after } = filter
    const upTo = before === undefined ? '<=' : '<'
    const last = before ?? Number.MAX_SAFE_INTEGER
    let range: string
    if (q.postgres) {
      // A range of (wallet, id) pairs: given `wallet = ?`, PostgreSQL may walk the primary key instead.
      range =
        rareKind === undefined
          ? `(t.${column}, t.id) > (${q.param(walletId)}, ${q.param(after ?? 0)})
            and (t.${column}, t.id) ${upTo} (${q.param(walletId)}, ${q.param(last)})`
          : `(t.${column}, t.kind, t.id) > (${q.param(walletId)}, ${q.param(rareKind)}, ${q.param(after ?? 0)})
            and (t.${column}, t.kind, t.id) ${upTo} (${q.param(walletId)}, ${q.param(rareKind)}, ${q.param(last)})
            and ${NOT_TRANSFER}`
    } else {
      // SQLite seeks the same index entries faster with an equality.
      range = `t.${column} = ${q.param(walletId)}`
      if (rareKind !== undefined) range += ` and t.kind = ${q.param(rareKind)} and ${NOT_TRANSFER}`
      range += ` and t.id > ${q.param(after ?? 0)} and t.id ${upTo} ${q.param(last)}`
    }
    const rows = `select ${fields} from transactions t where ${[range, ...narrowing(q, filter)].join(' and ')}`
    // SQLite merges the two sides as it reads their indexes, with no second sort (docs/performance.md#reads).
    if (!q.postgres) return rows
    const order = rareKind === undefined ? `t.${column} desc, t.id desc` : `t.${column} desc, t.kind desc, t.id desc`
    return `select * from (${rows} order by ${order} limit ${q.count(take)}) as ${column === 'sending_wallet_id' ? 'sent' : 'received'}`
  }
  const sides =
    filter.direction === 'sent'
      ? side('sending_wallet_id')
      : filter.direction === 'received'
        ? side('receiving_wallet_id')
        : `${side('sending_wallet_id')} union all ${side('receiving_wallet_id')}`
  const page = `order by id desc limit ${q.count(filter.limit + 1)} offset ${q.count(filter.offset)}`
  return { q, selection: q.postgres ? `select * from (${sides}) as page ${page}` : `${sides} ${page}` }
}

/** The partial indexes' predicate as written: planners use them only for a query that states it literally. */
const NOT_TRANSFER = `kind <> 'transfer'`

/** The conditions of the filters other than the wallet and the id range, on `transactions t`. */
function narrowing(q: Statement, filter: Narrowing): string[] {
  const conditions: string[] = []
  if (filter.since !== undefined) conditions.push(`t.created_at >= ${q.param(filter.since)}`)
  if (filter.until !== undefined) conditions.push(`t.created_at <= ${q.param(filter.until)}`)
  if (filter.kind !== undefined) conditions.push(`t.kind = ${q.param(filter.kind)}`)
  if (filter.scheduleId !== undefined) conditions.push(`t.schedule_id = ${q.param(filter.scheduleId)}`)
  if (filter.assetId !== undefined)
    conditions.push(
      `exists (select 1 from transaction_assets ta where ta.transaction_id = t.id and ta.asset_id = ${q.param(filter.assetId)})`,
    )
  return conditions
}

/**
 * A page of a wallet's transactions recorded by one schedule's runs: walks the (schedule, id)
 * index of those runs backwards (migration 0021), whatever the length of the wallet's history.
 */
function selectionBySchedule(db: Executor, filter: TransactionFilter, fields: string): { q: Statement; selection: string } {
  const q = new Statement(db)
  const conditions = narrowing(q, filter)
  const wallet = q.param(filter.walletId)
  if (filter.direction === 'sent') conditions.push(`t.sending_wallet_id = ${wallet}`)
  else if (filter.direction === 'received') conditions.push(`t.receiving_wallet_id = ${wallet}`)
  else conditions.push(`(t.sending_wallet_id = ${wallet} or t.receiving_wallet_id = ${q.param(filter.walletId)})`)
  if (filter.after !== undefined) conditions.push(`t.id > ${q.param(filter.after)}`)
  if (filter.before !== undefined) conditions.push(`t.id < ${q.param(filter.before)}`)
  return {
    q,
    selection: `select ${fields} from transactions t where ${conditions.join(' and ')}
      order by t.schedule_id desc, t.id desc limit ${q.count(filter.limit + 1)} offset ${q.count(filter.offset)}`,
  }
}

/** A page carrying every metadata entry: walks the first entry's key, probing once per further entry. */
function selectionByMetadata(
  db: Executor,
  scope: number,
  filter: Omit<TransactionFilter, 'walletId'>,
  direction?: 'sent' | 'received',
  fields = STORED_FIELDS,
): { q: Statement; selection: string } {
  const [[key, value], ...others] = filter.metadata ?? []
  const q = new Statement(db)
  const conditions = [`m.wallet_id = ${q.param(scope)}`, `m.key = ${q.param(key)}`, `m.value = ${q.param(value)}`, ...narrowing(q, filter)]
  if (filter.after !== undefined) conditions.push(`m.transaction_id > ${q.param(filter.after)}`)
  if (filter.before !== undefined) conditions.push(`m.transaction_id < ${q.param(filter.before)}`)
  if (direction === 'sent') conditions.push(`t.sending_wallet_id = ${q.param(scope)}`)
  if (direction === 'received') conditions.push(`t.receiving_wallet_id = ${q.param(scope)}`)
  for (const [otherKey, otherValue] of others) {
    conditions.push(
      `exists (select 1 from transaction_metadata o where o.wallet_id = ${q.param(scope)}
        and o.key = ${q.param(otherKey)} and o.value = ${q.param(otherValue)} and o.transaction_id = m.transaction_id)`,
    )
  }
  return {
    q,
    selection: `select ${fields} from transaction_metadata m inner join transactions t on t.id = m.transaction_id
      where ${conditions.join(' and ')}
      order by m.transaction_id desc limit ${q.count(filter.limit + 1)} offset ${q.count(filter.offset)}`,
  }
}

/** One page of the whole journal, newest first, and whether more exist: the operator's view. */
export function listJournal(db: Executor, filter: Omit<TransactionFilter, 'walletId' | 'direction'>): Promise<Page> {
  if (filter.metadata && filter.metadata.length > 0) {
    const { q, selection } = selectionByMetadata(db, JOURNAL_SCOPE, filter)
    return pageOf(db, q, selection, filter.limit)
  }
  const q = new Statement(db)
  const conditions = narrowing(q, filter)
  if (filter.kind !== undefined && filter.kind !== 'transfer') conditions.push(NOT_TRANSFER)
  if (filter.before !== undefined) conditions.push(`t.id < ${q.param(filter.before)}`)
  if (filter.after !== undefined) conditions.push(`t.id > ${q.param(filter.after)}`)
  const where = conditions.length === 0 ? '' : ` where ${conditions.join(' and ')}`
  return pageOf(
    db,
    q,
    `select ${STORED_FIELDS} from transactions t${where}
      order by t.id desc limit ${q.count(filter.limit + 1)} offset ${q.count(filter.offset)}`,
    filter.limit,
  )
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

/** In the order of `TRANSACTIONS_JSON`. */
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
  position: number | null,
  hash: string | null,
  scheduleId: number | null,
]

/**
 * The transactions of `selection` with their lines and labels as one JSON text built by the
 * database: one round trip and one snapshot; numbers keep their exact values through it.
 */
async function readTransactions(db: Executor, q: Statement, selection: string): Promise<Transaction[]> {
  return (await queryTransactions(db, q, selection, false)).transactions
}

/** `readTransactions`, with the label generation read by the same statement when `stamped`. */
async function queryTransactions(
  db: Executor,
  q: Statement,
  selection: string,
  stamped: boolean,
): Promise<{ transactions: Transaction[]; generation: number }> {
  const generation = stamped ? `, ${GENERATION} as generation` : ''
  const text = q.postgres
    ? `with page as (${selection})
      select coalesce(json_agg(${tupleOf('json_build_array', 'json_agg', 'page.metadata::json')}
      order by page.id desc), '[]')::text as page${generation} from page`
    : `with page as (${selection})
      select json_group_array(${tupleOf('json_array', 'json_group_array', 'json(page.metadata)')}
      order by page.id desc) as page${generation} from page`
  const [row] = await readRows<{ page: string; generation?: number }>(db, text, q.params)
  return { transactions: (JSON.parse(row.page) as TransactionTuple[]).map(fromTuple), generation: Number(row.generation) }
}

/** The SQL of one TransactionTuple of the row `page`, with the dialect's JSON functions. */
function tupleOf(array: string, aggregate: string, metadata: string): string {
  const address = (column: string) => `(select w.address from wallets w where w.id = page.${column})`
  // A subquery per side, so that each wallet's user is one index probe (a join can scan every user).
  const username = (column: string) => `(select u.username from users u where u.primary_wallet_id = page.${column})`
  const lines = `(select ${aggregate}(${array}(ta.quantity, a.id, a.name, a.value))
    from transaction_assets ta inner join assets a on a.id = ta.asset_id where ta.transaction_id = page.id)`
  return `${array}(page.id, page.sending_wallet_id, page.receiving_wallet_id,
    ${address('sending_wallet_id')}, ${address('receiving_wallet_id')},
    ${username('sending_wallet_id')}, ${username('receiving_wallet_id')},
    page.created_at, page.memo, page.kind, page.reverses, page.hold_id,
    ${metadata}, ${lines}, ${JOURNAL_POSITION}, ${JOURNAL_HASH}, page.schedule_id)`
}

/** A transaction's place and hash in the journal (`page.id`), null before the sequencer gives them. */
const JOURNAL_POSITION = '(select j.position from journal_entries j where j.transaction_id = page.id)'
const JOURNAL_HASH = '(select j.hash from journal_entries j where j.transaction_id = page.id)'

function label(address: string | null, username: string | null): WalletLabel | undefined {
  return address === null ? undefined : username === null ? { address } : { address, username }
}

function fromTuple([
  id,
  sendingWalletId,
  receivingWalletId,
  sendingAddress,
  receivingAddress,
  sendingUsername,
  receivingUsername,
  createdAt,
  memo,
  kind,
  reverses,
  holdId,
  metadata,
  lines,
  position,
  hash,
  scheduleId,
]: TransactionTuple): Transaction {
  const assets: Line[] = (lines ?? [])
    .map(([quantity, assetId, name, value]) => ({ quantity, asset: { id: assetId, name, value } satisfies Asset }))
    .sort((a, b) => compareAssetNames(a.asset.name, b.asset.name))
  const row = {
    id,
    sending_wallet_id: sendingWalletId,
    receiving_wallet_id: receivingWalletId,
    memo,
    created_at: createdAt,
    kind,
    reverses,
    hold_id: holdId,
    metadata: metadata ?? {},
    position,
    hash,
    schedule_id: scheduleId,
  }
  return shapeTransaction(row, assets, label(sendingAddress, sendingUsername), label(receivingAddress, receivingUsername))
}

/**
 * SQLite: a page as the bytes of the route's answer, written by SQLite in the schema's field order,
 * byte for byte what the serializer writes, so Node sends one string (`docs/performance.md#reads`).
 * Numbers JavaScript may write otherwise come between U+0001 marks and are rewritten here.
 */
async function pageText(db: Executor, q: Statement, selection: string, limit: number): Promise<PageAnswer> {
  const text = `with page as materialized (${selection})
    select '[' || coalesce(group_concat(${TRANSACTION_TEXT}, ',' order by p.id desc), '') || ']' as json,
      min(p.id) as last, (select count(*) from page) as found,
      (select coalesce(group_concat(id, ',' order by id desc), '') from page) as ids, ${GENERATION} as generation
    from (select * from page order by id desc limit ${q.count(limit)}) as p`
  const [{ json, last, found, ids, generation }] = await readRows<{
    json: string
    last: number | null
    found: number
    ids: string
    generation: number
  }>(db, text, q.params)
  return {
    json: json.includes(MARK) ? rewriteMarkedNumbers(json) : json,
    more: found > limit,
    lastId: last ?? undefined,
    stamp: { ids, generation: Number(generation) },
  }
}

const MARK = '\u0001'

/** Every number between marks (`numberText`) written as JavaScript writes it. */
function rewriteMarkedNumbers(json: string): string {
  return json
    .split(MARK)
    .map((piece, index) => (index % 2 === 1 ? JSON.stringify(Number(piece)) : piece))
    .join('')
}

/**
 * SQL for a number's text as JavaScript writes it where the two agree (safe integers, doubles exact
 * in 15 digits); otherwise SQLite's exact text between marks, for `pageText` to rewrite.
 */
function numberText(column: string): string {
  const fifteen = `printf('%.15g', ${column})`
  return `case when ${column} = cast(${column} as integer) and abs(${column}) <= ${Number.MAX_SAFE_INTEGER}
      then cast(cast(${column} as integer) as text)
    when (abs(${column}) >= 1e-4 and abs(${column}) < 1e15 or abs(${column}) >= 1e21)
      and cast(${fifteen} as real) = ${column} then ${fifteen}
    else char(1) || json_quote(${column}) || char(1) end`
}

/** The SQL of a quantity's text: its digits, or between marks beyond 2^53 (where JavaScript's number rounds it). */
const QUANTITY_TEXT = `case when abs(ta.quantity) <= ${Number.MAX_SAFE_INTEGER} then ta.quantity else char(1) || ta.quantity || char(1) end`

/** JSON text written as it is, then the SQL of a text that follows it (empty: none). */
type Piece = [json: string, sql: string]

/**
 * What a transaction's JSON text is made of in one dialect's SQL: a text's JSON string, a wallet's
 * address and username (`,"field":"name"` or empty) for a column of `p`, its lines' JSON texts, and
 * how pieces are put together.
 */
interface TextParts {
  quote(text: string): string
  address(column: string): string
  username(field: string, column: string): string
  lines: string
  join(pieces: Piece[]): string
}

/** SQLite's `||` of the pieces. */
function concatenated(pieces: Piece[]): string {
  return pieces.flatMap(([json, text]) => [...(json ? [`'${json}'`] : []), ...(text ? [text] : [])]).join(' || ')
}

/** PostgreSQL's `format` of the pieces (whose JSON holds no `'` or `%`): one text built once, where `||` copies it at each step. */
function formatted(pieces: Piece[]): string {
  const texts = pieces.filter(([, text]) => text).map(([, text]) => text)
  return `format('${pieces.map(([json, text]) => `${json}${text ? '%s' : ''}`).join('')}', ${texts.join(', ')})`
}

/** A line's JSON text (`ta`, `a`), with its dialect's quoting and its quantity's and value's texts. */
function lineText(quote: (text: string) => string, quantity: string, value: string, join: (pieces: Piece[]) => string): string {
  return join([
    ['{"quantity":', quantity],
    [',"asset":{"id":', 'a.id'],
    [',"name":', quote('a.name')],
    [',"value":', value],
    ['}}', ''],
  ])
}

const sqliteQuote = (text: string) => `json_quote(${text})`

/** SQLite's: a subquery per side, so that each wallet's user is one index probe (a join can scan every user). */
const SQLITE_PARTS: TextParts = {
  quote: sqliteQuote,
  address: (column) => `coalesce((select json_quote(w.address) from wallets w where w.id = p.${column}), '""')`,
  username: (field, column) =>
    `coalesce((select ',"${field}":' || json_quote(u.username) from users u
      where u.primary_wallet_id = p.${column} and u.username <> ''), '')`,
  lines: `coalesce((select group_concat(${lineText(sqliteQuote, QUANTITY_TEXT, numberText('a.value'), concatenated)}, ','
      order by lower(a.name), a.name)
    from transaction_assets ta inner join assets a on a.id = ta.asset_id
    where ta.transaction_id = p.id), '')`,
  join: concatenated,
}

/** The SQL of the JSON text of the transaction in row `p` (STORED_FIELDS), as the schema's serializer writes it (the routes). */
const TRANSACTION_TEXT = transactionText(
  'schema',
  {
    position: '(select j.position from journal_entries j where j.transaction_id = p.id)',
    hash: '(select json_quote(j.hash) from journal_entries j where j.transaction_id = p.id)',
  },
  SQLITE_PARTS,
)

/**
 * The same of a row of the journal (`journalTextAfter`), with its own position and hash, as
 * `JSON.stringify` writes a Transaction (`shapeTransaction`'s order): `coffer export`'s lines, alike on both storages.
 */
const JOURNAL_ENTRY_TEXT = transactionText('object', { position: 'p.position', hash: 'json_quote(p.hash)' }, SQLITE_PARTS)

/**
 * The SQL of a transaction's JSON text in the field order of the schema (the optional fields after the
 * required ones) or of the object `shapeTransaction` builds, with its position's and hash's SQL (null
 * before it has them) and its dialect's parts.
 */
function transactionText(order: 'schema' | 'object', journal: { position: string; hash: string }, parts: TextParts): string {
  const usernames: Piece[] = [
    ['', parts.username('sending_username', 'sending_wallet_id')],
    ['', parts.username('receiving_username', 'receiving_wallet_id')],
  ]
  // Each link only on its own kind, as shapeTransaction.
  const links: Piece[] = [
    ['', `case when p.kind = 'reversal' and p.reverses is not null then ',"reverses":' || p.reverses else '' end`],
    ['', `case when p.kind = 'capture' and p.hold_id is not null then ',"hold_id":' || p.hold_id else '' end`],
    ['', `case when p.schedule_id is not null then ',"schedule_id":' || p.schedule_id else '' end`],
  ]
  const kind: Piece = [',"kind":', parts.quote('p.kind')]
  const rest: Piece[] = [
    [',"metadata":', `coalesce(p.metadata, '{}')`],
    [',"position":', `coalesce(${journal.position}, 'null')`],
    [',"hash":', `coalesce(${journal.hash}, 'null')`],
  ]
  return parts.join([
    ['{"id":', 'p.id'],
    [',"sending_wallet_id":', 'p.sending_wallet_id'],
    [',"receiving_wallet_id":', 'p.receiving_wallet_id'],
    [',"sending_wallet_address":', parts.address('sending_wallet_id')],
    [',"receiving_wallet_address":', parts.address('receiving_wallet_id')],
    [',"created_at":', parts.quote('p.created_at')],
    [',"memo":', parts.quote('p.memo')],
    [',"assets":[', parts.lines],
    [']', ''],
    ...(order === 'schema' ? [kind, ...rest, ...usernames, ...links] : [...usernames, kind, ...links, ...rest]),
    ['}', ''],
  ])
}

/**
 * PostgreSQL's: the labels of the page's wallets read once each (`w`, joined as `s` to the sender and `r`
 * to the receiver), the lines
 * read as a set (`l`). `to_json` escapes as `JSON.stringify` does (UTF-8 has no lone surrogates); a
 * number is written by the server only where its text is JavaScript's (`numberTextPostgres`).
 */
const POSTGRES_PARTS: TextParts = {
  quote: (text) => `to_json(${text})`,
  address: (column) => `coalesce(${column === 'sending_wallet_id' ? 's' : 'r'}.address, '""')`,
  username: (field, column) => `',"${field}":' || ${column === 'sending_wallet_id' ? 's' : 'r'}.username`,
  lines: 'l.lines',
  join: formatted,
}

/**
 * SQL for a double's text as JavaScript writes it: the server's shortest text (`extra_float_digits` 1,
 * the default since PostgreSQL 12) is JavaScript's between 1e-4 and 1e15 when it reads back as the same
 * value; any other between marks, for `rewriteMarkedNumbers`.
 */
function numberTextPostgres(column: string): string {
  return `case when ${column} = 0 then '0'
    when abs(${column}) >= 1e-4 and abs(${column}) < 1e15 and ${column}::text::float8 = ${column} then ${column}::text
    else chr(1) || ${column}::text || chr(1) end`
}

/** `JOURNAL_ENTRY_TEXT` on PostgreSQL, of a row `p` of `journalTextPostgres`. */
const JOURNAL_ENTRY_TEXT_POSTGRES = transactionText('object', { position: 'p.position::text', hash: 'to_json(p.hash)' }, POSTGRES_PARTS)

/**
 * PostgreSQL: `journalTextAfter` as one statement, each line written by the server, so that this
 * process only passes the text on. Positions have no gaps, so the page is the range (after, after +
 * limit]; its transactions and lines are read by the range of their ids too (positions follow commit
 * order, so those span about as many), the wallets' labels once each.
 */
function journalTextPostgres(q: Statement, after: number, limit: number): string {
  const upTo = after + limit
  const ids = (bound: 'min' | 'max') =>
    // `+ 0`: read by position, never a walk of the index by transaction id.
    `(select ${bound}(transaction_id + 0) from journal_entries where position > ${q.param(after)} and position <= ${q.param(upTo)})`
  const quantity = `case when abs(ta.quantity) <= ${Number.MAX_SAFE_INTEGER} then ta.quantity::text
    else chr(1) || ta.quantity || chr(1) end`
  const line = lineText(POSTGRES_PARTS.quote, quantity, numberTextPostgres('a.value'), formatted)
  return `with p as materialized (
      select j.position, j.hash, ${STORED_FIELDS} from journal_entries j inner join transactions t on t.id = j.transaction_id
      where j.position > ${q.param(after)} and j.position <= ${q.param(upTo)} and t.id between ${ids('min')} and ${ids('max')}),
    w as materialized (
      select w.id, to_json(w.address)::text as address,
        (select to_json(u.username)::text from users u where u.primary_wallet_id = w.id and u.username <> '') as username
      from wallets w where w.id in (select sending_wallet_id from p union select receiving_wallet_id from p)),
    l as materialized (
      select ta.transaction_id as id, string_agg(${line}, ',' order by a.name_key collate "C", a.name collate "C") as lines
      from transaction_assets ta inner join assets a on a.id = ta.asset_id
      where ta.transaction_id between (select min(id) from p) and (select max(id) from p)
      group by ta.transaction_id)
    select coalesce(string_agg(${JOURNAL_ENTRY_TEXT_POSTGRES} || chr(10), '' order by p.position), '') as text,
      max(p.position) as last
    from p left join w s on s.id = p.sending_wallet_id left join w r on r.id = p.receiving_wallet_id left join l on l.id = p.id`
}

/**
 * The journal after position `after`, at most `limit` entries in order, as NDJSON, each line
 * `JSON.stringify` of the entry, written by the database (`coffer export`, where parsing and writing
 * each entry again in JavaScript cost more than reading it).
 */
export async function journalTextAfter(db: Executor, after: number, limit: number): Promise<{ text: string; last: number | null }> {
  const q = new Statement(db)
  const text = q.postgres
    ? journalTextPostgres(q, after, limit)
    : `select coalesce(group_concat(${JOURNAL_ENTRY_TEXT} || char(10), '' order by p.position), '') as text,
      max(p.position) as last
    from (select j.position, j.hash, t.* from journal_entries j inner join transactions t on t.id = j.transaction_id
      where j.position > ${q.param(after)} order by j.position limit ${q.count(limit)}) as p`
  const [row] = await readRows<{ text: string; last: number | null }>(db, text, q.params)
  return { text: row.text.includes(MARK) ? rewriteMarkedNumbers(row.text) : row.text, last: row.last === null ? null : Number(row.last) }
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
