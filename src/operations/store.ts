import { sql } from 'kysely'
import type { Db, Executor } from '../db/database.ts'
import { isPostgres } from '../db/dialect.ts'
import { MINT_WALLET_ID } from '../ledger/ledger.types.ts'

/** Restore order, parents first; tables beyond these follow in name order. */
const TABLE_ORDER = [
  'users',
  'wallets',
  'user_sessions',
  'wallet_users',
  'wallet_sessions',
  'assets',
  'holdings',
  'transactions',
  'transaction_assets',
  'holds',
  'hold_assets',
  'idempotency_keys',
  'webhooks',
  'events',
  'webhook_deliveries',
  'webhook_attempts',
]

/** Never in a backup: they describe running processes or bookkeeping a restore redoes, not data. */
const OPERATIONAL_TABLES = new Set([
  'coffer_migrations',
  'coffer_migrations_lock',
  'rate_limit_hits',
  'page_generation',
  'webhook_lease_counts',
  // PostgreSQL's queue of transactions awaiting a position before migration 0040.
  'journal_pending',
  // Where the retention job stopped; a restored store's first run starts over.
  'retention_state',
])

/**
 * Columns never in a backup: PostgreSQL's id of the transaction that wrote a row (migration 0040)
 * means nothing on another server; a restore's rows get its own.
 */
const OPERATIONAL_COLUMNS = new Set(['transactions.journal_xid'])

/** Whether a backup carries this column of `table`. */
export const isBackedUpColumn = (table: string, column: string): boolean => !OPERATIONAL_COLUMNS.has(`${table}.${column}`)

/** The data tables of the store, in restore order; empty when it holds no Coffer schema yet. */
export async function listDataTables(db: Executor): Promise<string[]> {
  const { rows } = isPostgres(db)
    ? await sql<{ name: string }>`select tablename as name from pg_tables where schemaname = current_schema()`.execute(db)
    : await sql<{ name: string }>`select name from sqlite_master where type = 'table' and name not like 'sqlite_%'`.execute(db)
  const names = rows.map((row) => row.name).filter((name) => !OPERATIONAL_TABLES.has(name))
  const known = TABLE_ORDER.filter((name) => names.includes(name))
  const later = names.filter((name) => !TABLE_ORDER.includes(name)).sort()
  return [...known, ...later]
}

export async function countRows(db: Executor, table: string): Promise<number> {
  const { rows } = await sql<{ count: number | string }>`select count(*) as count from ${sql.table(table)}`.execute(db)
  return Number(rows[0].count)
}

/** Rows a restore would collide with (all but the `mint` wallet); empty when the store may be restored into. */
export async function findExistingData(db: Db): Promise<string[]> {
  const found: string[] = []
  for (const table of await listDataTables(db)) {
    // Its one row is written by its migration, whatever the store holds.
    if (table === 'event_state') continue
    const count =
      table === 'journal_state'
        ? Number((await db.selectFrom('journal_state').select('size').where('id', '=', 1).executeTakeFirst())?.size ?? 0)
        : table === 'wallets'
          ? Number(
              (
                await db
                  .selectFrom('wallets')
                  .select((eb) => eb.fn.countAll<number>().as('count'))
                  .where('id', '<>', MINT_WALLET_ID)
                  .executeTakeFirstOrThrow()
              ).count,
            )
          : await countRows(db, table)
    if (count > 0) found.push(`${count} ${table}`)
  }
  return found
}

/** A table or column name as a quoted SQL identifier, for statements written straight on the driver. */
export const quoteName = (name: string): string => `"${name.replaceAll('"', '""')}"`
