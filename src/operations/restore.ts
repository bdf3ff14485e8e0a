import { once } from 'node:events'
import type { Writable } from 'node:stream'
import { sql, type Kysely } from 'kysely'
import type pg from 'pg'
import { from as copyFrom } from 'pg-copy-streams'
import type { Database } from '../db/database.ts'
import { isPostgres } from '../db/dialect.ts'
import { alignJournalAfterRestore } from '../journal/journal.service.ts'
import { MINT_WALLET_ID } from '../ledger/ledger.types.ts'
import { listAppliedMigrations, MIGRATION_NAMES, migrateTo, migrateToLatest } from '../db/migrate.ts'
import { withRetries } from '../db/retry.ts'
import { sqliteStatementsOf } from '../db/sqlite-statements.ts'
import type { SqliteStatements } from '../db/storage-state.ts'
import type { DB } from '../db/tables.ts'
import type { Progress } from './backup.ts'
import { BackupError, readBackup, type BackupHeader, type BackupSection } from './backup-format.ts'
import { findExistingData, listDataTables, quoteName } from './store.ts'

export interface CheckedBackup {
  file: string
  header: BackupHeader
  rows: number
}

/** Reads a whole backup without writing: format, shapes, counts, checksum, schema. Throws BackupError. */
export async function checkBackup(file: string): Promise<CheckedBackup> {
  let header: BackupHeader | undefined
  const trailer = await readBackup(file, (read) => {
    header = read
    checkMigrations(file, read)
  })
  return { file, header: header as BackupHeader, rows: trailer.rows }
}

function checkMigrations(file: string, header: BackupHeader): void {
  header.migrations.forEach((name, i) => {
    if (MIGRATION_NAMES[i] !== name) {
      throw new BackupError(
        `${file} was made by a newer Coffer (${header.coffer_version}): its schema has migration ${name}, ` +
          'which this release does not know; restore it with that version or later',
      )
    }
  })
  if (header.migrations.length === 0) throw new BackupError(`${file} is corrupted: its header names no migrations`)
}

export interface RestoreSummary {
  tables: Record<string, number>
  rows: number
  /** Migrations run after the rows were written, to bring an older backup up to date. */
  upgraded: string[]
}

/**
 * Restores a checked backup into an empty store of either kind in one transaction, ids and hashes as
 * they were, then migrates. Throws BackupError, writing nothing, into a store with data or a newer schema.
 */
export async function restoreBackup(database: Database, checked: CheckedBackup, progress?: Progress): Promise<RestoreSummary> {
  const { db } = database
  const applied = await listAppliedMigrations(db)
  const unknown = applied.find((name) => !MIGRATION_NAMES.includes(name))
  if (unknown)
    throw new BackupError(`the store has migration ${unknown}, which this release does not know: it was set up by a newer Coffer`)
  if (applied.length > 0) {
    const existing = await findExistingData(db)
    if (existing.length > 0)
      throw new BackupError(`the store is not empty (it holds ${existing.join(', ')}): restore only into an empty store`)
  }
  // The rows go into the schema they were read from (an empty store is moved down to it if it is newer).
  await migrateTo(db, checked.header.migrations[checked.header.migrations.length - 1])
  const statements = sqliteStatementsOf(db)
  // A retried transaction runs again from the start of the file.
  if (statements) await withRetries(() => restoreSqlite(database, statements, checked, progress))
  else await withRetries(() => restorePostgres(database, checked, progress))
  const upgraded = await migrateToLatest(db)
  await movePageGeneration(db)
  return { tables: checked.header.tables, rows: checked.rows, upgraded }
}

/** Rows of a restore handed over at a time. */
const CHUNK = 5_000

/** Calls `write` with each chunk of the backup's rows, tables it does not know refused, and reports progress. */
async function eachSection(
  checked: CheckedBackup,
  tables: Set<string>,
  write: (section: BackupSection) => Promise<void> | void,
  progress?: Progress,
): Promise<void> {
  let done = 0
  await readBackup(
    checked.file,
    () => {},
    async (section) => {
      if (!tables.has(section.table))
        throw new BackupError(`the store has no table ${section.table} at migration ${checked.header.migrations.at(-1)}`)
      await write(section)
      done += section.rows.length
      progress?.(section.table, done, checked.rows)
    },
    CHUNK,
  )
}

/** Rows the migrations wrote already (the `mint` wallet, the journal's and the events' state): updated to the backup's, not inserted. */
function takeExistingRows({ table, columns, rows }: BackupSection): { rest: unknown[][]; existing: Record<string, unknown>[] } {
  if (table !== 'wallets' && table !== 'journal_state' && table !== 'event_state') return { rest: rows, existing: [] }
  const objectOf = (row: unknown[]) => Object.fromEntries(columns.map((column, i) => [column, row[i]]))
  const at = columns.indexOf('id')
  const isExisting = (row: unknown[]) => table !== 'wallets' || Number(row[at]) === MINT_WALLET_ID
  return { rest: rows.filter((row) => !isExisting(row)), existing: rows.filter(isExisting).map(objectOf) }
}

