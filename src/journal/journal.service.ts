import { setTimeout as sleep } from 'node:timers/promises'
import type { Db, Executor } from '../db/database.ts'
import { isPostgres } from '../db/dialect.ts'
import { AppError } from '../http/errors.ts'
import { findTransactionById, journalTextAfter } from '../ledger/history.service.ts'
import * as journal from './journal.repository.ts'
import { consistencyProof, inclusionProof, leafHash, nodesRead, type NodeReader } from './merkle.ts'

export type { Checkpoint } from './journal.repository.ts'

/** Entries a page of `coffer export` reads. */
const EXPORT_PAGE = 2000

/** How often a waiting feed request looks again. */
const WAIT_POLL_MS = 100

/**
 * The journal after `after`, in order, every transaction once (`GET /admin/journal`): the body
 * `{entries, next}` as JSON text, its entries the lines `coffer export` writes (the database's, one
 * snapshot a page), waiting up to `waitSeconds` for a first entry; `signal` ends the wait early (the client left).
 */
export async function waitForFeed(db: Executor, after: number, limit: number, waitSeconds: number, signal?: AbortSignal): Promise<string> {
  const until = Date.now() + waitSeconds * 1000
  for (;;) {
    const page = await readJournalPage(db, after, limit)
    if (page.last !== null || Date.now() >= until || signal?.aborted) {
      // Each line ends with a newline, which JSON escapes inside strings: the newlines are the separators.
      return `{"entries":[${page.text.slice(0, -1).replaceAll('\n', ',')}],"next":${page.last ?? after}}`
    }
    await new Promise((resolve) => setTimeout(resolve, Math.min(WAIT_POLL_MS, Math.max(0, until - Date.now()))))
  }
}

export async function latestCheckpoint(db: Executor): Promise<journal.Checkpoint | undefined> {
  return journal.findLatestCheckpoint(db)
}

/** Runs a tree algorithm on the stored nodes it needs, read in one pass. */
async function withNodes<T>(db: Executor, work: (read: NodeReader) => T): Promise<T> {
  const stored = await journal.readNodes(db, nodesRead(work))
  return work((level, idx) => {
    const hex = stored.get(`${level}:${idx}`)
    if (hex === undefined) throw new Error(`journal node ${level}:${idx} is missing`)
    return level === 0 ? leafHash(Buffer.from(hex, 'hex')) : Buffer.from(hex, 'hex')
  })
}

/** GET /journal/consistency: the RFC 9162 proof that the tree of `to` extends the tree of `from`. */
export async function proveConsistency(db: Db, from: number, to: number): Promise<{ from: number; to: number; proof: string[] }> {
  const latest = await journal.findLatestCheckpoint(db)
  if (from > to || to > (latest?.size ?? 0)) {
    throw new AppError('G002', `from and to must satisfy 1 ≤ from ≤ to ≤ ${latest?.size ?? 0} (the latest checkpoint's size)`)
  }
  const proof = await withNodes(db, (read) => consistencyProof(read, from, to))
  return { from, to, proof: proof.map((hash) => hash.toString('hex')) }
}

/**
 * GET /wallet/transactions/{id}/proof: the transaction (of the wallet, either side; T000
 * otherwise), its leaf index and its audit path to the latest checkpoint (J000 until one covers it).
 */
export async function proveInclusion(db: Db, walletId: number, transactionId: number, retryAfterSeconds: number) {
  const transaction = await findTransactionById(db, transactionId)
  if (!transaction || (transaction.sending_wallet_id !== walletId && transaction.receiving_wallet_id !== walletId)) {
    throw new AppError('T000', `no transaction ${transactionId} of this wallet`)
  }
  const checkpoint = await journal.findLatestCheckpoint(db)
  if (transaction.position === null || !checkpoint || checkpoint.size < transaction.position) {
    throw new AppError('J000', 'no signed checkpoint covers this transaction yet', {
      headers: { 'retry-after': String(retryAfterSeconds) },
    })
  }
  const leafIndex = transaction.position - 1
  const path = await withNodes(db, (read) => inclusionProof(read, leafIndex, checkpoint.size))
  return { transaction, leaf_index: leafIndex, checkpoint, audit_path: path.map((hash) => hash.toString('hex')) }
}

