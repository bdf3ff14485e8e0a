import { sql } from 'kysely'
import type { Trx } from '../db/database.ts'
import { anyOf, forUpdate, isPostgres } from '../db/dialect.ts'
import { DERIVED_FROM } from '../events/derived-events.ts'

/** SQL of the retention job: each function deletes at most one batch and says how many rows went. */

const FINAL_STATUSES = ['delivered', 'failed', 'cancelled']

/** Two-number advisory lock space, apart from the wallets' one-number keys. */
const RETENTION_LOCK = sql`pg_try_advisory_xact_lock(1129727570, 1)`

/** Takes the job's turn for this database transaction (PostgreSQL); false when another instance holds it. SQLite has one writer. */
export async function takeRetentionTurn(trx: Trx): Promise<boolean> {
  if (!isPostgres(trx)) return true
  const { rows } = await sql<{ taken: boolean }>`select ${RETENTION_LOCK} as taken`.execute(trx)
  return rows[0].taken
}

/** The next page by id of rows older than `before`, and whether it reached newer ones: old rows read once. */
async function findOldRows(
  trx: Trx,
  table: 'events' | 'webhook_deliveries' | 'key_uses',
  afterId: number,
  before: string,
  limit: number,
): Promise<{ ids: number[]; lastId: number; reachedNewer: boolean }> {
  const rows = await trx.selectFrom(table).select(['id', 'created_at']).where('id', '>', afterId).orderBy('id').limit(limit).execute()
  const ids: number[] = []
  let reachedNewer = rows.length < limit
  for (const row of rows) {
    if (row.created_at >= before) {
      reachedNewer = true
      break
    }
    ids.push(Number(row.id))
  }
  return { ids, lastId: rows.length > 0 ? Number(rows[rows.length - 1].id) : afterId, reachedNewer }
}

/** Deletes a page of deliveries that ended before `before`, with their attempts. */
export async function deleteEndedDeliveries(
  trx: Trx,
  afterId: number,
  before: string,
  limit: number,
): Promise<{ deliveries: number; attempts: number; lastId: number; reachedNewer: boolean }> {
  const page = await findOldRows(trx, 'webhook_deliveries', afterId, before, limit)
  const done = { deliveries: 0, attempts: 0, lastId: page.lastId, reachedNewer: page.reachedNewer }
  if (page.ids.length === 0) return done
  // Locked as they are checked, so that a delivery retried meanwhile keeps its attempt log.
  const ids = (
    await forUpdate(
      trx
        .selectFrom('webhook_deliveries')
        .select('id')
        .where(anyOf(trx, sql.ref('id'), page.ids))
        .where('status', 'in', FINAL_STATUSES)
        .where('updated_at', '<', before),
      trx,
    ).execute()
  ).map((row) => Number(row.id))
  if (ids.length === 0) return done
  const attempts = await trx
    .deleteFrom('webhook_attempts')
    .where(anyOf(trx, sql.ref('delivery_id'), ids))
    .executeTakeFirst()
  const deliveries = await trx
    .deleteFrom('webhook_deliveries')
    .where(anyOf(trx, sql.ref('id'), ids))
    .executeTakeFirst()
  return { ...done, deliveries: Number(deliveries.numDeletedRows), attempts: Number(attempts.numDeletedRows) }
}

/** The next page of events after `afterId` (`findOldRows`). */
export async function findOldEvents(
  trx: Trx,
  afterId: number,
  before: string,
  limit: number,
): Promise<{ ids: number[]; lastId: number; reachedNewer: boolean }> {
  return findOldRows(trx, 'events', afterId, before, limit)
}

/** Deletes those of the events that no delivery refers to any more (a pending one keeps its event). */
export async function deleteUnreferencedEvents(trx: Trx, ids: number[]): Promise<number> {
  if (ids.length === 0) return 0
  const result = await trx
    .deleteFrom('events')
    .where(anyOf(trx, sql.ref('id'), ids))
    .where(({ not, exists, selectFrom }) =>
      not(
        exists(selectFrom('webhook_deliveries').select('webhook_deliveries.id').whereRef('webhook_deliveries.event_id', '=', 'events.id')),
      ),
    )
    .executeTakeFirst()
  return Number(result.numDeletedRows)
}

/**
 * The lowest transaction an event still needs the body of (its payload's data): one an event row
 * names, or one a delivery's derived event comes from (`events/derived-events.ts`); undefined when none.
 */
