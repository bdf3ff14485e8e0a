import { sql, type Expression, type Transaction } from 'kysely'
import type { Executor } from '../db/database.ts'
import { anyOf, isPostgres, rowsWrite, runWrites } from '../db/dialect.ts'
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

// ---- the delivery worker ----

export interface Claim {
  id: number
  wallet_id: number
  lease_until: string
  /** Attempts made before this one. */
  attempts: number
}

/**
 * Opens a round of the worker, as the first statement of its transaction (nothing on SQLite):
 *
 * - With `claims`, serializes claims across instances for the rest of the transaction (a
 *   transaction-level advisory lock), so that the leases counted per origin and the ones taken next
 *   are one step: two instances claiming at once cannot both fill the same origin's last slots.
 *   SQLite's single writer already serializes them.
 * - The round commits without waiting for its WAL to reach the disk (`synchronous_commit = off`
 *   for this transaction only). A round's commit was an fsync of its own, competing with the
 *   transfers' commits for the disk (about 2.5 ms each on the bench machine). What a round writes
 *   is safe to lose in a crash of the database server (never of the service alone): a lease or an
 *   outcome lost leaves the delivery pending, to be sent again once its lease expires, which
 *   at-least-once delivery allows; the attempt log may then miss that attempt. Cancellations and
 *   removals are written by their own transactions, which wait for the disk as before; so do
 *   the transfers, and each of their commits also makes durable every round written before it.
 */
export async function startRound(trx: Transaction<DB>, options: { claims: boolean }): Promise<void> {
  if (!isPostgres(trx)) return
  const lock = options.claims ? sql`, pg_advisory_xact_lock(${CLAIM_LOCK_KEY})` : sql``
  await sql`select set_config('synchronous_commit', 'off', true)${lock}`.execute(trx)
}

/** The advisory lock key of the webhook claims (any fixed number; "coffer wh" in ASCII). */
const CLAIM_LOCK_KEY = sql.lit(0x636f66666572_7768n)

/**
 * The origins with deliveries due now, with how many of their wallets have some: one short look
 * into each webhook's wallet's pending deliveries (`webhook_deliveries_pending`), so that a round
 * spends nothing on the many origins with nothing to send. Asked before a round's transaction
 * when there is nothing to write, so that a poll with nothing due costs one statement.
 */
export async function listDueOrigins(db: Executor, now: string): Promise<{ origin: string; wallets: number }[]> {
  const rows = await dueOrigins(db, now).orderBy('origin').execute()
  return rows.map((row) => ({ origin: row.origin, wallets: Number(row.wallets) }))
}

/**
 * Each webhook's wallet's first due delivery, as a subquery of one row per webhook: one index
 * probe per wallet, however long its backlog. Written as `(… limit 1) is not null` rather than
 * `exists (…)`, which PostgreSQL turns into a join that reads every due delivery of every wallet
 * (with 6,500 deliveries pending, 2 ms a round, the worker's costliest statement; migration 0012).
 */
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

/**
 * The claim's view, under the claims' lock (`startRound`): the origins with deliveries due
 * (`listDueOrigins`), and the attempts the other delivery workers have in flight to each origin
 * (their rows of `webhook_lease_counts` still within their `lease_until`; this worker knows its
 * own). One statement (a `union all` of the two), where two cost a round trip more per round on
 * PostgreSQL. The count reads a row per worker and busy origin, where counting the deliveries under
 * a live lease read an index entry for every lease of the last 20 s (migration 0014).
 */
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

/** One worker's attempts in flight at one origin, and when the newest of their leases ends. */
export interface LeaseCount {
  origin: string
  leased: number
  leaseUntil: string
}

const LEASE_COUNT_COLUMNS = [
  ['r_instance', 'text'],
  ['r_origin', 'text'],
  ['r_leased', 'bigint'],
  ['r_until', 'text'],
] as const

/**
 * Writes a worker's counts of attempts in flight per origin (`webhook_lease_counts`), in the round
 * that changed them: `counts` are set (inserted or updated), the origins in `gone` (nothing in
 * flight there any more) deleted, so that the table holds only the busy origins. One statement on
 * PostgreSQL (two data-changing CTEs); on SQLite two prepared statements, run once per row. With
 * `keepOnly` (the worker is not sure what its last rows were), every row of the worker for
 * another origin is deleted first, in a statement of its own.
 */
