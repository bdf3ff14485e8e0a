import crypto from 'node:crypto'
import { DEFAULT_IDEMPOTENCY_LEASE_MS } from '../config.ts'
import type { Executor } from '../db/database.ts'
import { isUniqueViolation } from '../db/dialect.ts'
import { AppError } from '../http/errors.ts'
import { findIdempotencyKey } from './idempotency.repository.ts'
import { IdempotencyConflict, type Metadata, type Transaction } from './ledger.types.ts'

/**
 * Idempotency-Keys of POST /wallet/transactions, POST /wallet/transactions/batch, refunds, POST
 * /wallet/holds and a hold's capture (one key space per wallet; the operator's reversals use
 * mint's): a repeat of a request answers with the first response and moves nothing.
 *
 * - The first request's response is stored with its transfer, in the same database transaction
 *   (`moves.repository.ts`), so a key is stored exactly when its transfer committed (a batch's
 *   when at least one of its transfers did).
 * - A repeat finds it (`replay`): the same request is answered with the stored response and the
 *   `Idempotent-Replayed` header; a different request under the same key is G003.
 * - While the first request still runs in this process, a repeat is G004, for the length of its
 *   lease at most (`leaseMs`). Past it the repeat looks for the stored response again and, if the
 *   first attempt has not committed, runs afresh: a first attempt that hung (a silent server, a
 *   COMMIT whose outcome is unknown) never holds its key for longer.
 * - Two attempts that both run (on two instances, or a repeat past the lease) both write the key
 *   with their transfer; the key's unique index lets one commit, and the other fails the write
 *   (IdempotencyConflict, or a unique violation for a transfer that ran alone) and answers with
 *   that stored response. So the lease only spares work: nothing is spent twice without it.
 */

export interface SendRequest {
  recipient: string | number
  type?: 0 | 1 | 2
  memo?: string
  assets: Record<string, number>
  metadata?: Metadata
}

/** A response of a request sent with an Idempotency-Key: the first one, or its replay. */
export interface Answer<T> {
  status: number
  body: T
  replayed: boolean
}

export type SendResult = Answer<Transaction>

/** What the transfer stores with its key: the key, the request's fingerprint and whose keys it is among. */
export interface IdempotencyRecord {
  key: string
  requestHash: string
  /** Whose keys it is among, when not the sending wallet's (the operator's reversals: mint's). */
  walletId?: number
}

/**
 * What an Idempotency-Key's request is, for telling a retry from a different request: the fields
 * that decide what the transfer does, written one way. Unknown fields are ignored (the API drops
 * them), a missing memo is the empty one, a wallet id may be a string or a number, and asset
 * names are case-insensitive (quantities of one asset named twice add up, as the transfer does).
 */
export function canonicalTransfer(request: SendRequest): unknown[] {
  const type = request.type ?? 0
  const lines = canonicalAssets(request.assets)
  const fields: unknown[] = [type, type === 2 ? Number(request.recipient) : request.recipient, request.memo ?? '', lines]
  // No metadata and `{}` alike add nothing, so keys stored before metadata existed still match.
  const metadata = canonicalMetadata(request.metadata)
  if (metadata.length > 0) fields.push(metadata)
  return fields
}

/**
 * Asset quantities written one way for a fingerprint: names lower-cased (they are
 * case-insensitive), quantities of one asset named twice added up, as the move does, by name.
 */
export function canonicalAssets(requested: Record<string, number>): [string, number][] {
  const assets = new Map<string, number>()
  for (const [name, quantity] of Object.entries(requested)) {
    const key = name.toLowerCase()
    assets.set(key, (assets.get(key) ?? 0) + quantity)
  }
  return [...assets].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
}

