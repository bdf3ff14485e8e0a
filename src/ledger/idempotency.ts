import crypto from 'node:crypto'
import type { Executor } from '../db/database.ts'
import { isUniqueViolation } from '../db/dialect.ts'
import { AppError } from '../http/errors.ts'
import { findIdempotencyKey } from './idempotency.repository.ts'
import { IdempotencyConflict, type Transaction } from './ledger.types.ts'

/**
 * Idempotency-Keys of POST /wallet/transactions (and of POST /wallet/holds and a hold's capture,
 * in the same space of keys per wallet): a repeat of a request answers with the first response
 * and moves nothing.
 *
 * - The first request's response is stored with its transfer, in the same database transaction
 *   (`moves.repository.ts`), so a key is stored exactly when its transfer committed.
 * - A repeat finds it (`replay`): the same request is answered with the stored response and the
 *   `Idempotent-Replayed` header; a different request under the same key is G003.
 * - While the first request still runs in this process, a repeat is G004.
 * - Another instance storing the same key first fails the write (IdempotencyConflict, or a unique
 *   violation for a transfer that ran alone); the request then answers with that stored response.
 */

export interface SendRequest {
  recipient: string | number
  type?: 0 | 1 | 2
  memo?: string
  assets: Record<string, number>
}

export interface IdempotentResult<T> {
  status: number
  body: T
  replayed: boolean
}

export type SendResult = IdempotentResult<Transaction>

/** What the transfer stores with its key: the key and the request's fingerprint. */
export interface IdempotencyRecord {
  key: string
  requestHash: string
}

/**
 * What an Idempotency-Key's request is, for telling a retry from a different request: the fields
 * that decide what the transfer does, written one way. Unknown fields are ignored (the API drops
 * them), a missing memo is the empty one, a wallet id may be a string or a number, and asset
 * names are case-insensitive (quantities of one asset named twice add up, as the transfer does).
 */
export function fingerprint(request: SendRequest): string {
  const type = request.type ?? 0
  const canonical = JSON.stringify([type, type === 2 ? Number(request.recipient) : request.recipient, request.memo ?? '', canonicalAssets(request.assets)])
  return hash(canonical)
}

/** Asset quantities written one way: names lower-cased, one asset named twice added up, sorted by name. */
export function canonicalAssets(requested: Record<string, number>): [string, number][] {
  const assets = new Map<string, number>()
  for (const [name, quantity] of Object.entries(requested)) {
    const key = name.toLowerCase()
    assets.set(key, (assets.get(key) ?? 0) + quantity)
  }
  return [...assets].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
}

/** SHA-256 of a canonical request text: what is stored with a key. */
export function hash(canonical: string): string {
  return crypto.createHash('sha256').update(canonical).digest('hex')
}

async function replay<T>(db: Executor, walletId: number, key: string, requestHash: string): Promise<IdempotentResult<T> | undefined> {
  const stored = await findIdempotencyKey(db, walletId, key)
  if (!stored) return undefined
  if (stored.request_hash !== requestHash) throw new AppError('G003', 'this Idempotency-Key was used for a different request')
  return { status: stored.status_code, body: JSON.parse(stored.response_body) as T, replayed: true }
}

export class Idempotency {
  readonly #db: Executor
  /** Keys whose first request is still running in this process (G004). */
  readonly #inFlight = new Set<string>()

  constructor(db: Executor) {
    this.#db = db
  }

  /**
   * Runs `transfer` once per key: with no key, simply runs it; with a key, answers a repeat from
   * the stored response (throws G003, G004 as above) and otherwise runs it with the record to
   * store. Answers 201 with what the transfer answers (a Transaction; a new hold's Hold).
   * `requestHash` tells the request apart (`fingerprint`).
   */
  async once<T>(walletId: number, key: string | undefined, requestHash: string, transfer: (record?: IdempotencyRecord) => Promise<T>): Promise<IdempotentResult<T>> {
    if (key === undefined) return { status: 201, body: await transfer(), replayed: false }
    const previous = await replay<T>(this.#db, walletId, key, requestHash)
    if (previous) return previous
    const flightKey = `${walletId}:${key}`
    if (this.#inFlight.has(flightKey)) throw new AppError('G004', 'the first request with this Idempotency-Key is still running')
    this.#inFlight.add(flightKey)
    try {
      return { status: 201, body: await transfer({ key, requestHash }), replayed: false }
    } catch (error) {
      // Another instance committed the same key first: answer with its result.
      if (error instanceof IdempotencyConflict || isUniqueViolation(error)) {
        const stored = await replay<T>(this.#db, walletId, key, requestHash)
        if (stored) return stored
      }
      throw error
    } finally {
      this.#inFlight.delete(flightKey)
    }
  }
}
