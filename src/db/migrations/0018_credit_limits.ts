import { sql, type Kysely } from 'kysely'
import { isPostgres } from '../dialect.ts'
import { swapSqliteTable } from './sqlite-rebuild.ts'

/**
 * Credit limits (`docs/credit.md`): a wallet's holding of an asset may go down to minus its limit.
 *
 * - `holdings.credit_limit`: the limit in force, 0 without one; read with the holding by every move
 *   (what can be spent is `quantity - held + credit_limit`). A limit on an asset the wallet never
 *   held makes its holding row, at 0. `holdings_not_negative` goes: a holding may now be below
 *   zero, and below a limit lowered after the debt was made, so no row-level check can say which
 *   are right; the write path decides, and `coffer verify` checks each transaction against its
 *   limit. SQLite cannot drop a check, so it rebuilds `holdings` (foreign keys off while the table
 *   is swapped, then checked).
 * - `credit_limits`: every limit ever set, never changed: `after_transaction` is the last
 *   transaction id drawn when it was set, so a transaction of the wallet with a greater id committed
 *   under it (the wallet's transactions draw their ids in commit order under its turn). `coffer
 *   verify` checks every transaction against the limit in force when it committed. No foreign
 *   keys: a restore writes the rows in any order.
 */
/** The mint wallet's id, as migration 0001 made it (a migration keeps its own copy). */
const MINT_WALLET_ID = 1

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  const postgres = isPostgres(db)
  if (postgres) {
    await sql`alter table holdings drop constraint holdings_not_negative`.execute(db)
    await db.schema
      .alterTable('holdings')
      .addColumn('credit_limit', 'bigint', (col) => col.notNull().defaultTo(0))
      .execute()
  } else await rebuildSqliteHoldings(db, true)
  await db.schema
    .createTable('credit_limits')
    .addColumn('id', postgres ? 'bigserial' : 'integer', (col) => (postgres ? col.primaryKey() : col.primaryKey().autoIncrement()))
    .addColumn('wallet_id', 'bigint', (col) => col.notNull())
    .addColumn('asset_id', 'bigint', (col) => col.notNull())
    .addColumn('credit_limit', 'bigint', (col) => col.notNull())
    .addColumn('set_at', 'text', (col) => col.notNull())
    .addColumn('after_transaction', 'bigint', (col) => col.notNull())
    .execute()
  await db.schema.createIndex('credit_limits_holding').on('credit_limits').columns(['wallet_id', 'asset_id', 'after_transaction']).execute()
  await db.schema.createIndex('credit_limits_asset').on('credit_limits').column('asset_id').execute()
}

/** SQLite: `holdings` again with `credit_limit` and no sign check (up), or as before (down), keeping every row. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
async function rebuildSqliteHoldings(db: Kysely<any>, withCredit: boolean): Promise<void> {
  await swapSqliteTable(db, 'holdings', async () => {
    const last = withCredit
      ? sql`credit_limit bigint not null default 0,`
      : sql.raw(`constraint holdings_not_negative check (quantity >= 0 or wallet_id = ${MINT_WALLET_ID}),`)
    await sql`
      create table holdings_rebuilt (
        wallet_id bigint not null references wallets(id),
        asset_id bigint not null references assets(id),
        quantity bigint not null,
        held bigint not null default 0 check (held >= 0),
        ${last}
        constraint holdings_pk primary key (wallet_id, asset_id)
      )`.execute(db)
    await sql`insert into holdings_rebuilt (wallet_id, asset_id, quantity, held)
      select wallet_id, asset_id, quantity, held from holdings`.execute(db)
    await sql`drop table holdings`.execute(db)
    await sql`alter table holdings_rebuilt rename to holdings`.execute(db)
  })
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('credit_limits').execute()
  if (isPostgres(db)) {
    await db.schema.alterTable('holdings').dropColumn('credit_limit').execute()
    await sql
      .raw(`alter table holdings add constraint holdings_not_negative check (quantity >= 0 or wallet_id = ${MINT_WALLET_ID})`)
      .execute(db)
  } else await rebuildSqliteHoldings(db, false)
}
