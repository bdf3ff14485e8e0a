import { sql, type Kysely } from 'kysely'
import { isPostgres } from '../dialect.ts'

/**
 * `page_generation`: one row whose `generation` changes whenever anything a history page prints
 * besides the journal's own rows changes, so that a page kept in memory can be checked against the
 * database in one statement (`docs/decisions.md`, "History pages served from a checked cache").
 *
 * A page prints, besides a transaction's own row and its lines' quantities (never updated), the
 * address of both wallets (`wallets.address`, looked up by id), the username of the user whose
 * primary wallet each is (`users.username`, looked up by `users.primary_wallet_id`), and each
 * line's asset name and value (`assets.name`, `assets.value`, by id). The triggers below bump the
 * generation on every insert and delete of those tables and every update that names one of those
 * columns (so that a password change, a session or a transfer's lock never does); on the journal
 * tables on any update or delete, which nothing does (they are append-only) but which must not go
 * unseen if something ever did. Triggers, not the application, so that every writer bumps it: each
 * instance, the CLI, a restore, a script. On PostgreSQL they fire once per statement; SQLite has
 * only row triggers.
 *
 * The generation starts at the time of creation in microseconds and grows by one per bump, so a
 * store created again (a restore into a new database while an instance keeps running) starts past
 * every generation of the one before it, unless that one saw more than a million bumps a second.
 */
const LABELED = [
  { table: 'users', columns: ['username', 'primary_wallet_id'] },
  { table: 'wallets', columns: ['address'] },
  { table: 'assets', columns: ['name', 'value'] },
  // Append-only: any update names a printed column.
  { table: 'transactions', columns: [] },
  { table: 'transaction_assets', columns: [] },
] as const

const BUMP = 'update page_generation set generation = generation + 1'

const triggerName = (table: string, event: string) => `${table}_page_generation${event ? `_${event}` : ''}`

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('page_generation')
    .addColumn('id', 'integer', (column) => column.primaryKey().check(sql`id = 1`))
    .addColumn('generation', 'bigint', (column) => column.notNull())
    .execute()
  await db
    .insertInto('page_generation')
    .values({ id: 1, generation: Date.now() * 1000 })
    .execute()
  if (isPostgres(db)) {
    await sql
      .raw(`create function coffer_bump_page_generation() returns trigger language plpgsql as $$ begin ${BUMP}; return null; end $$`)
      .execute(db)
    for (const { table, columns } of LABELED) {
      const update = columns.length > 0 ? `update of ${columns.join(', ')}` : 'update'
      const events =
        table === 'transactions' || table === 'transaction_assets'
          ? `${update} or delete or truncate`
          : `insert or ${update} or delete or truncate`
      await sql
        .raw(
          `create trigger ${triggerName(table, '')} after ${events} on ${table} ` +
            'for each statement execute function coffer_bump_page_generation()',
        )
        .execute(db)
    }
    return
  }
  for (const { table, columns } of LABELED) {
    const update = columns.length > 0 ? `update of ${columns.join(', ')}` : 'update'
    const events = table === 'transactions' || table === 'transaction_assets' ? [update, 'delete'] : ['insert', update, 'delete']
    for (const event of events) {
      await sql.raw(`create trigger ${triggerName(table, event.split(' ')[0])} after ${event} on ${table} begin ${BUMP}; end`).execute(db)
    }
  }
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  if (isPostgres(db)) {
    for (const { table } of LABELED) await sql.raw(`drop trigger ${triggerName(table, '')} on ${table}`).execute(db)
    await sql`drop function coffer_bump_page_generation()`.execute(db)
  } else {
    for (const { table } of LABELED) {
      for (const event of ['insert', 'update', 'delete']) await sql.raw(`drop trigger if exists ${triggerName(table, event)}`).execute(db)
    }
  }
  await db.schema.dropTable('page_generation').execute()
}
