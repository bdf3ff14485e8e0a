import { sql, type Kysely } from 'kysely'

/**
 * Balances in time (`GET /wallet/assets?as_of=…`): every move writes, for each wallet and asset it
 * touches, the holding as it stood right after it (`running_balances`). A wallet's holdings at an
 * instant are then one index probe per asset it ever held, the last row of (wallet, asset) at or
 * before that instant, whatever the length of its history (`docs/decisions.md#balances-in-time-and-statements`).
 *
 * Keyed by (wallet, asset, time, transaction): the ledger writes a wallet's moves one after the
 * other (its turn, `ledger/moves.repository.ts`), so within one wallet time and id grow together
 * and the last row by time is the last by id. No foreign keys, as for the journal's own
 * references on PostgreSQL (0005): the write path keeps them and `coffer verify` checks the rows
 * against the holdings. (A SQLite `without rowid` table would save a b-tree, but backups page
 * through every table by rowid: `operations/backup.ts`.)
 *
 * Existing journals are filled in: for each wallet and asset, the running sum of its lines in id
 * order.
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

/**
 * Every running balance the journal gives: for each side of each line, the running sum of that
 * wallet's lines of that asset in id order (`wallet_id, asset_id, created_at, transaction_id,
 * quantity`). What this migration fills in, and what `coffer verify` checks the table against
 * and `coffer verify --repair` rewrites it from (`ledger/verify.ts`, `ledger/repair.ts`). With
 * `wallets`, only the rows of the wallets with ids in that range (each wallet's sums are its own).
 */
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
