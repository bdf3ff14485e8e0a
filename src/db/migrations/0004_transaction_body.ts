import { sql, type Kysely } from 'kysely'
import { isPostgres } from '../dialect.ts'

/**
 * The answered transaction stored once on its row, not in both events' payloads (composed when
 * read, byte for byte the same); existing bodies are cut out of an event's payload after `,"data":`.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('transactions').addColumn('body', 'text').execute()
  const start = isPostgres(db) ? sql`strpos(e.payload, ',"data":')` : sql`instr(e.payload, ',"data":')`
  // Either event's payload will do; one pass, as events.transaction_id has no index.
  await sql`
    update transactions set body = substr(e.payload, ${start} + 8, length(e.payload) - ${start} - 8)
    from (select transaction_id, max(payload) as payload from events group by transaction_id) as e
    where e.transaction_id = transactions.id`.execute(db)
  await db.schema.alterTable('events').dropColumn('payload').execute()
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('events').addColumn('payload', 'text').execute()
  await sql`
    update events set payload = '{"type":"' || type || '","id":"' || event_id || '","created_at":"' || created_at || '","data":'
      || (select body from transactions where transactions.id = events.transaction_id) || '}'`.execute(db)
  await db.schema.alterTable('transactions').dropColumn('body').execute()
}
