import { sql, type Kysely } from 'kysely'
import { isPostgres } from '../dialect.ts'

/**
 * The transaction as it was answered is stored once, on its row (`transactions.body`), instead of
 * inside each of its two events' payloads: an event's payload is now composed when it is read
 * (`eventPayload` in `events/outbox.ts`), byte for byte what was stored before, so a batch logs
 * less.
 *
 * Existing events keep their exact bytes: each transaction's body is cut out of the payload of
 * one of its events, where it follows `,"data":` (the fields before it are fixed-format strings that
 * cannot contain that sequence) up to the closing brace.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('transactions').addColumn('body', 'text').execute()
  const start = isPostgres(db) ? sql`strpos(e.payload, ',"data":')` : sql`instr(e.payload, ',"data":')`
  // Both events of a transaction carry the same data, so either payload will do; one pass over
  // events (there is no index on events.transaction_id to look each one up).
  await sql`
    update transactions set body = substr(e.payload, ${start} + 8, length(e.payload) - ${start} - 8)
    from (select transaction_id, max(payload) as payload from events group by transaction_id) as e
    where e.transaction_id = transactions.id`.execute(db)
  await db.schema.alterTable('events').dropColumn('payload').execute()
}

// The type, event id and time need no escaping in JSON.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('events').addColumn('payload', 'text').execute()
  await sql`
    update events set payload = '{"type":"' || type || '","id":"' || event_id || '","created_at":"' || created_at || '","data":'
      || (select body from transactions where transactions.id = events.transaction_id) || '}'`.execute(db)
  await db.schema.alterTable('transactions').dropColumn('body').execute()
}
