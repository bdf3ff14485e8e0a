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
  const assets = [...transaction.assets].sort((a, b) => a[0] - b[0] || a[1] - b[1])
  const metadata = Object.entries(transaction.metadata).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
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

/** hex SHA-256 of the previous hash's 32 bytes followed by the UTF-8 bytes of the encoding. */
export function chainHash(previous: string, position: number, transaction: EncodedTransaction): string {
  return chainHashBytes(Buffer.from(previous, 'hex'), position, transaction).toString('hex')
}

/** `chainHash` on the hashes' bytes. */
export function chainHashBytes(previous: Buffer, position: number, transaction: EncodedTransaction): Buffer {
  return hash('sha256', Buffer.concat([previous, Buffer.from(encodeTransaction(position, transaction), 'utf8')]), 'buffer')
}
