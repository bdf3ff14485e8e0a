import { sql, type Kysely } from 'kysely'
import { isPostgres } from '../dialect.ts'
import { rebuildSqliteTable } from './sqlite-rebuild.ts'

/**
 * `events.event_id` without its unique index: every transfer writes two events, and nothing reads an
 * event by this id (the stream resumes by `events.id`); the id is unique by how it is made, a time and
 * 80 random bits (`events/outbox.ts`; `docs/decisions.md#events-and-webhooks`). SQLite cannot drop a
 * table's constraint, so the table is written again, every row, id and the id sequence kept.
 */

const UNIQUE = 'event_id text not null unique'
const PLAIN = 'event_id text not null'

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  if (isPostgres(db)) await sql`alter table events drop constraint events_event_id_key`.execute(db)
  else await rebuildSqliteTable(db, 'events', UNIQUE, PLAIN)
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  if (isPostgres(db)) await sql`alter table events add constraint events_event_id_key unique (event_id)`.execute(db)
  else await rebuildSqliteTable(db, 'events', PLAIN, UNIQUE)
}
