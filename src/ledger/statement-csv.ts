import type { Transaction } from './ledger.types.ts'

/**
 * A wallet's statement as CSV (`GET /wallet/transactions?format=csv`): RFC 4180 text, lines
 * ending with CRLF, one row per transaction and asset, seen from the wallet.
 */

const STATEMENT_HEADER = [
  'id',
  'created_at',
  'kind',
  'direction',
  'counterparty_wallet_address',
  'counterparty_username',
  'asset',
  'quantity',
  'memo',
  'metadata',
]

/** A cell a spreadsheet would run as a formula starts with one of these; it gets a leading `'`. */
const FORMULA_START = /^[=+\-@\t\r]/

/** One cell of text: neutralised when it could run as a formula, quoted when it holds `"`, `,`, CR or LF. */
function csvCell(value: string): string {
  const safe = FORMULA_START.test(value) ? `'${value}` : value
  return /[",\r\n]/.test(safe) ? `"${safe.replaceAll('"', '""')}"` : safe
}

function csvLine(cells: string[]): string {
  return `${cells.join(',')}\r\n`
}

export function statementHeader(): string {
  return csvLine(STATEMENT_HEADER)
}

/**
 * The rows of one transaction seen from `walletId`: one per asset it moved (only `assetId`'s when
 * given), the quantity negative when it left the wallet. The quantity is the one cell written as
 * a number, never neutralised.
 */
export function statementRows(transaction: Transaction, walletId: number, assetId?: number): string {
  const sent = transaction.sending_wallet_id === walletId
  const counterparty = sent
    ? { address: transaction.receiving_wallet_address, username: transaction.receiving_username }
    : { address: transaction.sending_wallet_address, username: transaction.sending_username }
  const fixed = [
    String(transaction.id),
    transaction.created_at,
    transaction.kind,
    sent ? 'sent' : 'received',
    counterparty.address,
    counterparty.username ?? '',
  ].map(csvCell)
  const trailing = [transaction.memo, JSON.stringify(transaction.metadata)].map(csvCell)
  return transaction.assets
    .filter((line) => assetId === undefined || line.asset.id === assetId)
    .map((line) => csvLine([...fixed, csvCell(line.asset.name), String(sent ? -line.quantity : line.quantity), ...trailing]))
    .join('')
}