/**
 * SQLite: one transaction with a rollback journal instead of the WAL (the rows are written once,
 * not to the log and again into the file, and a crash rolls the store back to empty), references
 * unchecked (they were checked where the backup was taken, and its checksum holds), secondary
 * indexes dropped and built again after the rows, and many rows per insert.
 */
async function restoreSqlite(database: Database, statements: SqliteStatements, checked: CheckedBackup, progress?: Progress): Promise<void> {
  const { db } = database
  const pragma = (text: string) => {
    const statement = statements.prepare(`pragma ${text}`)
    return statement.reader ? (statement.get() as Record<string, unknown>) : void statement.run()
  }
  const cacheSize = pragma('cache_size')?.cache_size
  pragma('foreign_keys = off')
  // Another connection holding the store keeps it in WAL mode; the restore is then only slower.
  pragma('journal_mode = delete')
  pragma(`cache_size = ${-256 * 1024}`)
  try {
    await db.transaction().execute(async (trx) => {
      const tables = new Set(await listDataTables(trx))
      const indexes = statements.prepare("select name, sql from sqlite_master where type = 'index' and sql is not null").all() as {
        name: string
        sql: string
      }[]
      for (const { name } of indexes) statements.prepare(`drop index ${quoteName(name)}`).run()
      await eachSection(
        checked,
        tables,
        async (section) => {
          const { rest, existing } = takeExistingRows(section)
          const any = trx as unknown as Kysely<Record<string, Record<string, unknown>>>
          for (const { id, ...values } of existing) await any.updateTable(section.table).set(values).where('id', '=', id).execute()
          insertRows(statements, section.table, section.columns, rest)
        },
        progress,
      )
      for (const index of indexes) statements.prepare(index.sql).run()
      if (tables.has('journal_state')) await alignJournalAfterRestore(trx)
    })
  } finally {
    pragma('journal_mode = wal')
    pragma('foreign_keys = on')
    pragma(`cache_size = ${cacheSize}`)
  }
}

/** Rows one insert statement takes at most on SQLite (its limit is 32,766 parameters). */
const ROWS_PER_INSERT = 100

function insertRows(statements: SqliteStatements, table: string, columns: string[], rows: unknown[][]): void {
  if (rows.length === 0) return
  const width = columns.length
  const perRow = Math.max(1, Math.min(ROWS_PER_INSERT, Math.floor(32_766 / width)))
  const tuple = `(${columns.map(() => '?').join(', ')})`
  const prefix = `insert into ${quoteName(table)} (${columns.map(quoteName).join(', ')}) values `
  const prepare = (count: number) => statements.prepare(prefix + Array.from({ length: count }, () => tuple).join(', '))
  // One parameter array filled in place for every statement, not arrays sliced and flattened per statement (`flat` is slow).
  const fill = (params: unknown[], from: number) => {
    for (let at = 0, r = from; at < params.length; r++) {
      const row = rows[r]
      for (let c = 0; c < width; c++) params[at++] = row[c]
    }
    return params
  }
  const full = prepare(perRow)
  const params = new Array<unknown>(perRow * width)
  let next = 0
  for (; rows.length - next >= perRow; next += perRow) full.run(fill(params, next))
  if (next < rows.length) prepare(rows.length - next).run(fill(new Array<unknown>((rows.length - next) * width), next))
}

/**
 * PostgreSQL: one transaction on one connection, each table's rows streamed with `COPY … FROM
 * STDIN` (the server's bulk path); indexes, keys and references dropped and made again after the rows.
 */
