import type client from 'prom-client'
import { readCommitState } from '../db/commit-state.ts'
import type { Db } from '../db/database.ts'
import type { Executor } from '../db/database.types.ts'
import { nowIso } from '../db/dialect.ts'
import { AppError } from '../http/errors.ts'
import * as assets from './assets.repository.ts'
import { METADATA_KEY, METADATA_VALUE_LENGTH } from './ledger.schemas.ts'
import type { Transaction, TransactionKind } from './ledger.types.ts'
import type { CachedPage, PageCache } from './page-cache.ts'
import { statementHeader, statementRows } from './statement-csv.ts'
import * as transactions from './transactions.repository.ts'

export interface HistoryServiceDeps {
  db: Db
  /** History pages kept in this process, each checked against the database before it is served again. */
  pages: PageCache
  /** The ledger's clock: units expired by then are not counted (the system clock by default). */
  clock?: () => string
}

/** What a wallet holds and its history: the ledger's reads. */
export interface HistoryService {
  /** GET /wallet/assets: the wallet's holdings above zero (expired units not counted), by asset name. */
  listHoldings(walletId: number): ReturnType<typeof assets.listHoldings>
  /** GET /wallet/assets?as_of=…: holdings above zero at that instant, by asset name. Throws G002. */
  listHoldingsAsOf(walletId: number, asOf: string): ReturnType<typeof assets.listHoldingsAsOf>
  /**
   * GET /wallet/transactions: a page as the bytes of the answer, whether there is a next, its last id.
   * A kept page is served while nothing was committed since, or once its stamp is confirmed; else it
   * is built and kept (`docs/decisions.md#history-pages-served-from-a-checked-cache`). `serialize`
   * writes transactions as the route's schema does; `arrived` is the request's `arrivalMark`.
   */
  answerWalletTransactions(
    walletId: number,
    query: ListQuery,
    serialize: (page: Transaction[]) => string,
    arrived?: number,
  ): Promise<CachedPage>
  /**
   * GET /wallet/transactions?format=csv: every transaction the filters choose as CSV pieces, read in
   * keyset chunks, so one committed meanwhile is never half included. Throws G002.
   */
  exportWalletTransactions(walletId: number, query: ListQuery, chunk?: number): AsyncGenerator<string>
  /** GET /admin/transactions: a page of the journal, or of one wallet's history (deleted wallets included). */
  listJournal(query: JournalQuery): ReturnType<typeof listJournal>
  /** The page cache's lookups by outcome, for /metrics. */
  readonly pageLookups: client.Counter
}

export function createHistoryService({ db, pages, clock = nowIso }: HistoryServiceDeps): HistoryService {
  return {
    listHoldings: (walletId) => assets.listHoldings(db, walletId, clock()),
    listHoldingsAsOf: (walletId, asOf) => assets.listHoldingsAsOf(db, walletId, storedTime(asOf) as string),
    answerWalletTransactions: (walletId, query, serialize, arrived) =>
      answerWalletTransactions(db, pages, walletId, query, serialize, arrived),
    exportWalletTransactions: (walletId, query, chunk) => exportWalletTransactions(db, walletId, query, chunk),
    listJournal: (query) => listJournal(db, query),
    pageLookups: pages.lookups,
  }
}

export interface ListQuery {
  limit?: number
  offset?: number
  before?: number
  after?: number
  asset?: string
  direction?: 'sent' | 'received'
  since?: string
  until?: string
  kind?: TransactionKind
  /** `metadata[KEY]=VALUE` filters, as `metadataFilters` reads them from the query. */
  metadata?: [key: string, value: string][]
  schedule_id?: number
}

export type JournalQuery = Omit<ListQuery, 'direction'> & { walletId?: number }

/** Most `metadata[KEY]=VALUE` filters in one query. */
const MAX_METADATA_FILTERS = 5
const METADATA_FILTER = /^metadata\[(.*)\]$/s
const METADATA_KEY_PATTERN = new RegExp(METADATA_KEY)

/** The `metadata[KEY]=VALUE` parameters, in order. Throws G002 for more than 5, a bad or repeated key, a bare `metadata`. */
export function metadataFilters(query: Record<string, unknown>): [key: string, value: string][] {
  const filters: [string, string][] = []
  for (const [name, value] of Object.entries(query)) {
    if (name === 'metadata') throw new AppError('G002', 'filter metadata as metadata[KEY]=VALUE')
    const key = METADATA_FILTER.exec(name)?.[1]
    if (key === undefined) continue
    if (!METADATA_KEY_PATTERN.test(key)) throw new AppError('G002', `metadata[${key}]: a key is 1-40 letters, digits, "_", "-" or "."`)
    if (typeof value !== 'string') throw new AppError('G002', `metadata[${key}] is given more than once`)
    if (value.length > METADATA_VALUE_LENGTH)
      throw new AppError('G002', `metadata[${key}]: a value is at most ${METADATA_VALUE_LENGTH} characters`)
    filters.push([key, value])
  }
  if (filters.length > MAX_METADATA_FILTERS) throw new AppError('G002', `at most ${MAX_METADATA_FILTERS} metadata filters`)
  return filters
}

