import { sql, type Kysely } from 'kysely'
import { isPostgres } from '../dialect.ts'

/**
 * A generation moved by triggers whenever anything a history page prints besides the journal could
 * change (`docs/decisions.md#history-pages-served-from-a-checked-cache`); it starts at the clock so
 * a store created again starts past the old one.
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
