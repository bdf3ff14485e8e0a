import { sql, type Kysely } from 'kysely'
import { isPostgres } from '../dialect.ts'

/**
 * `events.event_id` without its unique index: every transfer writes two events, and nothing reads an
 * event by this id (the stream resumes by `events.id`); the id is unique by how it is made, a time and
 * 80 random bits (`events/outbox.ts`; `docs/decisions.md#events-and-webhooks`). SQLite cannot drop a
 * table constraint, so the table is written again, every row, id and the id sequence kept.
 */

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  if (isPostgres(db)) await sql`alter table events drop constraint events_event_id_key`.execute(db)
  else await rebuildSqliteEvents(db, false)
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  if (isPostgres(db)) await sql`alter table events add constraint events_event_id_key unique (event_id)`.execute(db)
  else await rebuildSqliteEvents(db, true)
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
async function rebuildSqliteEvents(db: Kysely<any>, unique: boolean): Promise<void> {
  // Off for the swap: webhook deliveries refer to events by name, and find the new table under it.
  await sql`pragma foreign_keys = off`.execute(db)
  try {
    await sql`begin immediate`.execute(db)
    try {
      const { rows } = await sql<{ seq: number }>`select seq from sqlite_sequence where name = 'events'`.execute(db)
      await sql`
        create table events_rebuilt (
          id integer primary key autoincrement,
          event_id text not null${unique ? sql` unique` : sql``},
          wallet_id bigint not null references wallets(id),
          type text not null,
          transaction_id bigint references transactions(id),
          created_at text not null, body text
        )`.execute(db)
      await sql`
        insert into events_rebuilt (id, event_id, wallet_id, type, transaction_id, created_at, body)
        select id, event_id, wallet_id, type, transaction_id, created_at, body from events order by id`.execute(db)
      await sql`drop table events`.execute(db)
      await sql`alter table events_rebuilt rename to events`.execute(db)
      await sql`create index events_wallet on events (wallet_id, id)`.execute(db)
      if (rows.length > 0) await sql`update sqlite_sequence set seq = max(seq, ${rows[0].seq}) where name = 'events'`.execute(db)
      const broken = await sql`pragma foreign_key_check`.execute(db)
      if (broken.rows.length > 0) throw new Error(`rebuilding events left ${broken.rows.length} broken references`)
      await sql`commit`.execute(db)
    } catch (error) {
      await sql`rollback`.execute(db)
      throw error
    }
  } finally {
    await sql`pragma foreign_keys = on`.execute(db)
  }
}
