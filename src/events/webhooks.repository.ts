import type { Executor } from '../db/database.ts'
import { isPostgres } from '../db/dialect.ts'
import { eventPayload } from './outbox.ts'

/** SQL for webhooks and their delivery log: the routes' reads and writes, and the worker's claims. */

export type DeliveryStatus = 'pending' | 'delivered' | 'failed' | 'cancelled'

export async function findWebhook(db: Executor, walletId: number) {
  return db.selectFrom('webhooks').select(['url', 'secret', 'created_at']).where('wallet_id', '=', walletId).executeTakeFirst()
}

/** Every webhook's stored (sealed) secret: the start-up check and key rotation. */
export async function listWebhookSecrets(db: Executor) {
  return db.selectFrom('webhooks').select(['wallet_id', 'secret']).orderBy('wallet_id').execute()
}

/** Replaces a stored secret, only while it is still `old` (a webhook set meanwhile keeps its own). */
export async function replaceWebhookSecret(db: Executor, walletId: number, old: string, secret: string): Promise<void> {
  await db.updateTable('webhooks').set({ secret }).where('wallet_id', '=', walletId).where('secret', '=', old).execute()
}

/** Sets the wallet's one webhook, replacing any other. */
export async function upsertWebhook(db: Executor, webhook: { walletId: number; url: string; secret: string; createdAt: string }): Promise<void> {
  await db
    .insertInto('webhooks')
    .values({ wallet_id: webhook.walletId, url: webhook.url, secret: webhook.secret, created_at: webhook.createdAt })
    .onConflict((oc) => oc.column('wallet_id').doUpdateSet({ url: webhook.url, secret: webhook.secret, created_at: webhook.createdAt }))
    .execute()
}

/** Deletes the wallet's webhook (only when it still points at `url`, if given); true when one was deleted. */
export async function deleteWebhook(db: Executor, walletId: number, url?: string): Promise<boolean> {
  let query = db.deleteFrom('webhooks').where('wallet_id', '=', walletId)
  if (url !== undefined) query = query.where('url', '=', url)
  const result = await query.executeTakeFirst()
  return Number(result.numDeletedRows) > 0
}

/** Points the wallet's undelivered events at its new webhook. */
export async function retargetPendingDeliveries(db: Executor, walletId: number, url: string, now: string): Promise<void> {
  await db.updateTable('webhook_deliveries').set({ url, updated_at: now }).where('wallet_id', '=', walletId).where('status', '=', 'pending').execute()
}

/** Cancels every pending delivery of the wallet (except `exceptId`); in-flight ones keep their lease but cannot succeed it. */
export async function cancelPendingDeliveries(db: Executor, walletId: number, now: string, reason: string, exceptId?: number): Promise<void> {
  let query = db
    .updateTable('webhook_deliveries')
    .set({ status: 'cancelled', next_attempt_at: null, last_error: reason, updated_at: now })
    .where('wallet_id', '=', walletId)
    .where('status', '=', 'pending')
  if (exceptId !== undefined) query = query.where('id', '<>', exceptId)
  await query.execute()
}

const DELIVERY_COLUMNS = [
  'webhook_deliveries.id',
  'webhook_deliveries.url',
  'webhook_deliveries.status',
  'webhook_deliveries.attempts',
  'webhook_deliveries.next_attempt_at',
  'webhook_deliveries.last_status_code',
  'webhook_deliveries.last_error',
  'webhook_deliveries.created_at',
  'webhook_deliveries.updated_at',
  'events.event_id',
  'events.type',
] as const

/** A page of the wallet's deliveries, newest first. */
export async function listDeliveries(db: Executor, walletId: number, page: { limit: number; offset: number; status?: DeliveryStatus }) {
  let query = db
    .selectFrom('webhook_deliveries')
    .innerJoin('events', 'events.id', 'webhook_deliveries.event_id')
    .select(DELIVERY_COLUMNS)
    .where('webhook_deliveries.wallet_id', '=', walletId)
  if (page.status !== undefined) query = query.where('webhook_deliveries.status', '=', page.status)
  return query.orderBy('webhook_deliveries.id', 'desc').limit(page.limit).offset(page.offset).execute()
}

export async function findDelivery(db: Executor, walletId: number, deliveryId: number) {
  return db
    .selectFrom('webhook_deliveries')
    .innerJoin('events', 'events.id', 'webhook_deliveries.event_id')
    .select([...DELIVERY_COLUMNS, 'webhook_deliveries.lease_until'])
    .where('webhook_deliveries.wallet_id', '=', walletId)
    .where('webhook_deliveries.id', '=', deliveryId)
    .executeTakeFirst()
}

/** Attempts of the given deliveries, oldest first. */
export async function listAttempts(db: Executor, deliveryIds: number[]) {
  if (deliveryIds.length === 0) return []
  return db
    .selectFrom('webhook_attempts')
    .select(['id', 'delivery_id', 'attempted_at', 'status_code', 'latency_ms', 'error'])
    .where('delivery_id', 'in', deliveryIds)
    .orderBy('delivery_id')
    .orderBy('id')
    .execute()
}