async function restorePostgres(database: Database, checked: CheckedBackup, progress?: Progress): Promise<void> {
  const client = await database.postgresClient!()
  let copying: { table: string; stream: Writable; done: Promise<void> } | undefined
  let failed: Error | undefined
  const endCopy = async () => {
    if (!copying) return
    copying.stream.end()
    await copying.done
    copying = undefined
  }
  try {
    await client.query('begin')
    // One COPY carries a whole table and one index build all its rows: not bounded as a request's statement is.
    await client.query("set local maintenance_work_mem = '256MB'")
    await client.query('set local statement_timeout = 0')
    await client.query('set local idle_in_transaction_session_timeout = 0')
    const { rows: tableRows } = await client.query<{ name: string }>(
      'select tablename as name from pg_tables where schemaname = current_schema()',
    )
    const tables = new Set(tableRows.map((row) => row.name))
    const { rows: indexes } = await client.query<{ name: string; definition: string }>(
      `select indexname as name, indexdef as definition from pg_indexes i where schemaname = current_schema()
       and not exists (select 1 from pg_constraint c where c.conname = i.indexname and c.connamespace = current_schema()::regnamespace)`,
    )
    for (const { name } of indexes) await client.query(`drop index ${quoteName(name)}`)
    // Keys and references are added again after the rows: an index built once from sorted rows, one
    // join checking every reference, instead of a b-tree insert and a lookup per row. References go first.
    const { rows: constraints } = await client.query<{ table: string; name: string; definition: string }>(
      `select conrelid::regclass::text as table, conname as name, pg_get_constraintdef(oid) as definition from pg_constraint
       where contype in ('f', 'p', 'u') and connamespace = current_schema()::regnamespace order by contype = 'f' desc, conname`,
    )
    for (const { table, name } of constraints) await client.query(`alter table ${table} drop constraint ${quoteName(name)}`)
    await eachSection(
      checked,
      tables,
      async (section) => {
        // The connection runs one statement at a time: the last table's COPY ends before anything else.
        if (copying?.table !== section.table) await endCopy()
        const { rest, existing } = takeExistingRows(section)
        for (const { id, ...values } of existing) {
          const names = Object.keys(values)
          const assignments = names.map((name, i) => `${quoteName(name)} = $${i + 1}`).join(', ')
          await client.query(`update ${quoteName(section.table)} set ${assignments} where id = $${names.length + 1}`, [
            ...Object.values(values),
            id,
          ])
        }
        if (rest.length === 0) return
        if (!copying) {
          const stream = client.query(
            copyFrom(`copy ${quoteName(section.table)} (${section.columns.map(quoteName).join(', ')}) from stdin`),
          )
          const done = new Promise<void>((resolve, reject) => {
            stream.on('finish', resolve)
            stream.on('error', (error) => {
              failed ??= error
              reject(error)
            })
          })
          // An error surfaces at the next write or at the end, never unhandled.
          done.catch(() => {})
          copying = { table: section.table, stream, done }
        }
        // A COPY the server refused takes no more rows: its error ends the restore.
        if (failed) throw failed
        const text = rest.map((row) => row.map(copyText).join('\t')).join('\n') + '\n'
        if (!copying.stream.write(text)) await Promise.race([once(copying.stream, 'drain'), copying.done])
      },
      progress,
    )
    await endCopy()
    for (const { definition } of indexes) await client.query(definition)
    for (const { table, name, definition } of [...constraints].reverse())
      await client.query(`alter table ${table} add constraint ${quoteName(name)} ${definition}`)
    // Restored rows hold this restore's transaction id (`journal_xid`'s default; backups never carry it), and the
    // backup's watermark counts another server's ids: the sequencer looks at every row once, then past them.
    if (tables.has('journal_state')) await client.query('update journal_state set watermark_xid = 0, watermark_id = 0')
    await client.query('analyze')
    await moveSequences(client)
    await client.query('commit')
  } catch (error) {
    copying?.stream.destroy()
    await client.query('rollback').catch(() => {})
    throw error
  } finally {
    client.release()
  }
}

/** A value in `COPY`'s text format: `\N` for null, backslash, tab and line breaks escaped, JSON for anything structured. */
function copyText(value: unknown): string {
  if (value === null || value === undefined) return '\\N'
  if (typeof value === 'string') return COPY_SPECIAL.test(value) ? value.replace(COPY_SPECIALS, (c) => COPY_ESCAPES[c]) : value
  if (typeof value === 'number') return String(value)
  if (typeof value === 'boolean') return value ? 't' : 'f'
  return copyText(JSON.stringify(value))
}

const COPY_SPECIAL = /[\\\n\r\t]/
const COPY_SPECIALS = /[\\\n\r\t]/g
const COPY_ESCAPES: Record<string, string> = { '\\': '\\\\', '\n': '\\n', '\r': '\\r', '\t': '\\t' }

/** Moves the page generation past every earlier value, so no history page kept from before is served again. */
async function movePageGeneration(db: Kysely<DB>): Promise<void> {
  const larger = isPostgres(db) ? sql`greatest` : sql`max`
  await sql`update page_generation set generation = ${larger}(generation + 1, cast(${Date.now() * 1000} as bigint))`.execute(db)
}

/** Sets every id sequence past the largest restored id, so new rows never collide with restored ones. */
async function moveSequences(client: pg.ClientBase): Promise<void> {
  const { rows } = await client.query<{ table: string; sequence: string | null }>(`
    select table_name as table, pg_get_serial_sequence(quote_ident(table_name), 'id') as sequence
    from information_schema.columns
    where table_schema = current_schema() and column_name = 'id'`)
  for (const { table, sequence } of rows) {
    if (!sequence) continue
    await client.query(`select setval($1::regclass, coalesce((select max(id) from ${quoteName(table)}), 0) + 1, false)`, [sequence])
  }
  // An event row's id is 2 × a slot of the transactions' ids (`events/derived-events.ts`): past those too.
  await client.query(`select setval('transactions_id_seq', greatest(
    (select last_value from transactions_id_seq), coalesce((select max(id) from events), 0) / 2 + 1), false)`)
}
