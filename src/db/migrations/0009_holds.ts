import { sql, type Kysely } from 'kysely'
import { isPostgres } from '../dialect.ts'
import { swapSqliteTable } from './sqlite-rebuild.ts'

/**
 * Holds: `holds`, `hold_assets` and `holdings.held` (spendable is `quantity - held`); references
 * without foreign keys on PostgreSQL, as in 0005. Hold events carry their own `body`, so SQLite
 * rebuilds `events` to make `transaction_id` nullable.
 */
export const HOLD_REFERENCES = [
  { table: 'holds', column: 'sending_wallet_id', parent: 'wallets' },
  { table: 'holds', column: 'receiving_wallet_id', parent: 'wallets' },
  { table: 'holds', column: 'transaction_id', parent: 'transactions' },
  { table: 'hold_assets', column: 'asset_id', parent: 'assets' },
] as const

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  const postgres = isPostgres(db)
  const idType = postgres ? 'bigserial' : 'integer'
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  const id = (col: any) => (postgres ? col.primaryKey() : col.primaryKey().autoIncrement())
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  const refers = (target: string) => (col: any) => (postgres ? col : col.references(target))

  await db.schema
    .createTable('holds')
    .addColumn('id', idType, id)
    .addColumn('sending_wallet_id', 'bigint', (col) => refers('wallets.id')(col.notNull()))
    .addColumn('receiving_wallet_id', 'bigint', (col) => refers('wallets.id')(col.notNull()))
    .addColumn('memo', 'text', (col) => col.notNull())
    .addColumn('metadata', 'text', (col) => col.notNull())
    .addColumn('status', 'text', (col) => col.notNull())
    .addColumn('created_at', 'text', (col) => col.notNull())
    .addColumn('expires_at', 'text', (col) => col.notNull())
    .addColumn('settled_at', 'text')
    .addColumn('transaction_id', 'bigint', refers('transactions.id'))
    .addCheckConstraint('holds_distinct_wallets', sql`sending_wallet_id <> receiving_wallet_id`)
    .addCheckConstraint('holds_status', sql`status in ('pending', 'captured', 'voided', 'expired')`)
    .execute()

  await db.schema.createIndex('holds_sending').on('holds').columns(['sending_wallet_id', 'id']).execute()
  await db.schema.createIndex('holds_receiving').on('holds').columns(['receiving_wallet_id', 'id']).execute()
  // Pending holds only: settled holds leave these indexes.
  await db.schema
    .createIndex('holds_pending_sending')
    .on('holds')
    .columns(['sending_wallet_id', 'expires_at'])
    .where(sql.ref('status'), '=', 'pending')
    .execute()
  await db.schema.createIndex('holds_pending_expiry').on('holds').column('expires_at').where(sql.ref('status'), '=', 'pending').execute()

  await db.schema
    .createTable('hold_assets')
    .addColumn('hold_id', 'bigint', (col) => col.notNull().references('holds.id'))
    .addColumn('asset_id', 'bigint', (col) => refers('assets.id')(col.notNull()))
    .addColumn('quantity', 'bigint', (col) => col.notNull())
    .addPrimaryKeyConstraint('hold_assets_pk', ['hold_id', 'asset_id'])
    .addCheckConstraint('hold_assets_positive', sql`quantity > 0`)
    .execute()

  await db.schema
    .alterTable('holdings')
    .addColumn('held', 'bigint', (col) =>
      col
        .notNull()
        .defaultTo(0)
        .check(sql`held >= 0`),
    )
    .execute()

  if (postgres) {
    await sql`alter table events alter column transaction_id drop not null`.execute(db)
    await db.schema.alterTable('events').addColumn('body', 'text').execute()
    return
  }
  await rebuildSqliteEvents(db, true)
}

/** SQLite: `events` rebuilt with or without `body`, keeping rows and ids; foreign keys checked after the swap. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
async function rebuildSqliteEvents(db: Kysely<any>, withHolds: boolean): Promise<void> {
  await swapSqliteTable(db, 'events', async () => {
    const { rows } = await sql<{ seq: number }>`select seq from sqlite_sequence where name = 'events'`.execute(db)
    const transactionColumn = withHolds
      ? sql`transaction_id bigint references transactions(id)`
      : sql`transaction_id bigint not null references transactions(id)`
    const bodyColumn = withHolds ? sql`, body text` : sql``
    await sql`
      create table events_rebuilt (
        id integer primary key autoincrement,
        event_id text not null unique,
        wallet_id bigint not null references wallets(id),
        type text not null,
        ${transactionColumn},
        created_at text not null${bodyColumn}
      )`.execute(db)
    const where = withHolds ? sql`` : sql`where transaction_id is not null`
    await sql`
      insert into events_rebuilt (id, event_id, wallet_id, type, transaction_id, created_at)
      select id, event_id, wallet_id, type, transaction_id, created_at from events ${where}`.execute(db)
    await sql`drop table events`.execute(db)
    await sql`alter table events_rebuilt rename to events`.execute(db)
    await sql`create index events_wallet on events (wallet_id, id)`.execute(db)
    if (rows.length > 0) await sql`update sqlite_sequence set seq = max(seq, ${rows[0].seq}) where name = 'events'`.execute(db)
  })
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  const holdEvents = sql`select id from events where transaction_id is null`
  await sql`delete from webhook_attempts
    where delivery_id in (select id from webhook_deliveries where event_id in (${holdEvents}))`.execute(db)
  await sql`delete from webhook_deliveries where event_id in (${holdEvents})`.execute(db)
  if (isPostgres(db)) {
    await sql`delete from events where transaction_id is null`.execute(db)
    await db.schema.alterTable('events').dropColumn('body').execute()
    await sql`alter table events alter column transaction_id set not null`.execute(db)
  } else {
    await rebuildSqliteEvents(db, false)
  }
  await db.schema.alterTable('holdings').dropColumn('held').execute()
  await db.schema.dropTable('hold_assets').execute()
  await db.schema.dropTable('holds').execute()
}
