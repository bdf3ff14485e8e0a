import type { Db, Trx } from '../db/database.ts'
import { inTransaction, nowIso } from '../db/dialect.ts'
import { AppError, ERRORS, type ErrorCode } from '../http/errors.ts'
import { takeWalletTurns, type Ledger } from '../ledger/ledger.service.ts'
import type { EventWriter, Transaction, WalletEvent } from '../ledger/ledger.types.ts'
import type { WalletKeysService } from '../wallets/wallets.service.ts'
import { createCalendars, parseEvery, type Calendar, type Calendars } from './calendar.ts'
import * as repository from './schedules.repository.ts'
import type { ScheduleRow } from './schedules.repository.ts'
import type { ScheduleRequest } from './schedules.schemas.ts'

export type ScheduleStatus = 'active' | 'paused' | 'finished' | 'cancelled'

/** An error body as a run records it (`last_run.error`). */
export interface RunError {
  code: ErrorCode
  message: string
  detail?: string
  request_id: string
}

/** A schedule as the API answers it. */
export interface Schedule {
  id: number
  status: ScheduleStatus
  wallet_id: number
  recipient: string | number
  type: number
  assets: Record<string, number>
  memo: string | null
  metadata: Record<string, string> | null
  start_at: string
  every: string | null
  count: number | null
  end_at: string | null
  time_zone: string
  next_run_at: string | null
  runs: number
  failures: number
  last_run: { at: string; transaction_id: number | null; error: RunError | null } | null
  created_at: string
}

type TransferRequest = Pick<ScheduleRequest, 'recipient' | 'type' | 'assets' | 'memo' | 'metadata'>

/** Refusals in a row that pause a schedule. */
const PAUSE_AFTER_REFUSALS = 3
/** How far in the past a `start_at` may be and still count as now: the clocks of a client and the service differ a little. */
const START_TOLERANCE_MS = 60_000
const MAX_YEARS_AHEAD = 10

function toSchedule(row: ScheduleRow): Schedule {
  const request = JSON.parse(row.request) as TransferRequest
  return {
    id: Number(row.id),
    status: row.status as ScheduleStatus,
    wallet_id: Number(row.wallet_id),
    recipient: request.recipient,
    type: request.type ?? 0,
    assets: request.assets,
    memo: request.memo ?? null,
    metadata: request.metadata ?? null,
    start_at: row.start_at,
    every: row.every,
    count: row.count === null ? null : Number(row.count),
    end_at: row.end_at,
    time_zone: row.time_zone,
    next_run_at: row.next_run_at,
    runs: Number(row.runs),
    failures: Number(row.failures),
    last_run: row.last_run === null ? null : (JSON.parse(row.last_run) as Schedule['last_run']),
    created_at: row.created_at,
  }
}

function calendarOf(row: Pick<ScheduleRow, 'start_at' | 'every' | 'count' | 'end_at' | 'time_zone'>): Calendar {
  return { startAt: row.start_at, every: row.every, count: row.count, endAt: row.end_at, timeZone: row.time_zone }
}

/** A body timestamp as stored (ISO UTC with milliseconds); G000 when it names no instant. */
function instantOf(field: string, text: string): number {
  const time = Date.parse(text)
  if (Number.isNaN(time)) throw new AppError('G000', `${field} is not a valid time`)
  return time
}

/**
 * The calendar of a new schedule, checked: G000 for a `start_at` in the past or more than 10
 * years ahead, an `every` that is not whole days, weeks or months from P1D to P1Y, `count` with
 * `end_at`, an `end_at` before `start_at`, or an unknown time zone.
 */
function checkCalendar(calendars: Calendars, body: ScheduleRequest, now: number): Calendar {
  const start = instantOf('start_at', body.start_at)
  if (start < now - START_TOLERANCE_MS) throw new AppError('G000', 'start_at is in the past')
  const latest = new Date(now)
  latest.setUTCFullYear(latest.getUTCFullYear() + MAX_YEARS_AHEAD)
  if (start > latest.getTime()) throw new AppError('G000', `start_at is more than ${MAX_YEARS_AHEAD} years ahead`)
  if (body.every !== undefined && !parseEvery(body.every))
    throw new AppError('G000', 'every must be whole days, weeks or months from P1D to P1Y (P1D, P2W, P1M, P1Y)')
  if (body.count !== undefined && body.end_at !== undefined) throw new AppError('G000', 'give count or end_at, not both')
  const timeZone = body.time_zone ?? 'UTC'
  if (!calendars.isTimeZone(timeZone)) throw new AppError('G000', `unknown time zone "${timeZone}"`)
  let endAt: string | null = null
  if (body.end_at !== undefined) {
    const end = instantOf('end_at', body.end_at)
    if (end < start) throw new AppError('G000', 'end_at is before start_at')
    endAt = new Date(end).toISOString()
  }
  return { startAt: new Date(Math.max(start, now)).toISOString(), every: body.every ?? null, count: body.count ?? null, endAt, timeZone }
}

