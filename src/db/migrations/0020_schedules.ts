import { sql, type Kysely } from 'kysely'
import { isPostgres } from '../dialect.ts'

/**
 * Scheduled and recurring transfers (`schedules/`):
 *
 * - `schedules`: the transfer to make (`request`, as given) and its calendar; `next_occurrence`
 *   is the index of the next occurrence to run and `next_run_at` its instant (null once the
 *   schedule is finished or cancelled). The runner finds due schedules through the partial index
 *   of active ones by `next_run_at`.
 * - `schedule_runs`: one row per occurrence that ran, its primary key (schedule, occurrence)
 *   written in the same database transaction as the run's transfer, so that an occurrence can
 *   never run twice, whatever instance, restart or crash came between.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  const postgres = isPostgres(db)
  const idType = postgres ? 'bigserial' : 'integer'
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  const id = (col: any) => (postgres ? col.primaryKey() : col.primaryKey().autoIncrement())
  await db.schema
    .createTable('schedules')
    .addColumn('id', idType, id)
    .addColumn('wallet_id', 'bigint', (col) => col.notNull().references('wallets.id'))
    .addColumn('key_id', 'bigint')
    .addColumn('request', 'text', (col) => col.notNull())
    .addColumn('start_at', 'text', (col) => col.notNull())
    .addColumn('every', 'text')
    .addColumn('count', 'integer')
    .addColumn('end_at', 'text')
    .addColumn('time_zone', 'text', (col) => col.notNull())
    .addColumn('status', 'text', (col) => col.notNull())
    .addColumn('next_occurrence', 'integer', (col) => col.notNull())
    .addColumn('next_run_at', 'text')
    .addColumn('runs', 'integer', (col) => col.notNull().defaultTo(0))
    .addColumn('failures', 'integer', (col) => col.notNull().defaultTo(0))
    .addColumn('refusals_in_a_row', 'integer', (col) => col.notNull().defaultTo(0))
    .addColumn('last_run', 'text')
    .addColumn('created_at', 'text', (col) => col.notNull())
    .addColumn('updated_at', 'text', (col) => col.notNull())
    .addCheckConstraint('schedules_status', sql`status in ('active', 'paused', 'finished', 'cancelled')`)
    .execute()
  await db.schema.createIndex('schedules_wallet').on('schedules').columns(['wallet_id', 'id']).execute()
  await db.schema
    .createIndex('schedules_due')
    .on('schedules')
    .columns(['next_run_at', 'id'])
    .where(sql.ref('status'), '=', 'active')
    .execute()

  await db.schema
    .createTable('schedule_runs')
    .addColumn('schedule_id', 'bigint', (col) => col.notNull().references('schedules.id'))
    .addColumn('occurrence', 'integer', (col) => col.notNull())
    .addColumn('due_at', 'text', (col) => col.notNull())
    .addColumn('ran_at', 'text', (col) => col.notNull())
    .addColumn('transaction_id', 'bigint')
    .addColumn('error', 'text')
    .addPrimaryKeyConstraint('schedule_runs_pk', ['schedule_id', 'occurrence'])
    .execute()
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('schedule_runs').execute()
  await db.schema.dropTable('schedules').execute()
}