export async function writeLeaseCounts(
  db: Executor,
  instance: string,
  change: { counts: LeaseCount[]; gone: string[]; keepOnly?: string[] },
): Promise<void> {
  if (change.keepOnly) {
    let query = db.deleteFrom('webhook_lease_counts').where('instance', '=', instance)
    if (change.keepOnly.length > 0) query = query.where('origin', 'not in', change.keepOnly)
    await query.execute()
  }
  const counts = change.counts.map((count) => [instance, count.origin, count.leased, count.leaseUntil])
  const gone = change.gone.map((origin) => [instance, origin, 0, ''])
  const writes = []
  if (gone.length > 0) {
    writes.push(
      rowsWrite(
        db,
        LEASE_COUNT_COLUMNS,
        gone,
        (r) => sql`delete from webhook_lease_counts where (instance, origin) in (select r_instance, r_origin from ${r})`,
      ),
    )
  }
  if (counts.length > 0) {
    writes.push(
      rowsWrite(
        db,
        LEASE_COUNT_COLUMNS,
        counts,
        // `where true`: SQLite reads `on conflict` after a bare `select … from` as a join's.
        (
          r,
        ) => sql`insert into webhook_lease_counts (instance, origin, leased, lease_until) select r_instance, r_origin, r_leased, r_until from ${r} where true
          on conflict (instance, origin) do update set leased = excluded.leased, lease_until = excluded.lease_until`,
      ),
    )
  }
  if (writes.length > 0) await runWrites(db, writes)
}

