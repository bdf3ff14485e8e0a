import { isUtf8 } from 'node:buffer'
import { hash } from 'node:crypto'
import { encodeMetadata } from './encoding.ts'
import { nodeHashLatin1 } from './merkle.ts'

/**
 * A range of the journal as the database writes it (`readEncodedText` in `verify-journal.ts`), read
 * in its UTF-8 bytes: each entry is kept as offsets into them and its stored hash as 32 bytes, and
 * its encoding is copied from them into one buffer behind the hash before it, then hashed. No
 * string is made for an entry whose text gives its hash (its metadata aside, when it is not one
 * plain key): strings, their copies and their collection were most of what the check cost besides
 * SHA-256 and the database.
 */

const [COMMA, ZERO, NINE, QUOTE, COLON, OPEN_BRACE, CLOSE_BRACE, BACKSLASH, SPACE, DELETE] = [44, 48, 57, 34, 58, 123, 125, 92, 32, 127]
const [START_METADATA, END_RECORD, START_LINE] = [1, 2, 3]

/** Each hex digit's value by its byte; -1 for any other byte (upper case too: a stored hash is lower case). */
const HEX = new Int8Array(256).fill(-1)
for (let i = 0; i < 10; i++) HEX[ZERO + i] = i
for (let i = 0; i < 6; i++) HEX[97 + i] = 10 + i

/**
 * An entry's numbers: position, transaction id, then where its head, the rest and its metadata
 * start and end, its first line, its lines.
 */
const [POSITION, TRANSACTION, HEAD, HEAD_END, REST, REST_END, METADATA, METADATA_END, LINE, LINES, FIELDS] = [
  0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10,
]

const [OPEN_BRACKET, CLOSE_BRACKET] = [91, 93]

export class EncodedRange {
  /** Entries read by the last `read`. */
  count = 0
  #bytes: Buffer = Buffer.alloc(0)
  #entries = new Float64Array(FIELDS * 1024)
  /** Each line's start and end. */
  #lines = new Int32Array(2 * 1024)
  #lineCount = 0
  /** The stored hashes, 32 bytes each. */
  #hashes = Buffer.alloc(32 * 1024)
  /** The hash before an entry, then its encoding, hashed together. */
  #scratch = Buffer.allocUnsafe(4096)
  /** Views of `#scratch` by length: hashing one costs no new object. */
  #views: Buffer[] = []
  readonly #leaf = Buffer.alloc(33)

