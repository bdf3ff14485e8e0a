import { sql, type Expression, type Transaction } from 'kysely'
import type { Executor } from '../db/database.ts'
import { anyOf, isPostgres } from '../db/dialect.ts'
import type { DB } from '../db/tables.ts'
import type { DueDelivery } from './claims.ts'
import { PENDING, type Claim } from './deliveries.repository.ts'
import { deliveryEventColumns, deliveryPublicId, DELIVERY_EVENT_BODY, derivedTransaction } from './derived-events.ts'
import { eventPayload } from './outbox.ts'

/** SQL of the worker's claims: a round's opening, the due origins and deliveries, and their leases. */

/**
 * PostgreSQL: an advisory lock serializes claims across instances (with `claims`), and the round
 * commits without waiting for the disk: a lease lost in a crash only means a second attempt.
 */
export async function startRound(trx: Transaction<DB>, options: { claims: boolean }): Promise<void> {
  if (!isPostgres(trx)) return
  const lock = options.claims ? sql`, pg_advisory_xact_lock(${CLAIM_LOCK_KEY})` : sql``
  await sql`select set_config('synchronous_commit', 'off', true)${lock}`.execute(trx)
}

/** The advisory lock key of the webhook claims (any fixed number; "coffer wh" in ASCII). */
const CLAIM_LOCK_KEY = sql.lit(0x636f66666572_7768n)

/** The origins with deliveries due now and how many wallets have some: an idle poll costs one statement. */
export async function listDueOrigins(db: Executor, now: string): Promise<{ origin: string; wallets: number }[]> {
  const rows = await dueOrigins(db, now).orderBy('origin').execute()
  return rows.map((row) => ({ origin: row.origin, wallets: Number(row.wallets) }))
}

/** One index probe per wallet; `(… limit 1) is not null`, as PostgreSQL plans `exists` as a join over every due row. */
function dueOrigins(db: Executor, now: string) {
  return db
    .selectFrom('webhooks')
    .select((eb) => ['webhooks.origin', eb.fn.countAll<number | string>().as('wallets'), sql<number | string>`0`.as('leased')])
    .where(({ eb, selectFrom }) =>
      eb(
        selectFrom('webhook_deliveries')
          .select('webhook_deliveries.id')
          .whereRef('webhook_deliveries.wallet_id', '=', 'webhooks.wallet_id')
          .where('webhook_deliveries.status', '=', PENDING)
          .where('webhook_deliveries.next_attempt_at', '<=', now)
          .where((eb) => eb.or([eb('webhook_deliveries.lease_until', 'is', null), eb('webhook_deliveries.lease_until', '<=', now)]))
          .orderBy('webhook_deliveries.next_attempt_at')
          .orderBy('webhook_deliveries.id')
          .limit(1),
        'is not',
        null,
      ),
    )
    .groupBy('webhooks.origin')
}

/** The due origins and the other workers' live leases per origin, in one statement. */
export async function findDueOriginsAndLeases(
  db: Executor,
  query: { now: string; instance: string },
): Promise<{ due: { origin: string; wallets: number }[]; leased: Map<string, number> }> {
  const rows = await dueOrigins(db, query.now)
    .unionAll(
      db
        .selectFrom('webhook_lease_counts')
        .select((eb) => ['origin', sql<number | string>`0`.as('wallets'), eb.fn.sum<number | string>('leased').as('leased')])
        .where('lease_until', '>', query.now)
        .where('instance', '<>', query.instance)
        .groupBy('origin'),
    )
    .execute()
  const due: { origin: string; wallets: number }[] = []
  const leased = new Map<string, number>()
  for (const row of rows) {
    if (Number(row.wallets) > 0) due.push({ origin: row.origin, wallets: Number(row.wallets) })
    if (Number(row.leased) > 0) leased.set(row.origin, Number(row.leased))
  }
  due.sort((a, b) => (a.origin < b.origin ? -1 : a.origin > b.origin ? 1 : 0))
  return { due, leased }
}

/** Up to `perWallet` due deliveries of each wallet at `origin`, oldest first: one short index range per wallet. */
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

export interface DeliveryWork {
  event_id: string
  payload: string
  /** The wallet's webhook now; null once it was removed. */
  url: string | null
  secret: string | null
}

