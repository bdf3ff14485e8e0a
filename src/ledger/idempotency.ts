import crypto from 'node:crypto'
import { DEFAULT_IDEMPOTENCY_LEASE_MS } from '../config.ts'
import type { Executor } from '../db/database.ts'
import { isUniqueViolation } from '../db/dialect.ts'
import { AppError } from '../http/errors.ts'
import { findIdempotencyKey } from './idempotency.repository.ts'
import { IdempotencyConflict, type Metadata, type Transaction } from './ledger.types.ts'

/**
 * Idempotency-Keys, one key space per wallet: a repeat answers the first response and moves nothing.
 *
 * - The response is stored in the transfer's own transaction, so the key exists exactly when it committed.
 * - A different request under the key is G003; a repeat while the first runs here is G004, for at
 *   most the lease, after which it looks again and may run afresh.
 * - Of two attempts that both run, the key's unique index lets one commit; the other answers its
 *   response. The lease only spares work: nothing is spent twice without it.
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

/** The fields that decide what a transfer does, written one way, to tell a retry from a different request. */
export function canonicalTransfer(request: SendRequest): unknown[] {
  const type = request.type ?? 0
  const lines = canonicalAssets(request.assets)
  const fields: unknown[] = [type, type === 2 ? Number(request.recipient) : request.recipient, request.memo ?? '', lines]
  // No metadata and `{}` alike add nothing, so keys stored before metadata existed still match.
  const metadata = canonicalMetadata(request.metadata)
  if (metadata.length > 0) fields.push(metadata)
  return fields
}

/** Names lower-cased, one asset named twice added up, as the move does. */
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

/** The fields start with the request's kind, so requests of two routes never match. */
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

  /** Runs `transfer` once per key, answering 201 with its Transaction; throws G003, G004. */
  async once(
    walletId: number,
    key: string | undefined,
    request: SendRequest,
    transfer: (record?: IdempotencyRecord) => Promise<Transaction>,
  ): Promise<SendResult> {
    // Without a key, no fingerprint to pay for.
    if (key === undefined) return { status: 201, body: await transfer(), replayed: false }
    return this.answerOnce(walletId, key, fingerprintTransfer(request), async (record) => ({ status: 201, body: await transfer(record) }))
  }

  /** `once` for any request: `work` answers the response and stores it with its writes. */
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
