import fs from 'node:fs'
import path from 'node:path'
import { sql, type Transaction } from 'kysely'
import type { Database } from '../db/database.ts'
import { sqliteStatementsOf } from '../db/sqlite-statements.ts'
import type { SqliteStatements } from '../db/storage-state.ts'
import { listAppliedMigrations } from '../db/migrate.ts'
import { withRetries } from '../db/retry.ts'
import type { DB } from '../db/tables.ts'
import { VERSION } from '../version.ts'
import { BACKUP_FORMAT, BackupError, BackupWriter, type BackupHeader } from './backup-format.ts'
import { countRows, listDataTables, quoteName } from './store.ts'

const PAGE = 5000

export interface BackupSummary {
  file: string
  tables: Record<string, number>
  rows: number
  bytes: number
}

/** Called as a backup or restore goes: a table started, and rows done of the whole. */
export type Progress = (table: string, done: number, total: number) => void

/**
 * Backs up the whole store while the service runs, read in one snapshot so a transfer is wholly in
 * or out; `file` appears only complete. Throws BackupError when the store holds no Coffer schema.
 */
export async function createBackup(database: Database, file: string, options: BackupOptions = {}): Promise<BackupSummary> {
  const partial = `${file}.partial`
  if (!fs.existsSync(path.dirname(path.resolve(file)))) throw new BackupError(`could not write ${file}: its directory does not exist`)
  let writer: BackupWriter | undefined
  try {
    // Only reads, so a retried snapshot starts the partial file afresh.
    const { written, summary } = await withRetries(async () => {
      await writer?.discard()
      writer = new BackupWriter(partial)
      return { written: writer, summary: await writeSnapshot(database, writer, options) }
    })
    await written.finish(summary.rows)
    fs.renameSync(partial, file)
    return { file, ...summary, bytes: fs.statSync(file).size }
  } catch (error) {
    writer?.destroy()
    try {
      fs.rmSync(partial, { force: true })
    } catch {
      // Nothing was written there.
    }
    const { syscall } = error as NodeJS.ErrnoException
    if (syscall !== undefined) throw new BackupError(`could not write ${file} (${(error as Error).message}); no backup was written`)
    throw error
  }
}

interface BackupOptions {
  progress?: Progress
  secretsKeyId?: (trx: Transaction<DB>) => Promise<string | null>
}

/** Writes the whole store to `writer` from one snapshot (`createBackup`), all but the trailer. */
function writeSnapshot(
  database: Database,
  writer: BackupWriter,
  options: BackupOptions,
): Promise<{ tables: Record<string, number>; rows: number }> {
  return database.db
    .transaction()
    .setIsolationLevel('repeatable read')
    .setAccessMode('read only')
    .execute(async (trx) => {
      const tables = await listDataTables(trx)
      if (!tables.includes('transactions')) throw new BackupError('the store holds no Coffer data yet: nothing to back up')
      const counts: Record<string, number> = {}
      for (const table of tables) counts[table] = await countRows(trx, table)
      const total = Object.values(counts).reduce((sum, count) => sum + count, 0)
      const header: BackupHeader = {
        coffer_backup: BACKUP_FORMAT,
        created_at: new Date().toISOString(),
        coffer_version: VERSION,
        source: database.dialect,
        migrations: await listAppliedMigrations(trx),
        tables: counts,
        secrets_key_id: options.secretsKeyId ? await options.secretsKeyId(trx) : null,
      }
      await writer.write(header)
      let done = 0
      for (const table of tables) {
        options.progress?.(table, done, total)
        let started = false
        for await (const { columns, rows } of readTable(trx, table)) {
          if (!started) await writer.write({ table, columns })
          started = true
          // A page's lines in one write: the checksum and gzip see the same bytes as line by line.
          await writer.writeLines(rows.map((row) => `${JSON.stringify(row)}\n`).join(''))
          done += rows.length
          options.progress?.(table, done, total)
        }
        if (!started) await writer.write({ table, columns: [] })
      }
      return { tables: counts, rows: total }
    })
}

/** A page of a table's rows as arrays of values, in `columns` order. */
interface Page {
  columns: string[]
  rows: unknown[][]
}

/** A table's rows in pages (a cursor on PostgreSQL, by key on SQLite), never all in memory. */
async function* readTable(trx: Transaction<DB>, table: string): AsyncGenerator<Page> {
  const statements = sqliteStatementsOf(trx)
  if (!statements) {
    await sql`declare coffer_backup no scroll cursor for select * from ${sql.table(table)}`.execute(trx)
    try {
      for (;;) {
        const { rows } = await sql<Record<string, unknown>>`fetch forward ${sql.raw(String(PAGE))} from coffer_backup`.execute(trx)
        if (rows.length === 0) return
        const columns = Object.keys(rows[0])
        yield { columns, rows: rows.map((row) => columns.map((column) => row[column])) }
      }
    } finally {
      await sql`close coffer_backup`.execute(trx)
    }
  }
  // Straight on the driver, rows as arrays: by rowid, or by the primary key of a table without one.
  const key = sqliteKeyOf(statements, table)
  const name = quoteName(table)
  const order = key.map(quoteName).join(', ')
  const first = statements.prepare(`select ${order}, * from ${name} order by ${order} limit ${PAGE}`).raw(true)
  const next = statements
    .prepare(`select ${order}, * from ${name} where (${order}) > (${key.map(() => '?').join(', ')}) order by ${order} limit ${PAGE}`)
    .raw(true)
  const columns = first
    .columns()
    .slice(key.length)
    .map((column) => column.name)
  let after: unknown[] | undefined
  for (;;) {
    const rows = (after ? next.all(after) : first.all()) as unknown[][]
    if (rows.length === 0) return
    after = rows[rows.length - 1].slice(0, key.length)
    yield { columns, rows: rows.map((row) => row.slice(key.length)) }
  }
}

/** SQLite: the columns rows are paged by: `rowid`, or a `WITHOUT ROWID` table's primary key. */
function sqliteKeyOf(statements: SqliteStatements, table: string): string[] {
  const listed = statements.prepare('select wr from pragma_table_list where name = ?').get(table) as { wr: number } | undefined
  if (!listed?.wr) return ['rowid']
  const columns = statements.prepare('select name, pk from pragma_table_info(?) where pk > 0 order by pk').all(table) as { name: string }[]
  return columns.map((column) => column.name)
}
