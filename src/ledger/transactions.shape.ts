import type { Line, Metadata, Transaction, TransactionKind, WalletLabel } from './ledger.types.ts'

/** The API's Transaction assembled from its stored fields, lines and wallet labels: for the write path and the reads alike. */

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
  /** The journal's (`journal_entries`); absent or null before the sequencer positions it. */
  position?: number | null
  hash?: string | null
  schedule_id?: number | null
}

export function toTransaction(row: TransactionFields, lines: Line[], labels: Map<number, WalletLabel>): Transaction {
  return shapeTransaction(row, lines, labels.get(row.sending_wallet_id), labels.get(row.receiving_wallet_id))
}

export function shapeTransaction(
  row: TransactionFields,
  lines: Line[],
  sender: WalletLabel | undefined,
  receiver: WalletLabel | undefined,
): Transaction {
  // Fields in the order of the stored answers (`body`), which migration 0008 extended at the end;
  // set one by one, as spreading `{}` per optional field costs every transaction of a batch.
  const transaction: Transaction = {
    id: row.id,
    sending_wallet_id: row.sending_wallet_id,
    receiving_wallet_id: row.receiving_wallet_id,
    sending_wallet_address: sender?.address ?? '',
    receiving_wallet_address: receiver?.address ?? '',
    created_at: row.created_at,
    memo: row.memo,
    assets: lines.map((line) => ({ quantity: line.quantity, asset: line.asset })),
  } as Transaction
  if (sender?.username) transaction.sending_username = sender.username
  if (receiver?.username) transaction.receiving_username = receiver.username
  transaction.kind = row.kind
  // Each link only on its own kind.
  if (row.kind === 'reversal' && row.reverses !== null) transaction.reverses = row.reverses
  if (row.kind === 'capture' && row.hold_id !== null) transaction.hold_id = row.hold_id
  if (row.schedule_id != null) transaction.schedule_id = row.schedule_id
  transaction.metadata = row.metadata
  transaction.position = row.position ?? null
  transaction.hash = row.hash ?? null
  return transaction
}
