import type { Transaction } from './api.ts'
import { formatQuantity, formatTime } from './format.ts'
import type { ShownError } from './text.ts'
import { Empty, ErrorNotice, Loading, Pager } from './ui.tsx'

/** Who the other side of a transaction is, as a person reads it. */
function party(username: string | undefined, address: string): string {
  return username ? `${username} (${address})` : address
}

/**
 * Transactions as a list, newest first. Seen from `walletId` each says "Sent to" or "Received
 * from"; without one (the operator's journal) it names both sides.
 */
function TransactionList({ transactions, walletId }: { transactions: Transaction[]; walletId?: number }) {
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
              <time dateTime={transaction.created_at}>{formatTime(transaction.created_at)}</time>
              <span> · transaction {transaction.id}</span>
              {transaction.memo && <span class="memo"> · “{transaction.memo}”</span>}
            </p>
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
export function TransactionPage({ page, cursors, setCursors, walletId, empty }: {
  page: { data?: { data: Transaction[]; next: number | undefined }; loading: boolean; error: ShownError | undefined }
  cursors: Cursors
  setCursors: (cursors: Cursors) => void
  walletId?: number
  empty: string
}) {
  return (
    <>
      <ErrorNotice error={page.error} />
      {page.loading && <Loading what="transactions" />}
      {page.data && page.data.data.length === 0 && <Empty>{empty}</Empty>}
      {page.data && page.data.data.length > 0 && <TransactionList transactions={page.data.data} walletId={walletId} />}
      <Pager
        first={cursors.length === 1}
        hasOlder={page.data?.next !== undefined}
        onNewest={() => setCursors([undefined])}
        onNewer={() => setCursors(cursors.slice(0, -1))}
        onOlder={() => setCursors([...cursors, page.data?.next])}
      />
    </>
  )
}
