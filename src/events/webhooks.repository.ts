import { sql, type Expression, type Transaction } from 'kysely'
import type { Executor } from '../db/database.ts'
import { anyOf, isPostgres } from '../db/dialect.ts'
import type { DB } from '../db/tables.ts'
import { webhookOrigin, type DueDelivery } from './origins.ts'
import { eventPayload } from './outbox.ts'

/** SQL for webhooks and their delivery log: the routes' reads and writes, and the worker's claims. */

export type DeliveryStatus = 'pending' | 'delivered' | 'failed' | 'cancelled'

/**
 * `'pending'` written into the statement rather than bound: SQLite uses a partial index
 * (`webhook_deliveries_pending`, `where status = 'pending'`) only when the query's own condition
 * says so in its text, which a parameter does not.
 */
const PENDING = sql.lit('pending')

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

/** Sets the wallet's one webhook, replacing any other; its origin is kept beside it for the worker. */
export async function upsertWebhook(db: Executor, webhook: { walletId: number; url: string; secret: string; createdAt: string }): Promise<void> {
  const origin = webhookOrigin(webhook.url)
  await db
    .insertInto('webhooks')
    .values({ wallet_id: webhook.walletId, url: webhook.url, origin, secret: webhook.secret, created_at: webhook.createdAt })
    .onConflict((oc) => oc.column('wallet_id').doUpdateSet({ url: webhook.url, origin, secret: webhook.secret, created_at: webhook.createdAt }))
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
  await db.updateTable('webhook_deliveries').set({ url, updated_at: now }).where('wallet_id', '=', walletId).where('status', '=', PENDING).execute()
}

