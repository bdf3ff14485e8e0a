import { sql, type Kysely } from 'kysely'

/**
 * SQLite: `table` again with one piece of its definition changed (SQLite cannot alter a column's
 * constraints), keeping rows, ids, indexes, triggers and the id sequence. Foreign keys are off while
 * the table is swapped, so the tables referring to it find the new one under its name, then checked
 * before they are back on.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function rebuildSqliteTable(db: Kysely<any>, table: string, from: string, to: string): Promise<void> {
  const { rows: tables } = await sql<{ sql: string }>`select sql from sqlite_master where type = 'table' and name = ${table}`.execute(db)
  const created = tables[0].sql
  if (!created.includes(from)) throw new Error(`${table} has no "${from}" to change`)
  const { rows: indexes } = await sql<{ sql: string }>`
    select sql from sqlite_master where tbl_name = ${table} and type in ('index', 'trigger') and sql is not null`.execute(db)
  await swapSqliteTable(db, table, async () => {
    const { rows: sequence } = await sql<{ seq: number }>`select seq from sqlite_sequence where name = ${table}`.execute(db)
    const rebuilt = created.replace(from, to).replace(new RegExp(`^CREATE TABLE "?${table}"?`, 'i'), `CREATE TABLE "${table}_rebuilt"`)
    await sql.raw(rebuilt).execute(db)
    await sql.raw(`insert into "${table}_rebuilt" select * from "${table}"`).execute(db)
    await sql.raw(`drop table "${table}"`).execute(db)
    await sql.raw(`alter table "${table}_rebuilt" rename to "${table}"`).execute(db)
    for (const index of indexes) await sql.raw(index.sql).execute(db)
    if (sequence.length > 0) await sql`update sqlite_sequence set seq = max(seq, ${sequence[0].seq}) where name = ${table}`.execute(db)
  })
}

/**
 * Runs `rebuild` (a table written again and renamed into place) in one transaction with foreign
 * keys off, so the tables referring to it find the new one under its name; they are checked
 * before the commit and on again after.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function swapSqliteTable(db: Kysely<any>, table: string, rebuild: () => Promise<void>): Promise<void> {
  await sql`pragma foreign_keys = off`.execute(db)
  try {
    await sql`begin immediate`.execute(db)
    try {
      await rebuild()
      const broken = await sql`pragma foreign_key_check`.execute(db)
      if (broken.rows.length > 0) throw new Error(`rebuilding ${table} left ${broken.rows.length} broken references`)
      await sql`commit`.execute(db)
    } catch (error) {
      await sql`rollback`.execute(db)
      throw error
    }
  } finally {
    await sql`pragma foreign_keys = on`.execute(db)
  }
}