/** Deletes the counts that lapsed (of a worker that died), and with `instance` every count of that worker (it stopped). */
export async function clearLeaseCounts(db: Executor, query: { instance?: string; now: string }): Promise<void> {
  const { instance } = query
  await db
    .deleteFrom('webhook_lease_counts')
    .where((eb) =>
      instance === undefined
        ? eb('lease_until', '<=', query.now)
        : eb.or([eb('instance', '=', instance), eb('lease_until', '<=', query.now)]),
    )
    .execute()
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
 * Leases the given deliveries to this instance until `leaseUntil`, those still pending and not
 * under another live lease, and returns the ones it took with what their attempts need: the
 * event as stored, and the wallet's webhook now (null once removed). A lease left behind by a dead
 * instance expires at `lease_until` and the row becomes claimable again. The lease sets
 * `lease_until` alone, which no index holds (migration 0014): on PostgreSQL mostly a heap-only
 * update. On PostgreSQL one statement (the update, then the reads joined to the rows it returns),
 * where reading the work after the lease cost a statement more per round and a second look up
 * of every leased row by id; SQLite has no update in a `with`, and runs the two in process.
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
      // A hold's event has no transaction and carries its own body.
      .leftJoin('transactions', 'transactions.id', 'events.transaction_id')
      .leftJoin('webhooks', 'webhooks.wallet_id', 'leased.wallet_id')
      .select((eb) => [
        'leased.id',
        'leased.wallet_id',
        'leased.lease_until',
        'leased.attempts',
        'events.event_id',
        'events.type',
        'events.created_at',
        eb.fn.coalesce('events.body', 'transactions.body').as('body'),
        'webhooks.url',
        'webhooks.secret',
      ])
      .execute()
    return rows.map((row) => ({
      ...toClaim(row),
      work:
        row.event_id === null
          ? undefined
          : toWork({ ...row, event_id: row.event_id, type: row.type as string, created_at: row.created_at as string }),
    }))
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

function toWork(row: {
  event_id: string
  type: string
  created_at: string
  body: string | null
  url: string | null
  secret: string | null
}): DeliveryWork {
  return { event_id: row.event_id, payload: eventPayload(row), url: row.url, secret: row.secret }
}

/** What the attempts of the given deliveries need (`leaseDeliveries`), read right after their lease (SQLite). */
async function loadDeliveryWork(db: Executor, deliveryIds: number[]): Promise<Map<number, DeliveryWork>> {
  const rows = await db
    .selectFrom('webhook_deliveries')
    .innerJoin('events', 'events.id', 'webhook_deliveries.event_id')
    // A hold's event has no transaction and carries its own body.
    .leftJoin('transactions', 'transactions.id', 'events.transaction_id')
    .leftJoin('webhooks', 'webhooks.wallet_id', 'webhook_deliveries.wallet_id')
    .select((eb) => [
      'webhook_deliveries.id',
      'events.event_id',
      'events.type',
      'events.created_at',
      eb.fn.coalesce('events.body', 'transactions.body').as('body'),
      'webhooks.url',
      'webhooks.secret',
    ])
    .where(anyOf(db, sql.ref('webhook_deliveries.id'), deliveryIds))
    .execute()
  return new Map(rows.map((row) => [Number(row.id), toWork(row)]))
}

/** Gives our lease back, whatever the delivery's status: the attempt is over and no longer counts against its origin. */
async function releaseDelivery(db: Executor, deliveryId: number, leaseUntil: string): Promise<void> {
  await db
    .updateTable('webhook_deliveries')
    .set({ lease_until: null })
    .where('id', '=', deliveryId)
    .where('lease_until', '=', leaseUntil)
    .execute()
}

export interface AttemptRecord {
  deliveryId: number
  /** The lease the attempt ran under (`Claim.lease_until`). */
  leaseUntil: string
  url: string
  attemptedAt: string
  statusCode: number | null
  latencyMs: number
  error: string | null
  /** What the delivery becomes while it is still pending under that lease; none for an attempt given back at shutdown (due again at once). */
  next?: { status: DeliveryStatus; nextAttemptAt: string | null }
}

const ATTEMPT_COLUMNS = [
  ['r_id', 'bigint'],
  ['r_lease', 'text'],
  ['r_url', 'text'],
  ['r_at', 'text'],
  ['r_code', 'bigint'],
  ['r_latency', 'bigint'],
  ['r_error', 'text'],
  ['r_status', 'text'],
  ['r_next', 'text'],
] as const

/**
 * Writes a round's attempts: logs each (`webhook_attempts`) and counts it on its delivery whatever
 * happened to the delivery meanwhile, and only while the delivery is still pending under the
 * attempt's lease moves it to `next` (when given: the status and when it is due); the lease is
 * dropped when it is still ours (a delivery cancelled meanwhile loses it too, one leased again by
 * another instance keeps its own). Set-based, one table of rows for all of them: one statement on
 * PostgreSQL (two data-changing CTEs), where an UPDATE per attempt cost a round trip each
 * (`docs/performance.md`, "Webhooks at scale, round two"); on SQLite two prepared statements, each
 * run once per row in process (`rowsWrite`).
 */
export async function recordAttempts(db: Executor, attempts: AttemptRecord[], now: string): Promise<void> {
  if (attempts.length === 0) return
  const rows = attempts.map((a) => [
    a.deliveryId,
    a.leaseUntil,
    a.url,
    a.attemptedAt,
    a.statusCode,
    a.latencyMs,
    a.error,
    a.next?.status ?? null,
    a.next?.nextAttemptAt ?? null,
  ])
  // Every value but the rows' is a literal (`rowsWrite`: on SQLite one prepared text serves each row).
  const ours = sql`webhook_deliveries.status = ${PENDING} and webhook_deliveries.lease_until = r.r_lease and r.r_status is not null`
  await runWrites(db, [
    rowsWrite(
      db,
      ATTEMPT_COLUMNS,
      rows,
      (r) =>
        sql`insert into webhook_attempts (delivery_id, attempted_at, status_code, latency_ms, error) select r_id, r_at, r_code, r_latency, r_error from ${r}`,
    ),
    rowsWrite(
      db,
      ATTEMPT_COLUMNS,
      rows,
      (r) => sql`update webhook_deliveries set
        attempts = webhook_deliveries.attempts + 1,
        url = r.r_url,
        last_status_code = r.r_code,
        last_error = r.r_error,
        updated_at = ${sql.lit(now)},
        status = case when ${ours} then r.r_status else webhook_deliveries.status end,
        next_attempt_at = case when ${ours} then r.r_next else webhook_deliveries.next_attempt_at end,
        lease_until = case when webhook_deliveries.lease_until = r.r_lease then null else webhook_deliveries.lease_until end
        from ${r} where webhook_deliveries.id = r.r_id`,
    ),
  ])
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
