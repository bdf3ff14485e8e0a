import fs from 'node:fs'
import path from 'node:path'
import { sql, type Transaction } from 'kysely'
import type { Database } from '../db/database.ts'
import { isPostgres } from '../db/dialect.ts'
import { listAppliedMigrations } from '../db/migrate.ts'
import { withRetries } from '../db/retry.ts'
import type { DB } from '../db/tables.ts'
import { VERSION } from '../version.ts'
import { BACKUP_FORMAT, BackupError, BackupWriter, type BackupHeader } from './backup-format.ts'
import { countRows, listDataTables } from './store.ts'

const PAGE = 2000

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
        let columns: string[] | undefined
        for await (const rows of readTable(trx, table)) {
          if (!columns) {
            columns = Object.keys(rows[0])
            await writer.write({ table, columns })
          }
          for (const row of rows) await writer.write(columns.map((column) => row[column]))
          done += rows.length
          options.progress?.(table, done, total)
        }
        if (!columns) await writer.write({ table, columns: [] })
      }
      return { tables: counts, rows: total }
    })
}

/** A table's rows in pages (a cursor on PostgreSQL, by rowid on SQLite), never all in memory. */
async function* readTable(trx: Transaction<DB>, table: string): AsyncGenerator<Record<string, unknown>[]> {
  if (isPostgres(trx)) {
    await sql`declare coffer_backup no scroll cursor for select * from ${sql.table(table)}`.execute(trx)
    try {
      for (;;) {
        const { rows } = await sql<Record<string, unknown>>`fetch forward ${sql.raw(String(PAGE))} from coffer_backup`.execute(trx)
        if (rows.length === 0) return
        yield rows
      }
    } finally {
      await sql`close coffer_backup`.execute(trx)
    }
  }
  let after = 0
  for (;;) {
    const { rows } = await sql<
      Record<string, unknown> & { coffer_rowid: number }
    >`select rowid as coffer_rowid, * from ${sql.table(table)} where rowid > ${after} order by rowid limit ${PAGE}`.execute(trx)
    if (rows.length === 0) return
    after = rows[rows.length - 1].coffer_rowid
    yield rows.map(({ coffer_rowid: _rowid, ...row }) => row)
  }
}