/** One occurrence that ran: the transfer it made, or the refusal that moved nothing. */
export interface ScheduleRun {
  occurrence: number
  due_at: string
  ran_at: string
  transaction_id: number | null
  error: RunError | null
}

export interface SchedulesServiceDeps {
  db: Db
  ledger: Ledger
  events: EventWriter
  /** The limits of the wallet key that created a schedule. */
  keys: Pick<WalletKeysService, 'findLimits'>
}

export interface SchedulesService {
  /**
   * POST /wallet/schedules: checks the calendar (G000), then the transfer as far as it can be
   * before it runs (U003/W000/G000 recipient, W013, I001), and stores the schedule.
   */
  create(walletId: number, body: ScheduleRequest, keyId?: number): Promise<Schedule>
  /** GET /wallet/schedules: newest first, by status, paged like holds. */
  list(
    walletId: number,
    query: { limit?: number; before?: number; after?: number; status?: ScheduleStatus },
  ): Promise<{ schedules: Schedule[]; more: boolean }>
  /** GET /wallet/schedules/{id}. Throws R000. */
  find(walletId: number, id: number): Promise<Schedule>
  /** The instants of the next `count` runs of an active schedule (none otherwise). Throws R000. */
  upcoming(walletId: number, id: number, count: number): Promise<string[]>
  /** The occurrences that ran, the latest first, paged by occurrence. Throws R000. */
  runs(walletId: number, id: number, page: { limit?: number; before?: number }): Promise<{ runs: ScheduleRun[]; more: boolean }>
  /** Pauses an active schedule (a paused one is answered as it is). Throws R000, R001 (finished or cancelled). */
  pause(walletId: number, id: number): Promise<Schedule>
  /**
   * Resumes a paused schedule from its next occurrence from now on (an active one is answered as
   * it is); a one-off whose time passed runs at once. Throws R000, R001.
   */
  resume(walletId: number, id: number): Promise<Schedule>
  /** DELETE /wallet/schedules/{id}: cancels it for good. Throws R000, R001. */
  cancel(walletId: number, id: number): Promise<Schedule>
  /** Every schedule that failed or is paused, of every wallet: the operator's view. */
  listTroubled(limit: number): Promise<Schedule[]>
  /**
   * Runs the next due occurrence of the schedule, if it is still due: the transfer, the record of
   * the run and the schedule's new state in one database transaction. True when it ran.
   */
  runDue(id: number, now?: number): Promise<boolean>
  /** Schedules due now, the longest due first (for the runner). */
  findDue(limit: number, now?: number): Promise<{ id: number; wallet_id: number }[]>
  /** How many schedules are due now (the runner's backlog). */
  countDue(now?: number): Promise<number>
}

