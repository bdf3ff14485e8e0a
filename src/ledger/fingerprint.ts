import { randomFillSync } from 'node:crypto'

/** Words a row is hashed as: wallet, asset, transaction (each low and high half), two of `created_at`, quantity's halves. */
const WORDS = 10
const HIGH = 2 ** 32

/** One murmur3 round of `word`, first offset by a key of the run so that no change cancels whatever the key. */
function round(hash: number, word: number, key: number): number {
  let k = Math.imul((word + key) | 0, 0xcc9e2d51)
  k = Math.imul((k << 15) | (k >>> 17), 0x1b873593)
  hash ^= k
  hash = (hash << 13) | (hash >>> 19)
  return (Math.imul(hash, 5) + 0xe6546b64) | 0
}

/** murmur3's finalizer: every input bit reaches every output bit. */
function mix(hash: number): number {
  hash = Math.imul(hash ^ (hash >>> 16), 0x85ebca6b)
  hash = Math.imul(hash ^ (hash >>> 13), 0xc2b2ae35)
  return hash ^ (hash >>> 16)
}

/**
 * A 64-bit fingerprint of a multiset of running balances (wallet, asset, `created_at`, transaction,
 * quantity): two 32-bit sums of a hash of each row under keys drawn for this run, so the order rows
 * are added in does not count, and a change cannot be aimed at a collision without the keys. Two multisets of the
 * same size with equal fingerprints are equal but with a chance of about 2^-64.
 */
export class Fingerprint {
  #low = 0
  #high = 0
  rows = 0
  readonly #keys: Int32Array

  constructor(keys?: Int32Array) {
    this.#keys = keys ?? randomFillSync(new Int32Array(2 * WORDS + 4))
  }

  /** The same keys, for the other side of the comparison. */
  sibling(): Fingerprint {
    return new Fingerprint(this.#keys)
  }

  /** `created_at` (`text` from `start` to `end`) as two 32-bit words: hashed once a transaction, used for each of its rows. */
  time(text: string, start = 0, end = text.length): [number, number] {
    let a = this.#keys[2 * WORDS]
    let b = this.#keys[2 * WORDS + 1]
    for (let i = start; i < end; i++) {
      const c = text.charCodeAt(i)
      a = Math.imul(a ^ c, 0x01000193)
      b = Math.imul(b ^ c, 0x5bd1e995)
    }
    return [mix(a), mix(b ^ (end - start))]
  }

  add(wallet: number, asset: number, time: [number, number], transaction: number, quantity: number): void {
    this.#low = (this.#low + this.#hash(0, wallet, asset, time, transaction, quantity)) | 0
    this.#high = (this.#high + this.#hash(WORDS, wallet, asset, time, transaction, quantity)) | 0
    this.rows++
  }

  equals(other: Fingerprint): boolean {
    return this.rows === other.rows && this.#low === other.#low && this.#high === other.#high
  }

  #hash(lane: number, wallet: number, asset: number, time: [number, number], transaction: number, quantity: number): number {
    const keys = this.#keys
    let hash = keys[2 * WORDS + 2 + (lane === 0 ? 0 : 1)]
    // Ids and quantities are safe integers: `| 0` keeps the low 32 bits, the division the rest.
    hash = round(hash, wallet | 0, keys[lane])
    hash = round(hash, Math.floor(wallet / HIGH), keys[lane + 1])
    hash = round(hash, asset | 0, keys[lane + 2])
    hash = round(hash, Math.floor(asset / HIGH), keys[lane + 3])
    hash = round(hash, transaction | 0, keys[lane + 4])
    hash = round(hash, Math.floor(transaction / HIGH), keys[lane + 5])
    hash = round(hash, time[0], keys[lane + 6])
    hash = round(hash, time[1], keys[lane + 7])
    hash = round(hash, quantity | 0, keys[lane + 8])
    hash = round(hash, Math.floor(quantity / HIGH), keys[lane + 9])
    return mix(hash ^ WORDS)
  }
}