export async function findFirstEventTransaction(trx: Trx): Promise<number | undefined> {
  const { rows } = await sql<{ stored: number | string | null; derived: number | string | null }>`
    select (select min(transaction_id) from events) as stored,
      (select min(event_id) / 2 from webhook_deliveries
        where event_id >= 2 * ${DERIVED_FROM}) as derived`.execute(trx)
  const firsts = [rows[0].stored, rows[0].derived].filter((first) => first !== null).map(Number)
  return firsts.length === 0 ? undefined : Math.min(...firsts)
}

/**
 * Clears the `body` of the next page of transactions after where the last page stopped, up to the
 * first one that is at or after `before` or that `below` (the first an event names) does not pass.
 */
export async function clearTransactionBodies(
  trx: Trx,
  before: string,
  below: number,
  limit: number,
): Promise<{ cleared: number; reachedNewer: boolean }> {
  const state = await forUpdate(trx.selectFrom('retention_state').select('bodies_cleared_to').where('id', '=', 1), trx).executeTakeFirst()
  if (!state) return { cleared: 0, reachedNewer: true }
  const after = Number(state.bodies_cleared_to)
  const rows = await trx
    .selectFrom('transactions')
    .select(['id', 'created_at'])
    .where('id', '>', after)
    .orderBy('id')
    .limit(limit)
    .execute()
  let upTo = after
  let reachedNewer = rows.length < limit
  for (const row of rows) {
    if (row.created_at >= before || Number(row.id) >= below) {
      reachedNewer = true
      break
    }
    upTo = Number(row.id)
  }
  if (upTo === after) return { cleared: 0, reachedNewer }
  const result = await trx
    .updateTable('transactions')
    .set({ body: null })
    .where('id', '>', after)
    .where('id', '<=', upTo)
    .where('body', 'is not', null)
    .executeTakeFirst()
  await trx.updateTable('retention_state').set({ bodies_cleared_to: upTo }).where('id', '=', 1).execute()
  return { cleared: Number(result.numUpdatedRows), reachedNewer }
}

/**
 * Deletes, of the next page of key uses older than `before`, those no `per_day` cap reads again: a
 * hold's use, and a use without a hold that a later one older than `before` follows (the newest such
 * use of a key and asset stays, as the base of its running total).
 */
export async function deleteSpentKeyUses(
  trx: Trx,
  afterId: number,
  before: string,
  limit: number,
): Promise<{ removed: number; lastId: number; reachedNewer: boolean }> {
  const page = await findOldRows(trx, 'key_uses', afterId, before, limit)
  const done = { removed: 0, lastId: page.lastId, reachedNewer: page.reachedNewer }
  if (page.ids.length === 0) return done
  const result = await sql`
    delete from key_uses where ${anyOf(trx, sql.ref('id'), page.ids)} and (hold_id is not null or exists (
      select 1 from key_uses n
      where n.key_id = key_uses.key_id and n.asset_id = key_uses.asset_id and n.hold_id is null and n.created_at < ${before}
        and (n.created_at > key_uses.created_at or (n.created_at = key_uses.created_at and n.id > key_uses.id))))`.execute(trx)
  return { ...done, removed: Number(result.numAffectedRows ?? 0) }
}

export async function deleteIdempotencyKeys(trx: Trx, before: string, limit: number): Promise<number> {
  const result = await sql`
    delete from idempotency_keys where (wallet_id, key) in (
      select wallet_id, key from idempotency_keys where created_at < ${before} limit ${limit})`.execute(trx)
  return Number(result.numAffectedRows ?? 0)
}

/** User sessions past their lifetime, or idle for longer than allowed (`idleBefore`, when there is an idle limit). */
export async function deleteExpiredUserSessions(trx: Trx, now: string, idleBefore: string | undefined, limit: number): Promise<number> {
  const ids = (
    await trx
      .selectFrom('user_sessions')
      .select('id')
      .where((eb) =>
        idleBefore ? eb.or([eb('expires_at', '<=', now), eb('last_used_at', '<=', idleBefore)]) : eb('expires_at', '<=', now),
      )
      .limit(limit)
      .execute()
  ).map((row) => row.id)
  if (ids.length === 0) return 0
  const result = await trx
    .deleteFrom('user_sessions')
    .where(anyOf(trx, sql.ref('id'), ids))
    .executeTakeFirst()
  return Number(result.numDeletedRows)
}

/** Counters of rate-limit windows that ended before `beforeMs`. */
export async function deleteEndedRateLimitWindows(trx: Trx, beforeMs: number): Promise<number> {
  const result = await trx.deleteFrom('rate_limit_hits').where('window_start', '<', beforeMs).executeTakeFirst()
  return Number(result.numDeletedRows)
}
