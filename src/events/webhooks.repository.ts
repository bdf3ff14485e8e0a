import { sql } from 'kysely'
import type { Executor } from '../db/database.ts'
import { anyOf } from '../db/dialect.ts'
import { PENDING, type DeliveryStatus } from './deliveries.repository.ts'
import { deliveryEventColumns, deliveryPublicId, derivedTransaction } from './derived-events.ts'
import { webhookOrigin } from './origins.ts'

/** SQL for webhooks and their delivery log, as the routes read and write them (the worker's: `deliveries.repository.ts`). */

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
export async function upsertWebhook(
  db: Executor,
  webhook: { walletId: number; url: string; secret: string; createdAt: string },
): Promise<void> {
  const origin = webhookOrigin(webhook.url)
  await db
    .insertInto('webhooks')
    .values({ wallet_id: webhook.walletId, url: webhook.url, origin, secret: webhook.secret, created_at: webhook.createdAt })
    .onConflict((oc) =>
      oc.column('wallet_id').doUpdateSet({ url: webhook.url, origin, secret: webhook.secret, created_at: webhook.createdAt }),
    )
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
  await db
    .updateTable('webhook_deliveries')
    .set({ url, updated_at: now })
    .where('wallet_id', '=', walletId)
    .where('status', '=', PENDING)
    .execute()
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
  'webhook_deliveries.event_id',
  ...deliveryEventColumns('webhook_deliveries.event_id'),
] as const

/**
 * The deliveries with their events (a derived one's from its transaction, `derived-events.ts`); a
 * delivery whose event is gone is not listed.
 */
function deliveriesWithEvents(db: Executor) {
  return db
    .selectFrom('webhook_deliveries')
    .leftJoin('events', 'events.id', 'webhook_deliveries.event_id')
    .leftJoin('transactions as dt', (join) => join.on(derivedTransaction('webhook_deliveries.event_id')))
    .where((eb) => eb.or([eb('events.id', 'is not', null), eb('dt.id', 'is not', null)]))
}

/** A delivery as listed: its event's public id and type. */
function toListed<
  R extends {
    event_id: number | string
    stored_event_id: string | null
    event_created_at: string | null
    salt: string | null
    type: string | null
  },
>(row: R) {
  const { stored_event_id: _stored, event_created_at: _at, salt: _salt, ...rest } = row
  return { ...rest, event_id: deliveryPublicId(row) as string, type: row.type as string }
}

/** A page of the wallet's deliveries, newest first. */
export async function listDeliveries(db: Executor, walletId: number, page: { limit: number; offset: number; status?: DeliveryStatus }) {
  let query = deliveriesWithEvents(db).select(DELIVERY_COLUMNS).where('webhook_deliveries.wallet_id', '=', walletId)
  if (page.status !== undefined) query = query.where('webhook_deliveries.status', '=', page.status)
  return (await query.orderBy('webhook_deliveries.id', 'desc').limit(page.limit).offset(page.offset).execute()).map(toListed)
}

export async function findDelivery(db: Executor, walletId: number, deliveryId: number) {
  const row = await deliveriesWithEvents(db)
    .select([...DELIVERY_COLUMNS, 'webhook_deliveries.lease_until'])
    .where('webhook_deliveries.wallet_id', '=', walletId)
    .where('webhook_deliveries.id', '=', deliveryId)
    .executeTakeFirst()
  return row && toListed(row)
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
export async function findBacklogs(
  db: Executor,
  walletId?: number,
): Promise<{ origin: string; wallet_id: number; pending: number; oldest: string | null }[]> {
  let query = db
    .selectFrom('webhook_deliveries')
    .leftJoin('webhooks', 'webhooks.wallet_id', 'webhook_deliveries.wallet_id')
    .select((eb) => [
      'webhooks.origin',
      'webhook_deliveries.wallet_id',
      eb.fn.countAll<number | string>().as('pending'),
      eb.fn.min('webhook_deliveries.id').as('first'),
    ])
    .where('webhook_deliveries.status', '=', PENDING)
    .groupBy(['webhooks.origin', 'webhook_deliveries.wallet_id'])
  if (walletId !== undefined) query = query.where('webhook_deliveries.wallet_id', '=', walletId)
  const rows = await query.execute()
  if (rows.length === 0) return []
  const firsts = await db
    .selectFrom('webhook_deliveries')
    .select(['id', 'created_at'])
    .where(
      anyOf(
        db,
        sql.ref('id'),
        rows.map((row) => Number(row.first)),
      ),
    )
    .execute()
  const queuedAt = new Map(firsts.map((row) => [Number(row.id), row.created_at]))
  return rows.map((row) => ({
    origin: row.origin ?? '',
    wallet_id: Number(row.wallet_id),
    pending: Number(row.pending),
    oldest: queuedAt.get(Number(row.first)) ?? null,
  }))
}

/** Makes a delivery due now (again), whatever its status; an attempt in flight is left to finish. */
export async function requeueDelivery(db: Executor, deliveryId: number, url: string, now: string): Promise<void> {
  await db
    .updateTable('webhook_deliveries')
    .set({ status: 'pending', next_attempt_at: now, url, updated_at: now })
    .where('id', '=', deliveryId)
    .execute()
}
