import { sql, type Kysely } from 'kysely'
import { isPostgres } from '../dialect.ts'

/**
 * Balance monitors (`monitors/`): a threshold on what a wallet can spend of an asset, and its
 * `state` (`normal` or `crossed`), kept by the write path in the database transaction of every
 * move that changes it, so that each crossing records exactly one event.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  const postgres = isPostgres(db)
  const idType = postgres ? 'bigserial' : 'integer'
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  const id = (col: any) => (postgres ? col.primaryKey() : col.primaryKey().autoIncrement())
  await db.schema
    .createTable('monitors')
    .addColumn('id', idType, id)
    .addColumn('wallet_id', 'bigint', (col) => col.notNull().references('wallets.id'))
    .addColumn('asset_id', 'bigint', (col) => col.notNull().references('assets.id'))
    .addColumn('below', 'bigint')
    .addColumn('above', 'bigint')
    .addColumn('state', 'text', (col) => col.notNull())
    .addColumn('created_at', 'text', (col) => col.notNull())
    .addCheckConstraint('monitors_one_threshold', sql`(below is null) <> (above is null)`)
    .addCheckConstraint('monitors_state', sql`state in ('normal', 'crossed')`)
    .execute()
  await db.schema.createIndex('monitors_wallet').on('monitors').columns(['wallet_id', 'asset_id']).execute()
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('monitors').execute()
}
