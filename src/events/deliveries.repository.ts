import { sql } from 'kysely'
import type { Executor } from '../db/database.ts'
import { rowsWrite, runWrites } from '../db/dialect.ts'

/** SQL of what the worker writes besides its claims (`claims.repository.ts`): outcomes, settlements, its lease counts. */

export type DeliveryStatus = 'pending' | 'delivered' | 'failed' | 'cancelled'

/** Written into the statement, not bound: SQLite uses the partial index `webhook_deliveries_pending` only then. */
export const PENDING = sql.lit('pending')

export interface Claim {
  id: number
  wallet_id: number
  lease_until: string
  /** Attempts made before this one. */
  attempts: number
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
  /** None for an attempt given back at shutdown (due again at once). */
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

/** Logs a round's attempts and moves each delivery to `next`, only while still pending under our lease. */
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
        sql`insert into webhook_attempts (delivery_id, attempted_at, status_code, latency_ms, error)
          select r_id, r_at, r_code, r_latency, r_error from ${r}`,
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

/** Moves a delivery on while still pending under our lease; false when it was not ours any more. */
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

/** A worker's in-flight counts per origin: `counts` upserted, `gone` deleted; `keepOnly` rewrites them all. */
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
        (r) => sql`insert into webhook_lease_counts (instance, origin, leased, lease_until)
          select r_instance, r_origin, r_leased, r_until from ${r} where true
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
