import { sql, type Kysely } from 'kysely'
import { isPostgres } from '../dialect.ts'

/**
 * SQLite: the ledger's tables that are read only through their primary key become `WITHOUT ROWID`,
 * so each row is stored once, in its key's b-tree, instead of once by rowid and again in the key's
 * index (`docs/performance.md#bulk-transfers-and-a-ledger-of-ten-million`). PostgreSQL keeps its
 * heap tables: nothing changes there.
 */
const TABLES = ['running_balances', 'transaction_metadata', 'journal_nodes']

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  if (!isPostgres(db)) await rebuild(db, true)
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  if (!isPostgres(db)) await rebuild(db, false)
}

/** Each table again from its own definition, with or without rowid, rows copied in key order; none has indexes, triggers or references. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
async function rebuild(db: Kysely<any>, withoutRowid: boolean): Promise<void> {
  await sql`begin immediate`.execute(db)
  try {
    for (const table of TABLES) {
      const { rows } = await sql<{ sql: string }>`select sql from sqlite_master where type = 'table' and name = ${table}`.execute(db)
      const body = rows[0].sql.slice(rows[0].sql.indexOf('(')).replace(/\s*without rowid\s*$/i, '')
      const { rows: key } = await sql<{ name: string }>`select name from pragma_table_info(${table}) where pk > 0 order by pk`.execute(db)
      const order = key.map((column) => `"${column.name}"`).join(', ')
      await sql.raw(`create table "${table}_rebuilt" ${body}${withoutRowid ? ' without rowid' : ''}`).execute(db)
      await sql.raw(`insert into "${table}_rebuilt" select * from "${table}" order by ${order}`).execute(db)
      await sql.raw(`drop table "${table}"`).execute(db)
      await sql.raw(`alter table "${table}_rebuilt" rename to "${table}"`).execute(db)
    }
    await sql`commit`.execute(db)
  } catch (error) {
    await sql`rollback`.execute(db)
    throw error
  }
}
