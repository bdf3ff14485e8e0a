import { sql } from 'kysely'
import type { Executor } from '../db/database.ts'
import { isPostgres } from '../db/dialect.ts'
import { eventPayload } from './outbox.ts'

/** SQL for reading the outbox as a stream (GET /wallet/events). */

export interface StreamEvent {
  id: number
  wallet_id: number
  type: string
  payload: string
}

/**
 * PostgreSQL snapshot bounds, as 64-bit transaction ids: every transaction below `xmin` has
 * ended, every transaction from `xmax` on had not started when the snapshot was taken.
 */
export interface Snapshot {
  xmin: bigint
  xmax: bigint
}

interface SnapshotRow {
  xmin: string
  xmax: string
}

function toSnapshot(row: SnapshotRow): Snapshot {
  return { xmin: BigInt(row.xmin), xmax: BigInt(row.xmax) }
}

/** The current snapshot's bounds on PostgreSQL; undefined on SQLite, whose commits are serial. */
export async function readSnapshot(db: Executor): Promise<Snapshot | undefined> {
  if (!isPostgres(db)) return undefined
  const { rows } = await sql<SnapshotRow>`select pg_snapshot_xmin(pg_current_snapshot())::text as xmin,
      pg_snapshot_xmax(pg_current_snapshot())::text as xmax`.execute(db)
  return toSnapshot(rows[0])
}

/** The highest event id visible now, with the snapshot it was read in. */
export async function readHead(db: Executor): Promise<{ maxId: number; snapshot: Snapshot | undefined }> {
  if (!isPostgres(db)) {
    const row = await db
      .selectFrom('events')
      .select((eb) => eb.fn.max('id').as('max_id'))
      .executeTakeFirst()
    return { maxId: Number(row?.max_id ?? 0), snapshot: undefined }
  }
  const { rows } = await sql<SnapshotRow & { max_id: string | null }>`
    select (select max(id) from events)::text as max_id,
           pg_snapshot_xmin(pg_current_snapshot())::text as xmin,
           pg_snapshot_xmax(pg_current_snapshot())::text as xmax`.execute(db)
  return { maxId: Number(rows[0].max_id ?? 0), snapshot: toSnapshot(rows[0]) }
}

/** The columns an event's payload is composed from: the event's own and its transaction's body (a hold's event carries its own). */
const EVENT_FIELDS = sql`events.id, events.wallet_id, events.type, events.event_id, events.created_at,
  coalesce(events.body, transactions.body) as body`
const EVENTS = sql`events left join transactions on transactions.id = events.transaction_id`

type EventRow = { id: number | string; wallet_id: number | string; type: string; event_id: string; created_at: string; body: string | null }

function toStreamEvent(row: EventRow): StreamEvent {
  return { id: Number(row.id), wallet_id: Number(row.wallet_id), type: row.type, payload: eventPayload(row) }
}

/**
 * Events of every wallet with id > `after`, in id order, and (PostgreSQL) the bounds of the
 * snapshot the rows were read in: one statement, so the rows and the bounds agree.
 */
export async function readEventsAfter(
  db: Executor,
  after: number,
  limit: number,
): Promise<{ rows: StreamEvent[]; snapshot: Snapshot | undefined }> {
  const snapshot = isPostgres(db)
    ? sql`pg_snapshot_xmin(pg_current_snapshot())::text as xmin, pg_snapshot_xmax(pg_current_snapshot())::text as xmax`
    : sql`null as xmin, null as xmax`
  const { rows } = await sql<EventRow & SnapshotRow>`
    select ${EVENT_FIELDS}, ${snapshot}
    from ${EVENTS} where events.id > ${after} order by events.id limit ${limit}`.execute(db)
  if (rows.length === 0) return { rows: [], snapshot: undefined }
  return { rows: rows.map(toStreamEvent), snapshot: isPostgres(db) ? toSnapshot(rows[0]) : undefined }
}

/** One wallet's events with `after` < id ≤ `upto`, in id order (a reconnecting stream's backlog). */
export async function readWalletEvents(db: Executor, walletId: number, after: number, upto: number, limit: number): Promise<StreamEvent[]> {
  const { rows } = await sql<EventRow>`
    select ${EVENT_FIELDS}
    from ${EVENTS} where events.wallet_id = ${walletId} and events.id > ${after} and events.id <= ${upto}
    order by events.id limit ${limit}`.execute(db)
  return rows.map(toStreamEvent)
}