/** Cancels every pending delivery of the wallet; in-flight ones keep their lease but cannot succeed it. */
export async function cancelPendingDeliveries(db: Executor, walletId: number, now: string, reason: string): Promise<void> {
  await db
    .updateTable('webhook_deliveries')
    .set({ status: 'cancelled', next_attempt_at: null, last_error: reason, updated_at: now })
    .where('wallet_id', '=', walletId)
    .where('status', '=', PENDING)
    .execute()
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

/**
 * The backlog per wallet (and its webhook's origin): pending deliveries and when the oldest of them
 * was queued, for one wallet or for all. Counted on the pending index; the oldest is the lowest id
 * (deliveries are numbered as they are queued), whose row gives its time.
 */
export async function findBacklogs(db: Executor, walletId?: number): Promise<{ origin: string; wallet_id: number; pending: number; oldest: string | null }[]> {
  let query = db
    .selectFrom('webhook_deliveries')
    .leftJoin('webhooks', 'webhooks.wallet_id', 'webhook_deliveries.wallet_id')
    .select((eb) => ['webhooks.origin', 'webhook_deliveries.wallet_id', eb.fn.countAll<number | string>().as('pending'), eb.fn.min('webhook_deliveries.id').as('first')])
    .where('webhook_deliveries.status', '=', PENDING)
    .groupBy(['webhooks.origin', 'webhook_deliveries.wallet_id'])
  if (walletId !== undefined) query = query.where('webhook_deliveries.wallet_id', '=', walletId)
  const rows = await query.execute()
  if (rows.length === 0) return []
  const firsts = await db
    .selectFrom('webhook_deliveries')
    .select(['id', 'created_at'])
    .where(anyOf(db, sql.ref('id'), rows.map((row) => Number(row.first))))
    .execute()
  const queuedAt = new Map(firsts.map((row) => [Number(row.id), row.created_at]))
  return rows.map((row) => ({ origin: row.origin ?? '', wallet_id: Number(row.wallet_id), pending: Number(row.pending), oldest: queuedAt.get(Number(row.first)) ?? null }))
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
  /** Attempts made before this one. */
  attempts: number
}

/**
 * Serializes claims across instances for the rest of the transaction (a transaction-level advisory
 * lock on PostgreSQL), so that the leases counted per origin and the ones taken next are one step:
 * two instances claiming at once cannot both fill the same origin's last slots. SQLite's single
 * writer already serializes them.
 */
export async function lockClaims(trx: Transaction<DB>): Promise<void> {
  if (isPostgres(trx)) await sql`select pg_advisory_xact_lock(${CLAIM_LOCK_KEY})`.execute(trx)
}

/** The advisory lock key of the webhook claims (any fixed number; "coffer wh" in ASCII). */
const CLAIM_LOCK_KEY = sql.lit(0x636f66666572_7768n)

/**
 * The origins with deliveries due now, with how many of their wallets have some: one statement,
 * one short look into each webhook's wallet's pending deliveries (`webhook_deliveries_pending`),
 * so that a round spends nothing on the many origins with nothing to send.
 */
export async function listDueOrigins(db: Executor, now: string): Promise<{ origin: string; wallets: number }[]> {
  const rows = await db
    .selectFrom('webhooks')
    .select((eb) => ['webhooks.origin', eb.fn.countAll<number | string>().as('wallets')])
    .where(({ exists, selectFrom }) =>
      exists(
        selectFrom('webhook_deliveries')
          .select('webhook_deliveries.id')
          .whereRef('webhook_deliveries.wallet_id', '=', 'webhooks.wallet_id')
          .where('webhook_deliveries.status', '=', PENDING)
          .where('webhook_deliveries.next_attempt_at', '<=', now)
          .where((eb) => eb.or([eb('webhook_deliveries.lease_until', 'is', null), eb('webhook_deliveries.lease_until', '<=', now)])),
      ),
    )
    .groupBy('webhooks.origin')
    .orderBy('webhooks.origin')
    .execute()
  return rows.map((row) => ({ origin: row.origin, wallets: Number(row.wallets) }))
}

/** Deliveries in flight on any instance (under a lease not yet expired), per origin of their wallet's webhook. */
export async function countLeasesByOrigin(db: Executor, now: string): Promise<Map<string, number>> {
  const rows = await db
    .selectFrom('webhook_deliveries')
    .innerJoin('webhooks', 'webhooks.wallet_id', 'webhook_deliveries.wallet_id')
    .select((eb) => ['webhooks.origin', eb.fn.countAll<number | string>().as('leased')])
    .where('webhook_deliveries.lease_until', 'is not', null)
    .where('webhook_deliveries.lease_until', '>', now)
    .groupBy('webhooks.origin')
    .execute()
  return new Map(rows.map((row) => [row.origin, Number(row.leased)]))
}

/**
 * Up to `perWallet` due deliveries (pending, due, not under a live lease) of each wallet whose
 * webhook is at `origin`, each wallet's oldest first: one short index range per wallet
 * (`webhook_deliveries_pending`), however long any wallet's backlog is. One statement with a
 * lateral join on PostgreSQL; on SQLite, in process, one statement per wallet.
 */
export async function findDueDeliveries(db: Executor, query: { origin: string; now: string; perWallet: number }): Promise<DueDelivery[]> {
  const due = (walletId: Expression<number>) =>
    db
      .selectFrom('webhook_deliveries')
      .select(['id', 'wallet_id', 'next_attempt_at'])
      .where('wallet_id', '=', walletId)
      .where('status', '=', PENDING)
      .where('next_attempt_at', '<=', query.now)
      .where((eb) => eb.or([eb('lease_until', 'is', null), eb('lease_until', '<=', query.now)]))
      .orderBy('next_attempt_at')
      .orderBy('id')
      .limit(query.perWallet)
  if (isPostgres(db)) {
    const rows = await db
      .selectFrom('webhooks')
      .innerJoinLateral(
        (eb) => due(eb.ref('webhooks.wallet_id')).as('due'),
        (join) => join.onTrue(),
      )
      .select(['due.id', 'due.wallet_id', 'due.next_attempt_at'])
      .where('webhooks.origin', '=', query.origin)
      .execute()
    return rows.map(toDueDelivery)
  }
  const wallets = await db.selectFrom('webhooks').select('wallet_id').where('origin', '=', query.origin).execute()
  const found: DueDelivery[] = []
  for (const { wallet_id } of wallets) for (const row of await due(sql.val(wallet_id)).execute()) found.push(toDueDelivery(row))
  return found
}

function toDueDelivery(row: { id: number; wallet_id: number; next_attempt_at: string | null }): DueDelivery {
  return { id: Number(row.id), wallet_id: Number(row.wallet_id), next_attempt_at: row.next_attempt_at ?? '' }
}

/**
 * Leases the given deliveries to this instance until `leaseUntil`, those still pending and not
 * under another live lease, and returns the ones it took. A lease left behind by a dead instance
 * expires at `lease_until` and the row becomes claimable again.
 */
export async function leaseDeliveries(db: Executor, lease: { ids: number[]; now: string; leaseUntil: string }): Promise<Claim[]> {
  if (lease.ids.length === 0) return []
  const rows = await db
    .updateTable('webhook_deliveries')
    .set({ lease_until: lease.leaseUntil })
    .where(anyOf(db, sql.ref('id'), lease.ids))
    .where('status', '=', 'pending')
    .where((eb) => eb.or([eb('lease_until', 'is', null), eb('lease_until', '<=', lease.now)]))
    .returning(['id', 'wallet_id', 'lease_until', 'attempts'])
    .execute()
  return rows.map((row) => ({ id: Number(row.id), wallet_id: Number(row.wallet_id), lease_until: row.lease_until as string, attempts: Number(row.attempts) }))
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

/** Gives our lease back, whatever the delivery's status: the attempt is over and no longer counts against its origin. */
async function releaseDelivery(db: Executor, deliveryId: number, leaseUntil: string): Promise<void> {
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

/** Logs attempts (one statement for all of a round's). */
export async function insertAttempts(db: Executor, attempts: AttemptRecord[]): Promise<void> {
  if (attempts.length === 0) return
  await db
    .insertInto('webhook_attempts')
    .values(
      attempts.map((attempt) => ({
        delivery_id: attempt.deliveryId,
        attempted_at: attempt.attemptedAt,
        status_code: attempt.statusCode,
        latency_ms: attempt.latencyMs,
        error: attempt.error,
      })),
    )
    .execute()
}

/**
 * Counts an attempt on its delivery whatever happened to the delivery meanwhile, and in the same
 * statement, only while the delivery is still pending under our lease, moves it to `next` (when
 * given: the status and when it is due) and drops the lease; a delivery cancelled meanwhile loses
 * our lease too, one leased again by another instance keeps its own.
 */
export async function recordAttempt(
  db: Executor,
  claim: Claim,
  attempt: { url: string; statusCode: number | null; error: string | null },
  next: { status: DeliveryStatus; nextAttemptAt: string | null } | undefined,
  now: string,
): Promise<void> {
  const ours = sql<boolean>`status = ${PENDING} and lease_until = ${claim.lease_until}`
  await db
    .updateTable('webhook_deliveries')
    .set((eb) => ({
      attempts: eb('attempts', '+', 1),
      url: attempt.url,
      last_status_code: attempt.statusCode,
      last_error: attempt.error,
      updated_at: now,
      ...(next ? { status: sql`case when ${ours} then ${next.status} else status end`, next_attempt_at: sql`case when ${ours} then ${next.nextAttemptAt} else next_attempt_at end` } : {}),
      lease_until: sql`case when lease_until = ${claim.lease_until} then null else lease_until end`,
    }))
    .where('id', '=', claim.id)
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
  if (Number(result.numUpdatedRows) === 1) return true
  // Cancelled meanwhile: the attempt is over all the same, so its lease no longer counts against the origin.
  await releaseDelivery(db, claim.id, claim.lease_until)
  return false
}
