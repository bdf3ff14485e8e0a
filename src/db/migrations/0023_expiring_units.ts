import { sql, type Kysely } from 'kysely'
import { isPostgres } from '../dialect.ts'
import { rebuildSqliteTable } from './sqlite-rebuild.ts'

/**
 * Expiring units (`docs/expiry.md`):
 *
 * - `assets.expiring`: 1 once the asset has had an issuance with `expires_at` (never cleared).
 * - `holdings.dated`: 1 once the holding has had units with an expiry. Holdings without it carry
 *   no lots and the write path does no per-expiry work for them.
 * - `lots`: a dated holding's units by expiry instant, with what pending holds reserve of each;
 *   units of the holding beyond the lots never expire. Kept by the write path under the wallet's
 *   turn, like holdings, as one upsert of net changes; no CHECK, as the changes are added in
 *   `on conflict` and both databases check the proposed row first (`coffer verify` checks them).
 * - `transaction_lots` and `hold_lots`: which dated units each transaction moved and each hold
 *   reserved (append-only, like the lines they detail); `coffer verify` rebuilds `lots` from the
 *   former, and a capture takes the latter.
 * - `transactions.kind` gains `expiry`. SQLite cannot change a column's CHECK, so it rebuilds the
 *   table as its documented twelve steps do, keeping every row, index and the id sequence.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .alterTable('assets')
    .addColumn('expiring', 'integer', (col) => col.notNull().defaultTo(0))
    .execute()
  await db.schema
    .alterTable('holdings')
    .addColumn('dated', 'integer', (col) => col.notNull().defaultTo(0))
    .execute()
  await db.schema
    .createTable('lots')
    .addColumn('wallet_id', 'bigint', (col) => col.notNull())
    .addColumn('asset_id', 'bigint', (col) => col.notNull())
    .addColumn('expires_at', 'text', (col) => col.notNull())
    .addColumn('quantity', 'bigint', (col) => col.notNull())
    .addColumn('held', 'bigint', (col) => col.notNull().defaultTo(0))
    .addPrimaryKeyConstraint('lots_pk', ['wallet_id', 'asset_id', 'expires_at'])
    .execute()
  // The expiry job's due lots: those with units that no hold reserves.
  await db.schema.createIndex('lots_due').on('lots').column('expires_at').where(sql.ref('quantity'), '>', sql.ref('held')).execute()
  await db.schema
    .createTable('transaction_lots')
    .addColumn('transaction_id', 'bigint', (col) => col.notNull())
    .addColumn('asset_id', 'bigint', (col) => col.notNull())
    .addColumn('expires_at', 'text', (col) => col.notNull())
    .addColumn('quantity', 'bigint', (col) => col.notNull())
    .addPrimaryKeyConstraint('transaction_lots_pk', ['transaction_id', 'asset_id', 'expires_at'])
    .addCheckConstraint('transaction_lots_positive', sql`quantity > 0`)
    .execute()
  await db.schema
    .createTable('hold_lots')
    .addColumn('hold_id', 'bigint', (col) => col.notNull())
    .addColumn('asset_id', 'bigint', (col) => col.notNull())
    .addColumn('expires_at', 'text', (col) => col.notNull())
    .addColumn('quantity', 'bigint', (col) => col.notNull())
    .addPrimaryKeyConstraint('hold_lots_pk', ['hold_id', 'asset_id', 'expires_at'])
    .addCheckConstraint('hold_lots_positive', sql`quantity > 0`)
    .execute()
  await setKinds(db, KINDS_BEFORE, [...KINDS_BEFORE, 'expiry'])
}

const KINDS_BEFORE = ['transfer', 'issuance', 'burn', 'sweep', 'capture', 'reversal']

const kindList = (kinds: string[]) => kinds.map((kind) => `'${kind}'`).join(', ')

// eslint-disable-next-line @typescript-eslint/no-explicit-any
async function setKinds(db: Kysely<any>, from: string[], to: string[]): Promise<void> {
  if (isPostgres(db)) {
    await sql`alter table transactions drop constraint if exists transactions_kind_check`.execute(db)
    await sql`alter table transactions add constraint transactions_kind_check check (kind in (${sql.raw(kindList(to))}))`.execute(db)
    return
  }
  await rebuildSqliteTable(db, 'transactions', `kind in (${kindList(from)})`, `kind in (${kindList(to)})`)
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  // Expiry transactions are ledger rows, never deleted: a ledger that has any stays at this version.
  const { rows } = await sql<{ n: number }>`select count(*) as n from transactions where kind = 'expiry'`.execute(db)
  if (Number(rows[0].n) > 0) throw new Error('the ledger has expiry transactions: it cannot go back before expiring units')
  await setKinds(db, [...KINDS_BEFORE, 'expiry'], KINDS_BEFORE)
  await db.schema.dropTable('hold_lots').execute()
  await db.schema.dropTable('transaction_lots').execute()
  await db.schema.dropTable('lots').execute()
  await db.schema.alterTable('holdings').dropColumn('dated').execute()
  await db.schema.alterTable('assets').dropColumn('expiring').execute()
}