/** Metadata filters as query parameters again (the `Link` to the next page). */
export function metadataParameters(filters: [key: string, value: string][]): Record<string, string> {
  return Object.fromEntries(filters.map(([key, value]) => [`metadata[${key}]`, value]))
}

async function answerWalletTransactions(
  db: Db,
  pages: PageCache,
  walletId: number,
  query: ListQuery,
  serialize: (page: Transaction[]) => string,
  arrived?: number,
): Promise<CachedPage> {
  // First, so it is never later than what the page is built from.
  const state = await readCommitState(db, arrived)
  const filter = await journalFilter(db, query)
  if (!filter)
    return { body: Buffer.from(serialize([])), more: false, lastId: undefined, stamp: { ids: '', generation: 0 }, state: undefined }
  const wanted = { ...filter, walletId, direction: query.direction }
  // Everything that shapes the answer: the filter as stored values (the asset by id, times as stored).
  const key = JSON.stringify([
    walletId,
    wanted.limit,
    wanted.offset,
    wanted.before,
    wanted.after,
    wanted.assetId,
    wanted.direction,
    wanted.since,
    wanted.until,
    wanted.kind,
    wanted.metadata,
    wanted.scheduleId,
  ])
  const kept = pages.get(key)
  if (kept && state !== undefined && kept.state === state) {
    // Nothing committed since the page was built or confirmed: no statement at all.
    pages.count('unchanged')
    return kept
  }
  if (kept) {
    const now = await transactions.readPageStamp(db, wanted)
    if (now.ids === kept.stamp.ids && now.generation === kept.stamp.generation) {
      // Confirmed after `state` was read, so it holds for as long as the state stays.
      kept.state = state
      pages.count('hit')
      return kept
    }
  }
  pages.count(kept ? 'stale' : 'miss')
  const answer = await transactions.listTransactionsAnswer(db, wanted)
  const page = {
    body: Buffer.from('json' in answer ? answer.json : serialize(answer.transactions)),
    more: answer.more,
    lastId: answer.lastId,
    stamp: answer.stamp,
    state,
  }
  pages.set(key, page)
  return page
}

/** How many transactions a statement reads at a time: what it holds in memory at once. */
const STATEMENT_CHUNK = 200

async function* exportWalletTransactions(db: Db, walletId: number, query: ListQuery, chunk = STATEMENT_CHUNK): AsyncGenerator<string> {
  const filter = await journalFilter(db, { ...query, limit: chunk, offset: 0, before: undefined, after: undefined })
  yield statementHeader()
  if (!filter) return
  let before: number | undefined
  for (;;) {
    const { transactions: page, more } = await transactions.listTransactions(db, {
      ...filter,
      before,
      walletId,
      direction: query.direction,
    })
    yield page.map((transaction) => statementRows(transaction, walletId, filter.assetId)).join('')
    if (!more || page.length === 0) return
    before = page[page.length - 1].id
  }
}

async function listJournal(db: Db, query: JournalQuery) {
  const filter = await journalFilter(db, query)
  if (!filter) return { transactions: [], more: false }
  if (query.walletId !== undefined) return transactions.listTransactions(db, { ...filter, walletId: query.walletId })
  return transactions.listJournal(db, filter)
}

/** The query's filters as stored values; undefined when they name an asset that does not exist. */
async function journalFilter(db: Db, query: ListQuery) {
  const since = storedTime(query.since)
  const until = storedTime(query.until)
  let assetId: number | undefined
  if (query.asset !== undefined) {
    const asset = (await assets.findAssetsByNames(db, [query.asset])).get(query.asset.toLowerCase())
    if (!asset) return undefined
    assetId = asset.id
  }
  return {
    limit: query.limit ?? 10,
    offset: query.offset ?? 0,
    before: query.before,
    after: query.after,
    assetId,
    since,
    until,
    kind: query.kind,
    metadata: query.metadata,
    scheduleId: query.schedule_id,
  }
}

// Timestamps compare as text, so a bound past year 9999 is held at the last storable instant.
const LAST_STORABLE = Date.parse('9999-12-31T23:59:59.999Z')

/** A query's timestamp (any offset) as stored timestamps are written; G002 if it names no instant. */
function storedTime(stamp?: string): string | undefined {
  if (stamp === undefined) return undefined
  const time = Date.parse(stamp)
  // The format allows a leap second (23:59:60), which no stored timestamp can be.
  if (Number.isNaN(time)) throw new AppError('G002', `${stamp} is not a valid time`)
  return new Date(Math.min(Math.max(time, 0), LAST_STORABLE)).toISOString()
}

/**
 * The journal in order: up to `limit` transactions positioned after `after` as NDJSON (each line
 * `JSON.stringify` of the entry, written by the database), and the last position (null: none).
 */
export function journalTextAfter(db: Executor, after: number, limit: number): Promise<{ text: string; last: number | null }> {
  return transactions.journalTextAfter(db, after, limit)
}

/** One transaction by id, as answered; undefined when there is none. */
export function findTransactionById(db: Executor, id: number): Promise<Transaction | undefined> {
  return transactions.findTransaction(db, id)
}
