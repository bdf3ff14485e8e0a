import { sql, type Kysely } from 'kysely'
import { isPostgres } from '../dialect.ts'

/**
 * PostgreSQL: the journal's references are kept by the write path and a trigger refusing DELETE
 * and TRUNCATE, not by foreign keys; SQLite keeps its own (`docs/decisions.md#ledger`).
 */
export const LEDGER_REFERENCES = [
  { table: 'transactions', column: 'sending_wallet_id', parent: 'wallets' },
  { table: 'transactions', column: 'receiving_wallet_id', parent: 'wallets' },
  { table: 'transaction_assets', column: 'transaction_id', parent: 'transactions' },
  { table: 'transaction_assets', column: 'asset_id', parent: 'assets' },
  { table: 'events', column: 'wallet_id', parent: 'wallets' },
  { table: 'events', column: 'transaction_id', parent: 'transactions' },
] as const

const KEPT_TABLES = ['wallets', 'assets', 'transactions'] as const

// The names PostgreSQL gave the constraints declared inline in 0001.
const constraintName = (table: string, column: string) => `${table}_${column}_fkey`

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  if (!isPostgres(db)) return
  await sql`
    create function coffer_refuse_delete() returns trigger language plpgsql as $$
    begin
      raise exception 'rows of % are never deleted: the journal refers to them', tg_table_name using errcode = 'restrict_violation';
    end
    $$`.execute(db)
  for (const table of KEPT_TABLES) {
    await sql`create trigger ${sql.id(`${table}_never_deleted`)} before delete or truncate on ${sql.table(table)}
      for each statement execute function coffer_refuse_delete()`.execute(db)
  }
  for (const { table, column } of LEDGER_REFERENCES) {
    await db.schema.alterTable(table).dropConstraint(constraintName(table, column)).execute()
  }
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  if (!isPostgres(db)) return
  for (const { table, column, parent } of LEDGER_REFERENCES) {
    await db.schema.alterTable(table).addForeignKeyConstraint(constraintName(table, column), [column], parent, ['id']).execute()
  }
  for (const table of KEPT_TABLES) {
    await sql`drop trigger ${sql.id(`${table}_never_deleted`)} on ${sql.table(table)}`.execute(db)
  }
  await sql`drop function coffer_refuse_delete()`.execute(db)
}
