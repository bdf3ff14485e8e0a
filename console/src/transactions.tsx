import type { ComponentChildren } from 'preact'
import type { Transaction } from './api.ts'
import { formatQuantity, formatTime } from './format.ts'
import { KIND_TEXT, MOVED_BACK_TEXT, REVERSAL_TEXT, reversalWord, type ShownError } from './text.ts'
import { Empty, ErrorNotice, Loading, Pager } from './ui.tsx'

/** Who the other side of a transaction is, as a person reads it. */
function party(username: string | undefined, address: string): string {
  return username ? `${username} (${address})` : address
}

/** What kind of transaction it is, when it is not a plain transfer: "Issuance", "Refund of transaction 12", … */
function kindLabel(transaction: Transaction): string | undefined {
  if (transaction.kind === 'transfer') return undefined
  if (transaction.kind === 'reversal' && transaction.reverses !== undefined)
    return `${REVERSAL_TEXT[reversalWord(transaction)]} of transaction ${transaction.reverses}`
  if (transaction.kind === 'capture' && transaction.hold_id !== undefined) return `${KIND_TEXT.capture} of hold ${transaction.hold_id}`
  return KIND_TEXT[transaction.kind]
}

/** A transaction's metadata as a short list of "key: value". */
export function MetadataList({ metadata }: { metadata: Record<string, string> }) {
  const entries = Object.entries(metadata)
  if (entries.length === 0) return null
  return (
    <dl class="metadata" aria-label="Metadata">
      {entries.map(([key, value]) => (
        <div key={key}>
          <dt>{key}</dt>
          <dd>{value}</dd>
        </div>
      ))}
    </dl>
  )
}

/** Per transaction id, what its refunds and corrections moved back so far, per asset name. */
type MovedBack = Map<number, { word: 'refund' | 'correction'; assets: Map<string, number> }>

/** Sums the reversals among `reversals` by the transaction each moves back. */
function movedBack(reversals: Transaction[]): MovedBack {
  const moved: MovedBack = new Map()
  for (const reversal of reversals) {
    if (reversal.reverses === undefined) continue
    const entry = moved.get(reversal.reverses) ?? { word: reversalWord(reversal), assets: new Map<string, number>() }
    for (const line of reversal.assets) entry.assets.set(line.asset.name, (entry.assets.get(line.asset.name) ?? 0) + line.quantity)
    moved.set(reversal.reverses, entry)
  }
  return moved
}

/** Whether all of `transaction` has been moved back (then no further refund or correction is offered). */
export function allMovedBack(transaction: Transaction, moved: MovedBack): boolean {
  const entry = moved.get(transaction.id)
  return !!entry && transaction.assets.every((line) => (entry.assets.get(line.asset.name) ?? 0) >= line.quantity)
}

/**
 * Transactions as a list, newest first. Seen from `walletId` each says "Sent to" or "Received
 * from"; without one (the operator's journal) it names both sides.
 */
function TransactionList({
  transactions,
  walletId,
  actions,
  moved,
}: {
  transactions: Transaction[]
  walletId?: number
  actions?: (transaction: Transaction) => ComponentChildren
  moved: MovedBack
}) {
  return (
    <ul class="transactions">
      {transactions.map((transaction) => {
        const sent = walletId !== undefined && transaction.sending_wallet_id === walletId
        const sign = walletId === undefined ? '' : sent ? '−' : '+'
        return (
          <li key={transaction.id} class={walletId === undefined ? 'journal' : sent ? 'sent' : 'received'}>
            <p class="what">
              {walletId === undefined ? (
                <>
                  <span>From {party(transaction.sending_username, transaction.sending_wallet_address)}</span>{' '}
                  <span>to {party(transaction.receiving_username, transaction.receiving_wallet_address)}</span>
                </>
              ) : sent ? (
                <span>Sent to {party(transaction.receiving_username, transaction.receiving_wallet_address)}</span>
              ) : (
                <span>Received from {party(transaction.sending_username, transaction.sending_wallet_address)}</span>
              )}
            </p>
            <p class="amounts">
              {transaction.assets.map((line) => (
                <span key={line.asset.id} class="amount">
                  {sign}
                  {formatQuantity(line.quantity)} {line.asset.name}
                </span>
              ))}
            </p>
            <p class="meta">
              {moved.has(transaction.id) && (
                <span class="badge">
                  {
                    MOVED_BACK_TEXT[(moved.get(transaction.id) as { word: 'refund' | 'correction' }).word][
                      allMovedBack(transaction, moved) ? 'all' : 'part'
                    ]
                  }
                </span>
              )}
              {kindLabel(transaction) && <span class="kind">{kindLabel(transaction)} · </span>}
              <time dateTime={transaction.created_at}>{formatTime(transaction.created_at)}</time>
              <span> · transaction {transaction.id}</span>
              {transaction.memo && <span class="memo"> · “{transaction.memo}”</span>}
            </p>
            <MetadataList metadata={transaction.metadata} />
            {actions?.(transaction)}
          </li>
        )
      })}
    </ul>
  )
}

/** Cursors of the pages seen so far, newest first; `undefined` is the newest page. */
export type Cursors = (number | undefined)[]

/**
 * One page of transactions with its error, loading and empty states and the pager, for a
 * wallet's history and the operator's journal. `empty` is what an empty page says.
 */
export function TransactionPage({
  page,
  cursors,
  setCursors,
  walletId,
  empty,
  actions,
}: {
  page: { data?: { data: Transaction[]; next: number | undefined; moved: MovedBack }; loading: boolean; error: ShownError | undefined }
  cursors: Cursors
  setCursors: (cursors: Cursors) => void
  walletId?: number
  empty: string
  /** Controls under each transaction (a refund, a reversal). */
  actions?: (transaction: Transaction) => ComponentChildren
}) {
  return (
    <>
      <ErrorNotice error={page.error} />
      {page.loading && <Loading what="transactions" />}
      {page.data && page.data.data.length === 0 && <Empty>{empty}</Empty>}
      {page.data && page.data.data.length > 0 && (
        <TransactionList transactions={page.data.data} walletId={walletId} actions={actions} moved={page.data.moved} />
      )}
      <CursorPager cursors={cursors} setCursors={setCursors} next={page.data?.next} />
    </>
  )
}

/** The pager of a list paged by cursor: `next` is the next (older) page's cursor, if any. */
export function CursorPager({
  cursors,
  setCursors,
  next,
}: {
  cursors: Cursors
  setCursors: (cursors: Cursors) => void
  next: number | undefined
}) {
  return (
    <Pager
      first={cursors.length === 1}
      hasOlder={next !== undefined}
      onNewest={() => setCursors([undefined])}
      onNewer={() => setCursors(cursors.slice(0, -1))}
      onOlder={() => setCursors([...cursors, next])}
    />
  )
}

/** Adds to a page of transactions what was moved back of each (its refunds and corrections since the oldest shown). */
export async function withMovedBack<P extends { data: Transaction[] }>(
  page: P,
  reversalsAfter: (after: number) => Promise<{ data: Transaction[] }>,
): Promise<P & { moved: MovedBack }> {
  if (page.data.length === 0) return { ...page, moved: new Map() }
  const reversals = await reversalsAfter(Math.min(...page.data.map((transaction) => transaction.id)))
  return { ...page, moved: movedBack(reversals.data) }
}
