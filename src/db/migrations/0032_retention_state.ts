import { type Kysely } from 'kysely'

/**
 * `retention_state`: how far the retention job has cleared transactions' `body` (the stored answer
 * their events are sent with) once no event needs it, so that each run starts where the last one
 * stopped instead of reading the whole ledger again. Operational: no backup carries it.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('retention_state')
    .addColumn('id', 'integer', (col) => col.primaryKey())
    .addColumn('bodies_cleared_to', 'bigint', (col) => col.notNull())
    .execute()
  await db.insertInto('retention_state').values({ id: 1, bodies_cleared_to: 0 }).execute()
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('retention_state').execute()
}
