import { sql, type RawBuilder } from 'kysely'
import type { Executor } from '../db/database.ts'
import { isPostgres } from '../db/dialect.ts'
import { DERIVED_FROM, publicId, RECEIVED, SENT, sideEvents, type EventRow, type Side } from './derived-events.ts'
import { eventPayload } from './outbox.ts'

/** SQL for reading the outbox as a stream (GET /wallet/events). */

export interface StreamEvent {
  id: number
  wallet_id: number
  type: string
  payload: string
  /** An id the global feed passes that names no event (mint's side, a body the retention job cleared, a pair's unused id): no payload. */
  gap?: true
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

/** The highest event id visible now, with the snapshot it was read in; a derived one is counted as the received side's. */
export async function readHead(db: Executor): Promise<{ maxId: number; snapshot: Snapshot | undefined }> {
  const derived = sql`coalesce(2 * (select max(id) from transactions where id >= ${DERIVED_FROM}) + 1, 0)`
  const stored = sql`coalesce((select max(id) from events), 0)`
  if (!isPostgres(db)) {
    const { rows } = await sql<{ max_id: number }>`select max(${stored}, ${derived}) as max_id`.execute(db)
    return { maxId: Number(rows[0].max_id), snapshot: undefined }
  }
  const { rows } = await sql<SnapshotRow & { max_id: string }>`
    select greatest(${stored}, ${derived})::text as max_id,
           pg_snapshot_xmin(pg_current_snapshot())::text as xmin,
           pg_snapshot_xmax(pg_current_snapshot())::text as xmax`.execute(db)
  return { maxId: Number(rows[0].max_id), snapshot: toSnapshot(rows[0]) }
}

/** Stored events (a hold's, or from before events were derived, with its transaction's body), at most `limit` in id order. */
function storedEvents(where: RawBuilder<unknown>, limit: number): RawBuilder<unknown> {
  return sql`select * from (select events.id, events.wallet_id, events.type, events.event_id, events.created_at,
      coalesce(events.body, transactions.body) as body, null as salt
    from events left join transactions on transactions.id = events.transaction_id
    where ${where} order by events.id limit ${limit}) as stored`
}

/**
 * The other id of a stored event's pair (2 × a slot and 2 × it + 1, migration 0041) where no event
 * has it, as a gap: a pair is written in one transaction (a hold's sides, of which mint's is left
 * out; a schedule's run or a monitor's crossing takes the first alone), so once one id of it is seen
 * the other never comes, and the stream's poller passes it instead of waiting for it.
 */
function pairGaps(after: number, limit: number): RawBuilder<unknown> {
  const partner = sql`(events.id + 1 - 2 * (events.id % 2))`
  // One lower bound, past the stored events before the pairs, so that neither planner scans those.
  const from = sql`(case when ${after} > 2 * ${DERIVED_FROM} then ${after} else 2 * ${DERIVED_FROM} end)`
  return sql`select * from (select ${partner} as id, events.wallet_id, events.type, null as event_id, events.created_at,
      null as body, null as salt
    from events where events.id >= ${from} and ${partner} > ${after}
      and not exists (select 1 from events p where p.id = ${partner})
    order by events.id limit ${limit}) as pairs`
}

/**
 * The largest transaction id whose `side` event has an id ≤ `id` (2t + side ≤ id): each branch is
 * bounded exactly, so a page shorter than its limit means every branch is exhausted.
 */
const above = (id: number, side: Side) => Math.floor((id - side) / 2)

function toStreamEvent(row: EventRow): StreamEvent {
  const event: StreamEvent = { id: Number(row.id), wallet_id: Number(row.wallet_id), type: row.type, payload: '' }
  if (row.body === null) event.gap = true
  else event.payload = eventPayload({ ...row, event_id: publicId(row), body: row.body })
  return event
}

/**
 * Events of every wallet with id > `after`, in id order, and (PostgreSQL) the bounds of the
 * snapshot the rows were read in: one statement, so the rows and the bounds agree. Ids known to
 * name no event (mint's side, the other id of a pair) come as gaps.
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
    select events.*, ${snapshot} from (
      ${sideEvents(SENT, sql`t.id > ${above(after, SENT)}`, limit, true)}
      union all ${sideEvents(RECEIVED, sql`t.id > ${above(after, RECEIVED)}`, limit, true)}
      union all ${storedEvents(sql`events.id > ${after}`, limit)}
      union all ${pairGaps(after, limit)}) as events
    order by events.id limit ${limit}`.execute(db)
  if (rows.length === 0) return { rows: [], snapshot: undefined }
  return { rows: rows.map(toStreamEvent), snapshot: isPostgres(db) ? toSnapshot(rows[0]) : undefined }
}

/** One wallet's events with `after` < id ≤ `upto`, in id order (a reconnecting stream's backlog). */
export async function readWalletEvents(db: Executor, walletId: number, after: number, upto: number, limit: number): Promise<StreamEvent[]> {
  const range = (side: Side) => sql`t.id > ${above(after, side)} and t.id <= ${above(upto, side)}`
  const { rows } = await sql<EventRow>`
    select * from (
      ${sideEvents(SENT, sql`t.sending_wallet_id = ${walletId} and ${range(SENT)}`, limit)}
      union all ${sideEvents(RECEIVED, sql`t.receiving_wallet_id = ${walletId} and ${range(RECEIVED)}`, limit)}
      union all ${storedEvents(sql`events.wallet_id = ${walletId} and events.id > ${after} and events.id <= ${upto}`, limit)}) as events
    order by events.id limit ${limit}`.execute(db)
  return rows.map(toStreamEvent)
}