/** A delivery leased by this worker, with what its attempt needs (undefined when its event is gone). */
export type LeasedDelivery = Claim & { work: DeliveryWork | undefined }

/**
 * Leases those still pending and free until `leaseUntil`, with their event and the wallet's current
 * webhook (null once removed). A dead instance's lease expires and the row is claimable again.
 */
export async function leaseDeliveries(db: Executor, lease: { ids: number[]; now: string; leaseUntil: string }): Promise<LeasedDelivery[]> {
  if (lease.ids.length === 0) return []
  const update = db
    .updateTable('webhook_deliveries')
    .set({ lease_until: lease.leaseUntil })
    .where(anyOf(db, sql.ref('id'), lease.ids))
    .where('status', '=', 'pending')
    .where((eb) => eb.or([eb('lease_until', 'is', null), eb('lease_until', '<=', lease.now)]))
    .returning(['id', 'wallet_id', 'lease_until', 'attempts', 'event_id'])
  if (isPostgres(db)) {
    const rows = await db
      .with('leased', () => update)
      .selectFrom('leased')
      .leftJoin('events', 'events.id', 'leased.event_id')
      // A hold's event has no transaction and carries its own body; a derived one's is its transaction's.
      .leftJoin('transactions', 'transactions.id', 'events.transaction_id')
      .leftJoin('transactions as dt', (join) => join.on(derivedTransaction('leased.event_id')))
      .leftJoin('webhooks', 'webhooks.wallet_id', 'leased.wallet_id')
      .select([
        'leased.id',
        'leased.wallet_id',
        'leased.lease_until',
        'leased.attempts',
        'leased.event_id',
        ...deliveryEventColumns('leased.event_id'),
        DELIVERY_EVENT_BODY,
        'webhooks.url',
        'webhooks.secret',
      ])
      .execute()
    return rows.map((row) => ({ ...toClaim(row), work: toWork(row) }))
  }
  const claims = (await update.execute()).map(toClaim)
  if (claims.length === 0) return []
  const work = await loadDeliveryWork(
    db,
    claims.map((claim) => claim.id),
  )
  return claims.map((claim) => ({ ...claim, work: work.get(claim.id) }))
}

function toClaim(row: { id: number; wallet_id: number; lease_until: string | null; attempts: number }): Claim {
  return { id: Number(row.id), wallet_id: Number(row.wallet_id), lease_until: row.lease_until as string, attempts: Number(row.attempts) }
}

/** What an attempt needs; undefined when the delivery's event is gone. */
function toWork(row: {
  event_id: number | string
  stored_event_id: string | null
  type: string | null
  event_created_at: string | null
  salt: string | null
  body: string | null
  url: string | null
  secret: string | null
}): DeliveryWork | undefined {
  const eventId = deliveryPublicId(row)
  if (eventId === null || row.type === null) return undefined
  const payload = eventPayload({ type: row.type, event_id: eventId, created_at: row.event_created_at as string, body: row.body })
  return { event_id: eventId, payload, url: row.url, secret: row.secret }
}

/** What the attempts of the given deliveries need (`leaseDeliveries`), read right after their lease (SQLite). */
async function loadDeliveryWork(db: Executor, deliveryIds: number[]): Promise<Map<number, DeliveryWork>> {
  const rows = await db
    .selectFrom('webhook_deliveries')
    .leftJoin('events', 'events.id', 'webhook_deliveries.event_id')
    // A hold's event has no transaction and carries its own body; a derived one's is its transaction's.
    .leftJoin('transactions', 'transactions.id', 'events.transaction_id')
    .leftJoin('transactions as dt', (join) => join.on(derivedTransaction('webhook_deliveries.event_id')))
    .leftJoin('webhooks', 'webhooks.wallet_id', 'webhook_deliveries.wallet_id')
    .select([
      'webhook_deliveries.id',
      'webhook_deliveries.event_id',
      ...deliveryEventColumns('webhook_deliveries.event_id'),
      DELIVERY_EVENT_BODY,
      'webhooks.url',
      'webhooks.secret',
    ])
    .where(anyOf(db, sql.ref('webhook_deliveries.id'), deliveryIds))
    .execute()
  const work = new Map<number, DeliveryWork>()
  for (const row of rows) {
    const found = toWork(row)
    if (found) work.set(Number(row.id), found)
  }
  return work
}