/** Metadata written one way for a fingerprint: its entries by key. */
export function canonicalMetadata(metadata: Metadata | undefined): [string, string][] {
  return Object.entries(metadata ?? {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
}

/**
 * The fingerprint of a request's fields written one way; the fields start with what the request
 * is (a batch, a refund…), so that requests of two routes never match.
 */
export function hashRequest(canonical: unknown[]): string {
  return crypto.createHash('sha256').update(JSON.stringify(canonical)).digest('hex')
}

/** The fingerprint of a transfer (`canonicalTransfer`). */
function fingerprintTransfer(request: SendRequest): string {
  return hashRequest(canonicalTransfer(request))
}

/** The fingerprint of a batch: its transfers in order, and whether it is atomic; never a transfer's. */
export function fingerprintBatch(transfers: SendRequest[], atomic: boolean): string {
  return hashRequest(['batch', atomic, transfers.map(canonicalTransfer)])
}

async function replay<T>(db: Executor, walletId: number, key: string, requestHash: string): Promise<Answer<T> | undefined> {
  const stored = await findIdempotencyKey(db, walletId, key)
  if (!stored) return undefined
  if (stored.request_hash !== requestHash) throw new AppError('G003', 'this Idempotency-Key was used for a different request')
  return { status: stored.status_code, body: JSON.parse(stored.response_body) as T, replayed: true }
}

/** A key's first request running in this process, until when it holds the key. */
interface Lease {
  until: number
}

export class Idempotency {
  readonly #db: Executor
  readonly #leaseMs: number
  /** Keys whose first request is still running in this process (G004 until the lease ends). */
  readonly #inFlight = new Map<string, Lease>()

  constructor(db: Executor, leaseMs = DEFAULT_IDEMPOTENCY_LEASE_MS) {
    this.#db = db
    this.#leaseMs = leaseMs
  }

  /**
   * Runs `transfer` once per key: with no key, simply runs it; with a key, answers a repeat from
   * the stored response (throws G003, G004 as above) and otherwise runs it with the record to
   * store. Answers 201 with the transfer's Transaction.
   */
  async once(
    walletId: number,
    key: string | undefined,
    request: SendRequest,
    transfer: (record?: IdempotencyRecord) => Promise<Transaction>,
  ): Promise<SendResult> {
    // Without a key nothing is compared, so the request is not fingerprinted (a SHA-256 of its
    // canonical JSON: about 1 % of the service's time in a CPU profile of plain transfers).
    if (key === undefined) return { status: 201, body: await transfer(), replayed: false }
    return this.answerOnce(walletId, key, fingerprintTransfer(request), async (record) => ({ status: 201, body: await transfer(record) }))
  }

  /**
   * Runs `work` once per key, as `once`, for any request: `requestHash` tells a retry from a
   * different request, and `work` answers the response, which it stores with its writes.
   */
  async answerOnce<T>(
    walletId: number,
    key: string | undefined,
    requestHash: string,
    work: (record?: IdempotencyRecord) => Promise<{ status: number; body: T }>,
  ): Promise<Answer<T>> {
    if (key === undefined) return { ...(await work()), replayed: false }
    const previous = await replay<T>(this.#db, walletId, key, requestHash)
    if (previous) return previous
    const flightKey = `${walletId}:${key}`
    const now = Date.now()
    const holder = this.#inFlight.get(flightKey)
    if (holder !== undefined && holder.until > now)
      throw new AppError('G004', 'the first request with this Idempotency-Key is still running')
    const lease = { until: now + this.#leaseMs }
    this.#inFlight.set(flightKey, lease)
    try {
      return { ...(await work({ key, requestHash, walletId })), replayed: false }
    } catch (error) {
      // Another instance committed the same key first: answer with its result.
      if (error instanceof IdempotencyConflict || isUniqueViolation(error)) {
        const stored = await replay<T>(this.#db, walletId, key, requestHash)
        if (stored) return stored
      }
      throw error
    } finally {
      // A repeat past the lease may hold the key now: only this attempt's own lease is ended.
      if (this.#inFlight.get(flightKey) === lease) this.#inFlight.delete(flightKey)
    }
  }
}