/** Makes a delivery due now (again), whatever its status; an attempt in flight is left to finish. */
export async function requeueDelivery(db: Executor, deliveryId: number, url: string, now: string): Promise<void> {
  await db
    .updateTable('webhook_deliveries')
    .set({ status: 'pending', next_attempt_at: now, url, updated_at: now })
    .where('id', '=', deliveryId)
    .execute()
}

// ---- the delivery worker ----

export interface Claim {
  id: number
  wallet_id: number
  lease_until: string
}

/**
 * Leases up to `limit` due deliveries to this instance. On PostgreSQL the candidate rows are
 * locked with `FOR UPDATE SKIP LOCKED`, so instances claiming at once get disjoint sets; a lease
 * left behind by a dead instance expires at `lease_until` and the row becomes claimable again.
 * On SQLite the single statement runs under the database's one write lock.
 */
export async function claimDueDeliveries(db: Executor, claim: { now: string; leaseUntil: string; limit: number; skipWallets: number[] }): Promise<Claim[]> {
  return db
    .updateTable('webhook_deliveries')
    .set({ lease_until: claim.leaseUntil })
    .where('id', 'in', (eb) => {
      let due = eb
        .selectFrom('webhook_deliveries')
        .select('id')
        .where('status', '=', 'pending')
        .where('next_attempt_at', '<=', claim.now)
        .where((inner) => inner.or([inner('lease_until', 'is', null), inner('lease_until', '<=', claim.now)]))
      if (claim.skipWallets.length > 0) due = due.where('wallet_id', 'not in', claim.skipWallets)
      due = due.orderBy('next_attempt_at').orderBy('id').limit(claim.limit)
      return isPostgres(db) ? due.forUpdate().skipLocked() : due
    })
    .returning(['id', 'wallet_id', 'lease_until'])
    .execute() as Promise<Claim[]>
}

/** What one attempt needs: the event as stored, and the wallet's webhook now (undefined once removed). */
export async function loadDeliveryWork(db: Executor, deliveryId: number) {
  const row = await db
    .selectFrom('webhook_deliveries')
    .innerJoin('events', 'events.id', 'webhook_deliveries.event_id')
    // A hold's event has no transaction and carries its own body.
    .leftJoin('transactions', 'transactions.id', 'events.transaction_id')
    .leftJoin('webhooks', 'webhooks.wallet_id', 'webhook_deliveries.wallet_id')
    .select((eb) => ['events.event_id', 'events.type', 'events.created_at', eb.fn.coalesce('events.body', 'transactions.body').as('body'), 'webhooks.url', 'webhooks.secret'])
    .where('webhook_deliveries.id', '=', deliveryId)
    .executeTakeFirst()
  if (!row) return undefined
  return { event_id: row.event_id, payload: eventPayload(row), url: row.url, secret: row.secret }
}

/** Gives a lease back without counting an attempt (shutdown); the row is claimable again at once. */
export async function releaseDelivery(db: Executor, deliveryId: number, leaseUntil: string): Promise<void> {
  await db.updateTable('webhook_deliveries').set({ lease_until: null }).where('id', '=', deliveryId).where('lease_until', '=', leaseUntil).execute()
}

export interface AttemptRecord {
  deliveryId: number
  url: string
  attemptedAt: string
  statusCode: number | null
  latencyMs: number
  error: string | null
}

/** Logs an attempt and counts it on the delivery, whatever happened to the delivery meanwhile. */
export async function insertAttempt(db: Executor, attempt: AttemptRecord): Promise<void> {
  await db
    .insertInto('webhook_attempts')
    .values({
      delivery_id: attempt.deliveryId,
      attempted_at: attempt.attemptedAt,
      status_code: attempt.statusCode,
      latency_ms: attempt.latencyMs,
      error: attempt.error,
    })
    .execute()
  await db
    .updateTable('webhook_deliveries')
    .set((eb) => ({
      attempts: eb('attempts', '+', 1),
      url: attempt.url,
      last_status_code: attempt.statusCode,
      last_error: attempt.error,
      updated_at: attempt.attemptedAt,
    }))
    .where('id', '=', attempt.deliveryId)
    .execute()
}

/**
 * Moves a leased delivery to its next state and drops the lease, but only while it is still
 * pending under our lease: a delivery cancelled or re-leased meanwhile is left as it is.
 * Returns false when it was not ours any more.
 */
export async function settleDelivery(
  db: Executor,
  claim: Claim,
  next: { status: DeliveryStatus; nextAttemptAt: string | null; now: string },
): Promise<boolean> {
  const result = await db
    .updateTable('webhook_deliveries')
    .set({ status: next.status, next_attempt_at: next.nextAttemptAt, lease_until: null, updated_at: next.now })
    .where('id', '=', claim.id)
    .where('status', '=', 'pending')
    .where('lease_until', '=', claim.lease_until)
    .executeTakeFirst()
  return Number(result.numUpdatedRows) === 1
}

export async function countAttempts(db: Executor, deliveryId: number): Promise<number> {
  const row = await db.selectFrom('webhook_deliveries').select('attempts').where('id', '=', deliveryId).executeTakeFirst()
  return row?.attempts ?? 0
}
