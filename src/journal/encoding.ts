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

/** A value as it is written in the JSON text of the encoding (inside an array, where nothing is left out). */
const json = (value: unknown): string =>
  // A finite number's JSON is its string (both are ECMAScript's Number::toString).
  typeof value === 'number' && Number.isFinite(value) ? `${value}` : (JSON.stringify(value) ?? 'null')

/**
 * Stored metadata of one key whose key and value JSON writes as they are (no quote, backslash,
 * control character or surrogate): its entries' encoding is the same text, rebracketed, with no parse.
 */
const ONE_PLAIN_KEY = /^\{("[ !#-[\]-\ud7ff\ue000-\uffff]*"):("[ !#-[\]-\ud7ff\ue000-\uffff]*")\}$/

/** The `[[asset_id, quantity]…]` part of the encoding, sorted by asset id. */
export function encodeAssets(assets: [number, number][]): string {
  // One line is the common case: nothing to sort.
  const sorted = assets.length > 1 ? [...assets].sort((a, b) => a[0] - b[0] || a[1] - b[1]) : assets
  let text = '['
  for (let i = 0; i < sorted.length; i++) text += `${i > 0 ? ',' : ''}[${json(sorted[i][0])},${json(sorted[i][1])}]`
  return `${text}]`
}

/** The `[[key, value]…]` part of the encoding, sorted by key, from the metadata or its stored JSON text (null or `{}`: none). */
export function encodeMetadata(metadata: Record<string, string> | string | null): string {
  if (metadata === null || metadata === '{}' || metadata === '') return '[]'
  const plain = typeof metadata === 'string' ? ONE_PLAIN_KEY.exec(metadata) : null
  if (plain) return `[[${plain[1]},${plain[2]}]]`
  const entries = Object.entries(typeof metadata === 'string' ? (JSON.parse(metadata) as Record<string, string>) : metadata)
  if (entries.length > 1) entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
  let text = '['
  for (let i = 0; i < entries.length; i++) text += `${i > 0 ? ',' : ''}[${json(entries[i][0])},${json(entries[i][1])}]`
  return `${text}]`
}

/**
 * The encoding: the JSON text (ECMAScript JSON.stringify, no spaces) of the array
 * ["coffer-transaction/v1", position, id, kind, created_at, sending_wallet_id, receiving_wallet_id,
 * memo, [[asset_id, quantity]…] by asset id, reverses or null, hold_id or null, [[key, value]…] by key],
 * written directly (no array built), `assets` and `metadata` already encoded.
 */
export function encodeFields(position: number, ...fields: Parameters<typeof tailText>): string {
  return `${ENCODING_START}${json(position)}${tailText(...fields)}`
}

/** The encoding's text up to its position. */
const ENCODING_START = '["coffer-transaction/v1",'

/** The encoding's text after its position: from the comma before the id to the closing bracket. */
function tailText(
  id: number,
  kind: string,
  createdAt: string,
  sendingWalletId: number,
  receivingWalletId: number,
  memo: string,
  assets: string,
  reverses: number | null,
  holdId: number | null,
  metadata: string,
): string {
  return (
    `,${json(id)},${json(kind)},${json(createdAt)},${json(sendingWalletId)},` +
    `${json(receivingWalletId)},${json(memo)},${assets},${json(reverses)},${json(holdId)},${metadata}]`
  )
}

/**
 * A transaction's encoding after its position, in UTF-8: what the sequencer keeps of a committed
 * transaction until a round positions it (one small object, not a graph of fields the collector
 * would move into its old generation), hashed by `chainHashOfTail`.
 */
export function encodedTail(t: EncodedTransaction): Buffer {
  const text = tailText(
    t.id,
    t.kind,
    t.created_at,
    t.sending_wallet_id,
    t.receiving_wallet_id,
    t.memo,
    encodeAssets(t.assets),
    t.reverses,
    t.hold_id,
    encodeMetadata(t.metadata),
  )
  return Buffer.from(text, 'utf8')
}

/** Where the previous hash and the encoding are written before hashing: no buffer per transaction. */
let scratch = Buffer.allocUnsafe(4096)

/** Writes the previous hash's 32 bytes (from hex) and the encoding's UTF-8 bytes to `scratch`; answers their length. */
function writeChained(previousHex: string, text: string): number {
  // At most three bytes of UTF-8 per UTF-16 unit.
  if (32 + 3 * text.length > scratch.length) scratch = Buffer.allocUnsafe(2 * (32 + 3 * text.length))
  scratch.write(previousHex, 0, 32, 'hex')
  return 32 + scratch.write(text, 32, 'utf8')
}

/** SHA-256 of the previous hash's 32 bytes followed by the UTF-8 bytes of the encoding at `position` (its tail given), in hex. */
export function chainHashOfTail(previousHex: string, position: number, tail: Buffer): string {
  const start = `${ENCODING_START}${position}`
  if (32 + start.length + tail.length > scratch.length) scratch = Buffer.allocUnsafe(2 * (32 + start.length + tail.length))
  scratch.write(previousHex, 0, 32, 'hex')
  const length = 32 + scratch.write(start, 32, 'latin1')
  return hash('sha256', scratch.subarray(0, length + tail.copy(scratch, length)), 'hex')
}

/**
 * The same hash in hex, from the previous one in hex and the encoding's text (`encodeFields`): a
 * hash answered as a string costs Node far less than as a new buffer.
 */
export function chainHashHex(previousHex: string, text: string): string {
  const length = writeChained(previousHex, text)
  return hash('sha256', scratch.subarray(0, length), 'hex')
}