  /**
   * Reads a range's text; false where it is not as written (positions out of order, a field not
   * found, a stored hash not 64 lower-case hex digits): the range is then read as rows.
   */
  read(text: Buffer | string | null): boolean {
    this.count = 0
    this.#lineCount = 0
    if (text === null) return true
    // Bytes that are no UTF-8 are read as the driver reads a text (each replaced), so an entry hashes as its text would.
    const bytes = typeof text === 'string' ? Buffer.from(text) : isUtf8(text) ? text : Buffer.from(text.toString('utf8'))
    this.#bytes = bytes
    const length = bytes.length
    let at = 0
    // The integer from `at` to the `,` that follows it, which is passed; -1 when there is none.
    const integer = () => {
      const start = at
      let value = 0
      let c = bytes[at]
      for (; c >= ZERO && c <= NINE; c = bytes[++at]) value = value * 10 + (c - ZERO)
      if (c !== COMMA || at === start || at - start > 15) return -1
      at++
      return value
    }
    let previous = 0
    while (at < length) {
      const position = integer()
      const transactionId = integer()
      if (position < previous || transactionId < 0 || bytes[at + 64] !== COMMA) return false
      const hashAt = at
      const line = bytes.indexOf(START_LINE, at + 65)
      const rest = bytes.indexOf(START_LINE, line + 1)
      const metadata = bytes.indexOf(START_METADATA, rest + 1)
      let end = bytes.indexOf(END_RECORD, metadata + 1)
      if (end < 0) end = length
      if (line < 0 || rest < 0 || metadata < 0) return false
      const head = at + 65
      at = end + 1
      if (position === previous) {
        // Another line of the entry before.
        const entry = FIELDS * (this.count - 1)
        if (this.#entries[entry + HEAD] === this.#entries[entry + HEAD_END] || head === line || line + 1 === rest) return false
        this.#addLine(line + 1, rest)
        this.#entries[entry + LINES]++
        continue
      }
      previous = position
      if (!this.#addHash(bytes, hashAt)) return false
      const entry = this.#addEntry()
      const fields = this.#entries
      fields[entry + POSITION] = position
      fields[entry + TRANSACTION] = transactionId
      fields[entry + HEAD] = head
      fields[entry + HEAD_END] = line
      fields[entry + REST] = rest + 1
      fields[entry + REST_END] = metadata
      fields[entry + METADATA] = metadata + 1
      fields[entry + METADATA_END] = end
      fields[entry + LINE] = this.#lineCount
      fields[entry + LINES] = line + 1 === rest ? 0 : 1
      if (line + 1 !== rest) this.#addLine(line + 1, rest)
    }
    return true
  }

  position(k: number): number {
    return this.#entries[FIELDS * k + POSITION]
  }

  transactionId(k: number): number {
    return this.#entries[FIELDS * k + TRANSACTION]
  }

  /** Entry `k`'s stored hash in hex. */
  hashHex(k: number): string {
    return this.#hashes.toString('hex', 32 * k, 32 * k + 32)
  }

  /** Entry `k`'s encoding as the database wrote it, metadata added; null where it wrote none (no transaction). */
  encoding(k: number): string | null {
    const end = this.#write(k)
    return end < 0 ? null : this.#scratch.toString('utf8', 32, end)
  }

  /**
   * Whether entry `k`'s encoding chained on the hash before it gives its stored hash: the stored hash
   * of entry `k - 1`, or `previousHex` (as `chainHashHex` reads it) when given. False where there is no encoding.
   */
  gives(k: number, previousHex?: string): boolean {
    const end = this.#write(k)
    if (end < 0) return false
    if (previousHex === undefined) copyBytes(this.#hashes, 32 * (k - 1), 32 * k, this.#scratch, 0)
    else this.#scratch.write(previousHex, 0, 32, 'hex')
    const digest = hash('sha256', this.#view(end), 'binary')
    const stored = this.#hashes
    for (let i = 0, at = 32 * k; i < 32; i++, at++) if (digest.charCodeAt(i) !== stored[at]) return false
    return true
  }

  /** The Merkle leaf hash of entry `k`'s stored hash, latin1. */
  leafHash(k: number): string {
    this.#leaf[0] = 0
    copyBytes(this.#hashes, 32 * k, 32 * k + 32, this.#leaf, 1)
    return hash('sha256', this.#leaf, 'binary')
  }

  /** Writes entry `k`'s encoding after 32 bytes of `#scratch`; answers where it ends, -1 when there is none. */
  #write(k: number): number {
    const fields = this.#entries
    const entry = FIELDS * k
    const head = fields[entry + HEAD]
    const headEnd = fields[entry + HEAD_END]
    if (head === headEnd) return -1
    const rest = fields[entry + REST]
    const restEnd = fields[entry + REST_END]
    const first = fields[entry + LINE]
    const count = fields[entry + LINES]
    const bytes = this.#bytes
    const lines = this.#lines
    const metadata = this.#metadataOf(fields[entry + METADATA], fields[entry + METADATA_END])
    let size = 32 + headEnd - head + restEnd - rest + count + 1
    for (let i = first; i < first + count; i++) size += lines[2 * i + 1] - lines[2 * i]
    size += metadata === null ? this.#plainEnd - this.#plainStart + 3 : 3 * metadata.length
    if (size > this.#scratch.length) {
      this.#scratch = Buffer.allocUnsafe(2 * size)
      this.#views = []
    }
    const scratch = this.#scratch
    let at = copyBytes(bytes, head, headEnd, scratch, 32)
    if (count === 1) at = copyBytes(bytes, lines[2 * first], lines[2 * first + 1], scratch, at)
    else if (count > 1)
      for (const [i, line] of this.#linesInOrder(first, count).entries()) {
        if (i > 0) scratch[at++] = COMMA
        at = copyBytes(bytes, lines[2 * line], lines[2 * line + 1], scratch, at)
      }
    at = copyBytes(bytes, rest, restEnd, scratch, at)
    if (metadata !== null) at += scratch.write(metadata, at, 'utf8')
    else {
      // `{"key":"value"}` as `[["key","value"]]`: from its first quote to its last, the colon a comma.
      scratch[at++] = OPEN_BRACKET
      scratch[at++] = OPEN_BRACKET
      at = copyBytes(bytes, this.#plainStart, this.#plainEnd, scratch, at)
      scratch[at - (this.#plainEnd - this.#plainColon)] = COMMA
      scratch[at++] = CLOSE_BRACKET
      scratch[at++] = CLOSE_BRACKET
    }
    scratch[at++] = CLOSE_BRACKET
    return at
  }

  /** Where the last metadata read as one plain key has its first quote, its colon and the end of its last quote. */
  #plainStart = 0
  #plainColon = 0
  #plainEnd = 0

  /**
   * The metadata's encoding; null for `{"key":"value"}` with nothing in them that JSON escapes or that
   * is not ASCII, which is copied (`#plainStart` to `#plainEnd`), else `encodeMetadata`'s text of it.
   */
  #metadataOf(start: number, end: number): string | null {
    const bytes = this.#bytes
    if (end - start >= 7 && bytes[start] === OPEN_BRACE && bytes[start + 1] === QUOTE && bytes[end - 1] === CLOSE_BRACE) {
      let at = start + 2
      while (plain(bytes[at])) at++
      const colon = at + 1
      if (bytes[at] === QUOTE && bytes[colon] === COLON && bytes[colon + 1] === QUOTE) {
        at = colon + 2
        while (plain(bytes[at])) at++
        if (bytes[at] === QUOTE && at === end - 2) {
          this.#plainStart = start + 1
          this.#plainColon = colon
          this.#plainEnd = end - 1
          return null
        }
      }
    }
    return encodeMetadata(start === end ? null : bytes.toString('utf8', start, end))
  }

  /** Lines `first` to `first + count - 1` by asset id, as `encodeAssets` writes them (the database gives them in any order). */
  #linesInOrder(first: number, count: number): number[] {
    const bytes = this.#bytes
    const lines = Array.from({ length: count }, (_, i) => {
      const [start, end] = [this.#lines[2 * (first + i)], this.#lines[2 * (first + i) + 1]]
      const comma = bytes.indexOf(COMMA, start)
      return [Number(bytes.toString('utf8', start + 1, comma < 0 || comma >= end ? end - 1 : comma)), first + i] as const
    })
    return lines.sort((a, b) => a[0] - b[0]).map(([, line]) => line)
  }

  #view(length: number): Buffer {
    return (this.#views[length] ??= this.#scratch.subarray(0, length))
  }

  #addEntry(): number {
    if (FIELDS * (this.count + 1) > this.#entries.length) {
      const grown = new Float64Array(2 * this.#entries.length)
      grown.set(this.#entries)
      this.#entries = grown
    }
    return FIELDS * this.count++
  }

  #addLine(start: number, end: number): void {
    if (2 * (this.#lineCount + 1) > this.#lines.length) {
      const grown = new Int32Array(2 * this.#lines.length)
      grown.set(this.#lines)
      this.#lines = grown
    }
    this.#lines[2 * this.#lineCount] = start
    this.#lines[2 * this.#lineCount + 1] = end
    this.#lineCount++
  }

  /** Entry `count`'s stored hash from its 64 hex digits at `at`; false when they are not. */
  #addHash(bytes: Buffer, at: number): boolean {
    if (32 * (this.count + 1) > this.#hashes.length) {
      const grown = Buffer.alloc(2 * this.#hashes.length)
      this.#hashes.copy(grown)
      this.#hashes = grown
    }
    const hashes = this.#hashes
    for (let i = 0, to = 32 * this.count; i < 32; i++, to++) {
      const high = HEX[bytes[at + 2 * i]]
      const low = HEX[bytes[at + 2 * i + 1]]
      if (high < 0 || low < 0) return false
      hashes[to] = (high << 4) | low
    }
    return true
  }
}

/** Copies `from[start..end)` to `to` at `at`; answers where it ends. A loop: `Buffer.copy` cost more for a few dozen bytes. */
function copyBytes(from: Uint8Array, start: number, end: number, to: Uint8Array, at: number): number {
  for (let i = start; i < end; i++) to[at++] = from[i]
  return at
}

/** A byte JSON writes as itself in a string, and one character: printable ASCII but `"` and `\`. */
const plain = (c: number) => c >= SPACE && c <= DELETE && c !== QUOTE && c !== BACKSLASH

/**
 * The subtree of `2^levels.length` stored hashes (latin1 leaf hashes in order), as `appendLatin1Leaf`
 * makes it but with no node object: `levels` keeps the left halves still open.
 */
export function addLeaf(levels: string[], within: number, leaf: string): string {
  let node = leaf
  let level = 0
  for (; (within >> level) & 1; level++) node = nodeHashLatin1(levels[level], node)
  if (level < levels.length) levels[level] = node
  return node
}

const leafOfHex = Buffer.alloc(33)

/** The Merkle leaf hash, latin1, of a stored hash in hex (as `appendLatin1Leaf` reads it). */
export function leafHashOfHex(hex: string): string {
  leafOfHex.write(hex, 1, 32, 'hex')
  return hash('sha256', leafOfHex, 'binary')
}
