import { hash } from 'node:crypto'

/**
 * The canonical encoding of a transaction and its chained hash (`docs/journal.md` writes it out
 * for other languages). Only what describes what moved, between whom, when and why: ids, never
 * labels (addresses, usernames, asset names), which may change without changing the transaction.
 */

/** The fields of a transaction the encoding takes, as stored. */
export interface EncodedTransaction {
  id: number
  kind: string
  created_at: string
  sending_wallet_id: number
  receiving_wallet_id: number
  memo: string
  /** [asset id, quantity] pairs, in any order. */
  assets: [number, number][]
  reverses: number | null
  hold_id: number | null
  /** String values by key; `{}` when none. */
  metadata: Record<string, string>
}

/** Before the first position. */
export const GENESIS_HASH = '0'.repeat(64)

/**
 * The encoding: the JSON text (ECMAScript JSON.stringify, no spaces) of the array
 * ["coffer-transaction/v1", position, id, kind, created_at, sending_wallet_id, receiving_wallet_id,
 * memo, [[asset_id, quantity]…] by asset id, reverses or null, hold_id or null, [[key, value]…] by key].
 */
function encodeTransaction(position: number, transaction: EncodedTransaction): string {
  // One line and no metadata or one key are the common case: nothing to sort.
  const assets = transaction.assets.length > 1 ? [...transaction.assets].sort((a, b) => a[0] - b[0] || a[1] - b[1]) : transaction.assets
  const entries = Object.entries(transaction.metadata)
  const metadata = entries.length > 1 ? entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)) : entries
  return JSON.stringify([
    'coffer-transaction/v1',
    position,
    transaction.id,
    transaction.kind,
    transaction.created_at,
    transaction.sending_wallet_id,
    transaction.receiving_wallet_id,
    transaction.memo,
    assets,
    transaction.reverses,
    transaction.hold_id,
    metadata,
  ])
}

/** Where the previous hash and the encoding are written before hashing: no buffer per transaction. */
let scratch = Buffer.allocUnsafe(4096)

/** SHA-256 of the previous hash's 32 bytes followed by the UTF-8 bytes of the encoding. */
export function chainHashBytes(previous: Buffer, position: number, transaction: EncodedTransaction): Buffer {
  const text = encodeTransaction(position, transaction)
  // At most three bytes of UTF-8 per UTF-16 unit.
  if (32 + 3 * text.length > scratch.length) scratch = Buffer.allocUnsafe(2 * (32 + 3 * text.length))
  previous.copy(scratch, 0, 0, 32)
  const length = 32 + scratch.write(text, 32, 'utf8')
  return hash('sha256', scratch.subarray(0, length), 'buffer')
}
