import { sql } from 'kysely'
import type { Executor, Trx } from '../db/database.ts'
import { forUpdate } from '../db/dialect.ts'
import type { ScheduleRunsTable, SchedulesTable } from '../db/tables.ts'
import type { Insertable, Selectable, Updateable } from 'kysely'

/** The SQL of schedules and their runs. */

export type ScheduleRow = Selectable<SchedulesTable>

export async function insertSchedule(db: Executor, row: Insertable<SchedulesTable>): Promise<ScheduleRow> {
  return db.insertInto('schedules').values(row).returningAll().executeTakeFirstOrThrow()
}

export function findSchedule(db: Executor, walletId: number, id: number): Promise<ScheduleRow | undefined> {
  return db.selectFrom('schedules').selectAll().where('id', '=', id).where('wallet_id', '=', walletId).executeTakeFirst()
}

/** The schedule, locked for the rest of the transaction (PostgreSQL; SQLite has one writer). */
export function lockSchedule(trx: Trx, id: number): Promise<ScheduleRow | undefined> {
  return forUpdate(trx.selectFrom('schedules').selectAll().where('id', '=', id), trx).executeTakeFirst()
}

export async function updateSchedule(trx: Trx, id: number, changes: Updateable<SchedulesTable>): Promise<ScheduleRow> {
  return trx.updateTable('schedules').set(changes).where('id', '=', id).returningAll().executeTakeFirstOrThrow()
}

export interface ScheduleFilter {
  walletId: number
  limit: number
  before?: number
  after?: number
  status?: string
}

/** A page of the wallet's schedules, newest first, and whether more exist. */
export async function listSchedules(db: Executor, filter: ScheduleFilter): Promise<{ rows: ScheduleRow[]; more: boolean }> {
  let query = db.selectFrom('schedules').selectAll().where('wallet_id', '=', filter.walletId)
  if (filter.before !== undefined) query = query.where('id', '<', filter.before)
  if (filter.after !== undefined) query = query.where('id', '>', filter.after)
  if (filter.status !== undefined) query = query.where('status', '=', filter.status)
  const rows = await query
    .orderBy('id', 'desc')
    .limit(filter.limit + 1)
    .execute()
  return { rows: rows.slice(0, filter.limit), more: rows.length > filter.limit }
}

/** Active schedules whose next occurrence is due at `now`, the longest due first. */
export function findDueSchedules(db: Executor, now: string, limit: number): Promise<{ id: number; wallet_id: number }[]> {
  return db
    .selectFrom('schedules')
    .select(['id', 'wallet_id'])
    .where('status', '=', 'active')
    .where('next_run_at', '<=', now)
    .orderBy('next_run_at')
    .orderBy('id')
    .limit(limit)
    .execute()
}

/** How many active schedules are due at `now` (the runner's backlog). */
export async function countDueSchedules(db: Executor, now: string): Promise<number> {
  const row = await db
    .selectFrom('schedules')
    .select((eb) => eb.fn.countAll().as('n'))
    .where('status', '=', 'active')
    .where('next_run_at', '<=', now)
    .executeTakeFirstOrThrow()
  return Number(row.n)
}

/**
 * Records that occurrence `occurrence` of the schedule ran. Its primary key is the schedule and
 * the occurrence, so a second run of the same occurrence fails here and its transaction, transfer
 * included, rolls back.
 */
export async function insertRun(
  trx: Trx,
  run: { scheduleId: number; occurrence: number; dueAt: string; ranAt: string; transactionId: number | null; error: string | null },
): Promise<void> {
  await trx
    .insertInto('schedule_runs')
    .values({
      schedule_id: run.scheduleId,
      occurrence: run.occurrence,
      due_at: run.dueAt,
      ran_at: run.ranAt,
      transaction_id: run.transactionId,
      error: run.error,
    })
    .execute()
}

export type RunRow = Selectable<ScheduleRunsTable>

/** A page of a schedule's runs, the latest occurrence first, and whether more exist. */
export async function listRuns(
  db: Executor,
  scheduleId: number,
  page: { limit: number; before?: number },
): Promise<{ rows: RunRow[]; more: boolean }> {
  let query = db.selectFrom('schedule_runs').selectAll().where('schedule_id', '=', scheduleId)
  if (page.before !== undefined) query = query.where('occurrence', '<', page.before)
  const rows = await query
    .orderBy('occurrence', 'desc')
    .limit(page.limit + 1)
    .execute()
  return { rows: rows.slice(0, page.limit), more: rows.length > page.limit }
}

/** Cancels every schedule of the wallet not yet ended (wallet deletion); answers the cancelled ones. */
export function cancelSchedulesOf(trx: Trx, walletId: number, now: string): Promise<ScheduleRow[]> {
  return trx
    .updateTable('schedules')
    .set({ status: 'cancelled', next_run_at: null, updated_at: now })
    .where('wallet_id', '=', walletId)
    .where('status', 'in', ['active', 'paused'])
    .returningAll()
    .execute()
}

/** Every schedule of every wallet that failed or is paused (the operator's view), newest first. */
export function listTroubledSchedules(db: Executor, limit: number): Promise<ScheduleRow[]> {
  return db
    .selectFrom('schedules')
    .selectAll()
    .where((eb) => eb.or([eb('status', '=', 'paused'), eb('failures', '>', 0)]))
    .where('status', '<>', 'cancelled')
    .orderBy(sql`updated_at`, 'desc')
    .orderBy('id', 'desc')
    .limit(limit)
    .execute()
}
