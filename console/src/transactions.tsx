import type { Transaction } from './api.ts'
import { formatQuantity, formatTime } from './format.ts'

/** Who the other side of a transaction is, as a person reads it. */
function party(username: string | undefined, address: string): string {
  return username ? `${username} (${address})` : address
}

/**
 * Transactions as a list, newest first. Seen from `walletId` each says "Sent to" or "Received
 * from"; without one (the operator's journal) it names both sides.
 */
export function TransactionList({ transactions, walletId }: { transactions: Transaction[]; walletId?: number }) {
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
