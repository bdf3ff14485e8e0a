import fs from 'node:fs'
import path from 'node:path'
import { Kysely, PostgresDialect } from 'kysely'
import type pg from 'pg'
import { to as copyTo } from 'pg-copy-streams'
import type { Executor } from '../db/database.types.ts'
import type { Database } from '../db/database.ts'
import { sqliteStatementsOf } from '../db/sqlite-statements.ts'
import type { SqliteStatements } from '../db/storage-state.ts'
import { listAppliedMigrations } from '../db/migrate.ts'
import { withRetries } from '../db/retry.ts'
import type { DB } from '../db/tables.ts'
import { VERSION } from '../version.ts'
import { BACKUP_FORMAT, BackupError, BackupWriter, type BackupHeader } from './backup-format.ts'
import { countRows, isBackedUpColumn, listDataTables, quoteName } from './store.ts'

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
  secretsKeyId?: (db: Executor) => Promise<string | null>
}

/** Writes the whole store to `writer` from one snapshot (`createBackup`), all but the trailer. */
function writeSnapshot(
  database: Database,
  writer: BackupWriter,
  options: BackupOptions,
): Promise<{ tables: Record<string, number>; rows: number }> {
  const write = async (db: Executor, read: (table: string) => AsyncIterable<Page> | Iterable<Page>) => {
    const tables = await listDataTables(db)
    if (!tables.includes('transactions')) throw new BackupError('the store holds no Coffer data yet: nothing to back up')
    const counts: Record<string, number> = {}
    for (const table of tables) counts[table] = await countRows(db, table)
    const total = Object.values(counts).reduce((sum, count) => sum + count, 0)
    const header: BackupHeader = {
      coffer_backup: BACKUP_FORMAT,
      created_at: new Date().toISOString(),
      coffer_version: VERSION,
      source: database.dialect,
      migrations: await listAppliedMigrations(db),
      tables: counts,
      secrets_key_id: options.secretsKeyId ? await options.secretsKeyId(db) : null,
    }
    await writer.write(header)
    let done = 0
    for (const table of tables) {
      options.progress?.(table, done, total)
      let started = false
      for await (const { columns, lines, rows } of read(table)) {
        if (!started) await writer.write({ table, columns })
        started = true
        await writer.writeLines(lines)
        done += rows
        options.progress?.(table, done, total)
      }
      if (!started) await writer.write({ table, columns: [] })
    }
    return { tables: counts, rows: total }
  }
  if (database.dialect === 'postgres') return onSnapshotConnection(database, (db, client) => write(db, (table) => copyTable(client, table)))
  return database.db.transaction().execute(async (trx) => write(trx, (table) => readSqliteTable(sqliteStatementsOf(trx)!, table)))
}

/** Some rows of a table as backup lines (a JSON array each, each line ending in a newline), in `columns` order. */
interface Page {
  columns: string[]
  lines: Buffer | string
  rows: number
}

/**
 * PostgreSQL: `work` on one connection in a read-only `REPEATABLE READ` transaction (one snapshot
 * for every table), with Kysely on that same connection for the header's reads.
 */
async function onSnapshotConnection<T>(database: Database, work: (db: Kysely<DB>, client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await database.postgresClient!()
  const db = new Kysely<DB>({
    dialect: new PostgresDialect({
      pool: { connect: async () => ({ query: client.query.bind(client), release() {} }), end: async () => {} } as never,
    }),
  })
  try {
    await client.query('begin isolation level repeatable read read only')
    // The rows of a table in one statement: not bounded as a request's statement is.
    await client.query('set local statement_timeout = 0')
    await client.query('set local idle_in_transaction_session_timeout = 0')
    const result = await work(db, client)
    await client.query('commit')
    client.release()
    return result
  } catch (error) {
    await client.query('rollback').catch(() => {})
    client.release(true)
    throw error
  }
}

/**
 * PostgreSQL: a table by `COPY … TO STDOUT`, the server writing each row's JSON array. COPY's text
 * format doubles each backslash (a JSON line holds no tab or line break), so each is halved again.
 */
async function* copyTable(client: pg.ClientBase, table: string): AsyncGenerator<Page> {
  const { fields } = await client.query(`select * from ${quoteName(table)} limit 0`)
  const columns = fields.map((field) => field.name).filter((column) => isBackedUpColumn(table, column))
  const array = `json_build_array(${columns.map(quoteName).join(', ')})`
  const stream = client.query(copyTo(`copy (select ${array} from ${quoteName(table)}) to stdout`))
  let odd = false
  for await (const chunk of stream as AsyncIterable<Buffer>) {
    let text = chunk.toString('latin1')
    if (odd) text = `\\${text}`
    odd = false
    if (text.includes('\\')) {
      // A chunk may end between the two backslashes of one.
      const trailing = text.length - text.replace(/\\+$/, '').length
      odd = trailing % 2 === 1
      if (odd) text = text.slice(0, -1)
      text = text.replaceAll('\\\\', '\\')
    }
    yield { columns, lines: Buffer.from(text, 'latin1'), rows: countLines(chunk) }
  }
}

function countLines(chunk: Buffer): number {
  let count = 0
  for (let at = chunk.indexOf(NEWLINE); at !== -1; at = chunk.indexOf(NEWLINE, at + 1)) count++
  return count
}

const NEWLINE = 0x0a

/**
 * SQLite: a table's rows in pages by key, never all in memory, each page's lines written by SQLite
 * (`json_array`, joined) in one string: by rowid, or by the primary key of a table without one.
 */
function* readSqliteTable(statements: SqliteStatements, table: string): Generator<Page> {
  const key = sqliteKeyOf(statements, table)
  const name = quoteName(table)
  const order = key.map(quoteName).join(', ')
  const columns = statements
    .prepare(`select * from ${name} limit 0`)
    .columns()
    .map((column) => column.name)
  const page = (where: string) =>
    statements
      .prepare(
        `with page as materialized (select ${order}, json_array(${columns.map(quoteName).join(', ')}) as line from ${name} ${where} ` +
          `order by ${order} limit ${PAGE}) ` +
          `select ${order}, (select count(*) from page), (select group_concat(line, char(10)) from page) from page ` +
          `order by ${key.map((column) => `${quoteName(column)} desc`).join(', ')} limit 1`,
      )
      .raw(true)
  const first = page('')
  const next = page(`where (${order}) > (${key.map(() => '?').join(', ')})`)
  let after: unknown[] | undefined
  for (;;) {
    const row = (after ? next.get(after) : first.get()) as unknown[] | undefined
    if (!row) return
    after = row.slice(0, key.length)
    yield { columns, rows: row[key.length] as number, lines: `${row[key.length + 1] as string}\n` }
  }
}
/** SQLite: the columns rows are paged by: `rowid`, or a `WITHOUT ROWID` table's primary key. */
function sqliteKeyOf(statements: SqliteStatements, table: string): string[] {
  const listed = statements.prepare('select wr from pragma_table_list where name = ?').get(table) as { wr: number } | undefined
  if (!listed?.wr) return ['rowid']
  const columns = statements.prepare('select name, pk from pragma_table_info(?) where pk > 0 order by pk').all(table) as { name: string }[]
  return columns.map((column) => column.name)
}
