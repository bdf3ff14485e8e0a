import { sql, type RawBuilder, type SqlBool } from 'kysely'
import { derivedPublicId } from '../db/ids.ts'
import { MINT_WALLET_ID } from '../ledger/ledger.types.ts'

/**
 * A transaction's events are derived from its row, not written (migration 0041): `transaction.sent`
 * to the sending wallet has the id 2 × the transaction's id, `transaction.received` to the receiving
 * one 2 × it + 1; mint gets none, and none is left once the retention job cleared the body it
 * carries. Transactions before `event_state.derived_from` have event rows instead.
 */

export const SENT = 0
export const RECEIVED = 1
export type Side = typeof SENT | typeof RECEIVED

/** The first transaction whose events are derived. */
export const DERIVED_FROM = sql`(select derived_from from event_state where id = 1)`
/** The store's part of a derived event's public id. */
const SALT = sql`(select salt from event_state where id = 1)`

const sideType = (side: number) => (side === SENT ? 'transaction.sent' : 'transaction.received')

/** The columns every event read selects: a stored event's `event_id` and `salt` are set, a derived one's `salt`. */
export interface EventRow {
  id: number | string
  wallet_id: number | string
  type: string
  event_id: string | null
  created_at: string
  body: string | null
  salt: string | null
}

/** An event's public id, stored or derived. */
export function publicId(row: Pick<EventRow, 'id' | 'event_id' | 'created_at' | 'salt'>): string {
  return row.event_id ?? derivedPublicId(Number(row.id), row.created_at, row.salt as string)
}

/**
 * One side's derived events of the transactions `t` that `where` keeps, in id order, at most
 * `limit`. `gaps`: also mint's side and events whose body is gone, with no body (the stream's
 * poller passes their ids instead of waiting for them).
 */
export function sideEvents(side: Side, where: RawBuilder<unknown>, limit: number, gaps = false): RawBuilder<unknown> {
  const wallet = sql.ref(side === SENT ? 't.sending_wallet_id' : 't.receiving_wallet_id')
  const body = gaps ? sql`case when ${wallet} = ${sql.lit(MINT_WALLET_ID)} then null else t.body end` : sql`t.body`
  const kept = gaps ? sql`` : sql` and t.body is not null and ${wallet} <> ${sql.lit(MINT_WALLET_ID)}`
  return sql`select * from (select 2 * t.id + ${sql.lit(side)} as id, ${wallet} as wallet_id, ${sql.lit(sideType(side))} as type,
      null as event_id, t.created_at, ${body} as body, ${SALT} as salt
    from transactions t where t.id >= ${DERIVED_FROM} and ${where}${kept} order by t.id limit ${limit}) as ${sql.raw(`side${side}`)}`
}

/**
 * Joined as `dt` beside a left join of `events` on a delivery's `eventId` column: the transaction its
 * event is derived from, when no event row has its id and the id is past the stored ones.
 */
export function derivedTransaction(eventId: string): RawBuilder<SqlBool> {
  const id = sql.ref(eventId)
  return sql<SqlBool>`events.id is null and ${id} >= 2 * ${DERIVED_FROM} and dt.id = ${id} / 2`
}

/** The columns of a delivery's event, joined as above: null where it has none. */
export function deliveryEventColumns(eventId: string) {
  const id = sql.ref(eventId)
  return [
    sql<string | null>`events.event_id`.as('stored_event_id'),
    sql<string | null>`coalesce(events.type, case when dt.id is null then null
      when ${id} % 2 = ${sql.lit(SENT)} then ${sql.lit(sideType(SENT))} else ${sql.lit(sideType(RECEIVED))} end)`.as('type'),
    sql<string | null>`coalesce(events.created_at, dt.created_at)`.as('event_created_at'),
    sql<string | null>`${SALT}`.as('salt'),
  ] as const
}

/** A delivery's event's payload data, with `transactions` joined on `events.transaction_id` (a stored transaction event's). */
export const DELIVERY_EVENT_BODY = sql<string | null>`coalesce(events.body, transactions.body, dt.body)`.as('body')

/** A delivery's event's public id from the columns above; null when it has no event. */
export function deliveryPublicId(row: {
  event_id: number | string
  stored_event_id: string | null
  event_created_at: string | null
  salt: string | null
}) {
  if (row.event_created_at === null) return null
  return publicId({ id: row.event_id, event_id: row.stored_event_id, created_at: row.event_created_at, salt: row.salt })
}
