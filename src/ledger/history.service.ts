import type { Db, Executor } from '../db/database.ts'
import { AppError } from '../http/errors.ts'
import * as assets from './assets.repository.ts'
import { statementHeader, statementRows } from './statement-csv.ts'
import * as transactions from './transactions.repository.ts'

/** What a wallet holds and its history: the ledger's reads. */

/** GET /wallet/assets: the wallet's holdings above zero, by asset name. */
export function listHoldings(db: Executor, walletId: number) {
  return assets.listHoldings(db, walletId)
}

/**
 * GET /wallet/assets?as_of=…: the wallet's holdings above zero as they stood at that instant, by
 * asset name, nothing held (`held` 0); `[]` before the wallet's first transaction. G002 when
 * `asOf` names no instant.
 */
export function listHoldingsAsOf(db: Executor, walletId: number, asOf: string) {
  return assets.listHoldingsAsOf(db, walletId, storedTime(asOf) as string)
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
}

/** GET /wallet/transactions: a page, newest first, and whether there is a next page. */
export async function listWalletTransactions(db: Db, walletId: number, query: ListQuery) {
  const filter = await journalFilter(db, query)
  if (!filter) return { transactions: [], more: false }
  return transactions.listTransactions(db, { ...filter, walletId, direction: query.direction })
}

/** How many transactions a statement reads at a time: what it holds in memory at once. */
const STATEMENT_CHUNK = 200

/**
 * GET /wallet/transactions?format=csv: the statement, as CSV text in pieces (the header, then the
 * rows of each chunk of transactions), newest first, every transaction the filters choose (paging
 * parameters are ignored). Reads in keyset chunks of `chunk` through the query of a history page,
 * each a read of committed rows: a transaction committed after the export began has a larger id
 * than its first chunk (a wallet's ids grow in commit order) and is never half included. G002
 * for a filter that names no instant.
 */
export async function* exportWalletTransactions(db: Db, walletId: number, query: ListQuery, chunk = STATEMENT_CHUNK): AsyncGenerator<string> {
  const filter = await journalFilter(db, { ...query, limit: chunk, offset: 0, before: undefined, after: undefined })
  yield statementHeader()
  if (!filter) return
  let before: number | undefined
  for (;;) {
    const { transactions: page, more } = await transactions.listTransactions(db, { ...filter, before, walletId, direction: query.direction })
    yield page.map((transaction) => statementRows(transaction, walletId, filter.assetId)).join('')
    if (!more || page.length === 0) return
    before = page[page.length - 1].id
  }
}

/**
 * GET /admin/transactions: a page of the whole journal, or of one wallet's history when `walletId`
 * is given (deleted wallets included), newest first, and whether there is a next page.
 */
export async function listJournal(db: Db, query: Omit<ListQuery, 'direction'> & { walletId?: number }) {
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
  return { limit: query.limit ?? 10, offset: query.offset ?? 0, before: query.before, after: query.after, assetId, since, until }
}

// Stored timestamps are `YYYY-MM-DDTHH:mm:ss.sssZ` and compared as text, so a bound is written
// the same way; one past year 9999 (a later offset, say) is held at the last such instant.
const LAST_STORABLE = Date.parse('9999-12-31T23:59:59.999Z')

/** A query's timestamp (any offset) as stored timestamps are written; G002 if it names no instant. */
function storedTime(stamp?: string): string | undefined {
  if (stamp === undefined) return undefined
  const time = Date.parse(stamp)
  // The format allows a leap second (23:59:60), which no stored timestamp can be.
  if (Number.isNaN(time)) throw new AppError('G002', `${stamp} is not a valid time`)
  return new Date(Math.min(Math.max(time, 0), LAST_STORABLE)).toISOString()
}