export function createSchedulesService({ db, ledger, events, keys }: SchedulesServiceDeps): SchedulesService {
  const calendars = createCalendars()
  /** The schedule locked for a change by its wallet: R000 when it is not the wallet's, R001 when it has ended. */
  async function lockForChange(trx: Trx, walletId: number, id: number): Promise<ScheduleRow> {
    const row = await repository.lockSchedule(trx, id)
    if (!row || Number(row.wallet_id) !== walletId) throw new AppError('R000', `no schedule ${id}`)
    if (row.status === 'finished' || row.status === 'cancelled') throw new AppError('R001', `schedule ${id} is ${row.status}`)
    return row
  }

  const scheduleEvent = (row: ScheduleRow, type: string, at: string, data?: unknown): WalletEvent => ({
    walletId: Number(row.wallet_id),
    type,
    createdAt: at,
    data: data ?? toSchedule(row),
  })

  return {
    async create(walletId, body, keyId) {
      const calendar = checkCalendar(calendars, body, Date.now())
      const request: TransferRequest = {
        recipient: body.recipient,
        type: body.type,
        assets: body.assets,
        memo: body.memo,
        metadata: body.metadata,
      }
      // Through a wallet key: its recipients and per-transfer caps refuse the schedule now, as they would each run.
      const key = keyId === undefined ? undefined : await keys.findLimits(db, keyId)
      await ledger.transfers.check(walletId, request, key?.limits)
      const now = nowIso()
      const row = await repository.insertSchedule(db, {
        wallet_id: walletId,
        key_id: keyId ?? null,
        request: JSON.stringify(request),
        start_at: calendar.startAt,
        every: calendar.every,
        count: calendar.count,
        end_at: calendar.endAt,
        time_zone: calendar.timeZone,
        status: 'active',
        next_occurrence: 0,
        next_run_at: calendar.startAt,
        runs: 0,
        failures: 0,
        refusals_in_a_row: 0,
        created_at: now,
        updated_at: now,
      })
      return toSchedule(row)
    },

    async list(walletId, query) {
      const { rows, more } = await repository.listSchedules(db, { walletId, limit: query.limit ?? 10, ...query })
      return { schedules: rows.map(toSchedule), more }
    },

    async find(walletId, id) {
      const row = await repository.findSchedule(db, walletId, id)
      if (!row) throw new AppError('R000', `no schedule ${id}`)
      return toSchedule(row)
    },

    async upcoming(walletId, id, count) {
      const row = await repository.findSchedule(db, walletId, id)
      if (!row) throw new AppError('R000', `no schedule ${id}`)
      if (row.status !== 'active') return []
      const calendar = calendarOf(row)
      const runs: string[] = []
      for (let n = Number(row.next_occurrence); runs.length < count; n++) {
        const at = calendars.occurrenceAt(calendar, n)
        if (at === undefined) break
        // The next run may be overdue (about to run); it is listed at the time it is due.
        runs.push(n === Number(row.next_occurrence) && row.next_run_at ? row.next_run_at : new Date(at).toISOString())
      }
      return runs
    },

    async runs(walletId, id, page) {
      if (!(await repository.findSchedule(db, walletId, id))) throw new AppError('R000', `no schedule ${id}`)
      const { rows, more } = await repository.listRuns(db, id, { limit: page.limit ?? 20, before: page.before })
      const runs = rows.map((row) => ({
        occurrence: Number(row.occurrence),
        due_at: row.due_at,
        ran_at: row.ran_at,
        transaction_id: row.transaction_id === null ? null : Number(row.transaction_id),
        error: row.error === null ? null : (JSON.parse(row.error) as RunError),
      }))
      return { runs, more }
    },

    pause: (walletId, id) =>
      inTransaction(db, async (trx) => {
        const row = await lockForChange(trx, walletId, id)
        if (row.status === 'paused') return toSchedule(row)
        const paused = await repository.updateSchedule(trx, id, { status: 'paused', next_run_at: null, updated_at: nowIso() })
        await events.recordEvents(trx, [scheduleEvent(paused, 'schedule.paused', paused.updated_at)])
        return toSchedule(paused)
      }),

    resume: (walletId, id) =>
      inTransaction(db, async (trx) => {
        const row = await lockForChange(trx, walletId, id)
        if (row.status === 'active') return toSchedule(row)
        const now = Date.now()
        const calendar = calendarOf(row)
        const n = Number(row.next_occurrence)
        // A one-off whose time passed while paused runs at once; otherwise the next occurrence from now on.
        const next =
          row.every === null && n === 0
            ? { n, at: Math.min(Date.parse(row.start_at), now) }
            : calendars.firstOccurrenceFrom(calendar, n, now)
        const at = nowIso()
        if (!next) {
          const finished = await repository.updateSchedule(trx, id, { status: 'finished', next_run_at: null, updated_at: at })
          await events.recordEvents(trx, [scheduleEvent(finished, 'schedule.finished', at)])
          return toSchedule(finished)
        }
        const resumed = await repository.updateSchedule(trx, id, {
          status: 'active',
          next_occurrence: next.n,
          next_run_at: new Date(next.at).toISOString(),
          refusals_in_a_row: 0,
          updated_at: at,
        })
        return toSchedule(resumed)
      }),

    cancel: (walletId, id) =>
      inTransaction(db, async (trx) => {
        await lockForChange(trx, walletId, id)
        return toSchedule(await repository.updateSchedule(trx, id, { status: 'cancelled', next_run_at: null, updated_at: nowIso() }))
      }),

    async listTroubled(limit) {
      return (await repository.listTroubledSchedules(db, limit)).map(toSchedule)
    },

    findDue: (limit, now = Date.now()) => repository.findDueSchedules(db, new Date(now).toISOString(), limit),

    countDue: (now = Date.now()) => repository.countDueSchedules(db, new Date(now).toISOString()),

    runDue: (id, now = Date.now()) => runOccurrence({ db, ledger, events, calendars, keys }, id, now),
  }
}