/** After a restore wrote the rows of a backup: the sequencer positions what the backup held unpositioned. */
export async function alignJournalAfterRestore(executor: Executor): Promise<void> {
  await journal.lowerSqliteWatermark(executor)
}

/**
 * Before a service starts on PostgreSQL: refuses a store whose journal watermark lies past the
 * server's transaction ids, a copy made outside `coffer restore` that still holds another
 * cluster's writer ids (new transactions would never be positioned). `docs/operations.md` resets them.
 */
export async function checkJournalWatermark(executor: Executor): Promise<void> {
  if (!isPostgres(executor)) return
  const ahead = await journal.watermarkFromElsewhere(executor)
  if (ahead)
    throw new Error(
      `the journal's watermark (transaction id ${ahead.watermark}) is past this PostgreSQL server's next one (${ahead.next}): ` +
        "the database looks like a copy made by other means than `coffer restore`, with another cluster's writer ids. " +
        'Reset them before starting (docs/operations.md, "Copies by other means").',
    )
}

/** Up to `limit` entries of the journal after `after` as NDJSON (each line `JSON.stringify` of an entry), and the last one's position. */
export function readJournalPage(db: Executor, after: number, limit: number): Promise<{ text: string; last: number | null }> {
  return journalTextAfter(db, after, limit)
}

/** The position of an entry's line: its last `"position"` field, as metadata (where a key may be so named) comes before it. */
export function positionOfLine(line: string): number {
  return Number.parseInt(line.slice(line.lastIndexOf(',"position":') + 12), 10)
}

/**
 * The journal from `after` on as NDJSON, a page at a time (`coffer export`): each line `JSON.stringify`
 * of an entry, written by the database. With `follow`, waits for more at the end instead of stopping,
 * until `signal` aborts.
 */
export function readJournalText(db: Executor, after: number, follow: boolean, signal: AbortSignal): AsyncGenerator<string> {
  // PostgreSQL: the next page is read on another connection while this one is.
  return readPages((from, limit) => readJournalPage(db, from, limit), isPostgres(db) ? 1 : 0, { after, follow, signal })
}

/** A page of the journal's text: up to `limit` entries after position `after`, and the last one's position. */
export type PageReader = (after: number, limit: number) => Promise<{ text: string; last: number | null }>

/**
 * The pages of `read` in order, `ahead` more asked for before each is read. Positions have no gaps,
 * so the page after a full one is known before it is read; pages asked for after one that turns out
 * not full are dropped unread, as they may start past its end.
 */
export async function* readPages(
  read: PageReader,
  ahead: number,
  options: { after: number; follow: boolean; signal: AbortSignal; pageSize?: number },
): AsyncGenerator<string> {
  const { follow, signal, pageSize = EXPORT_PAGE } = options
  const pending: ReturnType<PageReader>[] = []
  let next = options.after
  while (!signal.aborted) {
    while (pending.length <= ahead) {
      const page = read(next + pending.length * pageSize, pageSize)
      // Never an unhandled failure when the reader stops first or the page is dropped; awaited, it fails there.
      page.catch(() => {})
      pending.push(page)
    }
    const page = await (pending.shift() as ReturnType<PageReader>)
    if (page.last !== null) {
      if (page.last !== next + pageSize) pending.length = 0
      next = page.last
      yield page.text
      continue
    }
    pending.length = 0
    if (!follow) return
    // Its listener on `signal` goes with each wait: a follow of days adds none that stay.
    await sleep(200, undefined, { signal }).catch(() => {})
  }
}
