import { sql, type Kysely } from 'kysely'

/**
 * Balances in time: each move writes the holdings it changed as they stood right after it, so a
 * balance at an instant is one probe per asset (`docs/decisions.md#balances-in-time-and-statements`).
 * No foreign keys, as in 0005; existing journals are filled in from their lines.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('running_balances')
    .addColumn('wallet_id', 'bigint', (col) => col.notNull())
    .addColumn('asset_id', 'bigint', (col) => col.notNull())
    .addColumn('created_at', 'text', (col) => col.notNull())
    .addColumn('transaction_id', 'bigint', (col) => col.notNull())
    .addColumn('quantity', 'bigint', (col) => col.notNull())
    .addPrimaryKeyConstraint('running_balances_pk', ['wallet_id', 'asset_id', 'created_at', 'transaction_id'])
    .execute()
  await sql`
    insert into running_balances (wallet_id, asset_id, created_at, transaction_id, quantity)
    ${runningSums()}`.execute(db)
}

/** Every running balance the journal gives (what verify checks and repair rewrites); `wallets` limits it to an id range. */
export function runningSums(wallets?: { from: number; to: number }) {
  const of = (column: string) => (wallets ? sql`where ${sql.ref(column)} between ${wallets.from} and ${wallets.to}` : sql``)
  return sql`
    select wallet_id, asset_id, created_at, transaction_id,
      sum(delta) over (partition by wallet_id, asset_id order by transaction_id rows unbounded preceding) as quantity
    from (
      select t.sending_wallet_id as wallet_id, l.asset_id, t.created_at, t.id as transaction_id, -l.quantity as delta
      from transactions t join transaction_assets l on l.transaction_id = t.id ${of('t.sending_wallet_id')}
      union all
      select t.receiving_wallet_id, l.asset_id, t.created_at, t.id, l.quantity
      from transactions t join transaction_assets l on l.transaction_id = t.id ${of('t.receiving_wallet_id')}
    ) as sides`
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('running_balances').execute()
}