/**
 * One occurrence of a schedule, in one database transaction: the transfer (through the ledger's
 * transfer service, every rule of a transfer applying), the run's row, whose key (schedule,
 * occurrence) makes a second run of it fail and roll back, and the schedule's next state with its
 * events. The turns of both wallets come first, as every move takes them, then the schedule's row:
 * two instances serialize there, and the second finds the occurrence done.
 */
async function runOccurrence(
  { db, ledger, events, calendars, keys }: SchedulesServiceDeps & { calendars: Calendars },
  id: number,
  now: number,
): Promise<boolean> {
  return inTransaction(db, async (trx) => {
    const seen = await trx.selectFrom('schedules').select(['wallet_id', 'request']).where('id', '=', id).executeTakeFirst()
    if (!seen) return false
    const walletId = Number(seen.wallet_id)
    const request = JSON.parse(seen.request) as TransferRequest
    const recipient = await ledger.transfers.recipientOf(trx, request).catch(() => undefined)
    await takeWalletTurns(trx, recipient === undefined ? [walletId] : [walletId, recipient])
    const row = await repository.lockSchedule(trx, id)
    const dueAt = row?.next_run_at
    if (!row || row.status !== 'active' || !dueAt || Date.parse(dueAt) > now) return false
    const occurrence = Number(row.next_occurrence)
    const ranAt = nowIso()

    let transaction: Transaction | undefined
    let error: RunError | null = null
    try {
      // A schedule created through a wallet key runs under that key's limits, and not at all once it is revoked.
      let limits
      if (row.key_id !== null) {
        const key = await keys.findLimits(trx, Number(row.key_id))
        if (!key) throw new AppError('A001', 'the wallet key that created this schedule has been revoked')
        limits = key.limits
      }
      transaction = await ledger.transfers.sendWithin(trx, walletId, request, id, limits)
    } catch (refusal) {
      if (!(refusal instanceof AppError)) throw refusal
      const { message } = ERRORS[refusal.code]
      error = {
        code: refusal.code,
        message,
        ...(refusal.detail ? { detail: refusal.detail } : {}),
        request_id: `schedule-${id}-${occurrence}`,
      }
    }
    await repository.insertRun(trx, {
      scheduleId: id,
      occurrence,
      dueAt,
      ranAt,
      transactionId: transaction?.id ?? null,
      error: error && JSON.stringify(error),
    })

    const next = calendars.occurrenceAt(calendarOf(row), occurrence + 1)
    const refusals = error ? Number(row.refusals_in_a_row) + 1 : 0
    const status: ScheduleStatus = next === undefined ? 'finished' : refusals >= PAUSE_AFTER_REFUSALS ? 'paused' : 'active'
    const updated = await repository.updateSchedule(trx, id, {
      status,
      next_occurrence: occurrence + 1,
      next_run_at: status === 'active' && next !== undefined ? new Date(next).toISOString() : null,
      runs: Number(row.runs) + 1,
      failures: Number(row.failures) + (error ? 1 : 0),
      refusals_in_a_row: refusals,
      last_run: JSON.stringify({ at: ranAt, transaction_id: transaction?.id ?? null, error }),
      updated_at: ranAt,
    })
    const schedule = toSchedule(updated)
    const recorded: WalletEvent[] = [
      transaction
        ? { walletId, type: 'schedule.ran', createdAt: ranAt, data: { schedule, transaction } }
        : { walletId, type: 'schedule.failed', createdAt: ranAt, data: schedule },
    ]
    if (status !== 'active') recorded.push({ walletId, type: `schedule.${status}`, createdAt: ranAt, data: schedule })
    await events.recordEvents(trx, recorded)
    return true
  })
}

/** Cancels every schedule of a wallet being deleted, in the deletion's transaction. */
export async function cancelSchedulesOf(trx: Trx, walletId: number): Promise<void> {
  await repository.cancelSchedulesOf(trx, walletId, nowIso())
}
