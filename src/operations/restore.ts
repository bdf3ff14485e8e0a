import { sql, type Kysely, type Transaction } from 'kysely'
import type { Database } from '../db/database.ts'
import { isPostgres } from '../db/dialect.ts'
import { alignJournalAfterRestore } from '../journal/journal.service.ts'
import { MINT_WALLET_ID } from '../ledger/ledger.types.ts'
import { listAppliedMigrations, MIGRATION_NAMES, migrateTo, migrateToLatest } from '../db/migrate.ts'
import { withRetries } from '../db/retry.ts'
import { sqliteStatementsOf } from '../db/sqlite-statements.ts'
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
  const trailer = await readBackup(
    file,
    (read) => {
      header = read
      checkMigrations(file, read)
    },
    () => {},
  )
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
  // A retried transaction runs again from the start of the file.
  await withRetries(() =>
    db.transaction().execute(async (trx) => {
      let done = 0
      const tables = new Set(await listDataTables(trx))
      await readBackup(
        checked.file,
        () => {},
        async (section) => {
          if (!tables.has(section.table))
            throw new BackupError(`the store has no table ${section.table} at migration ${checked.header.migrations.at(-1)}`)
          await insertSection(trx, section)
          done += section.rows.length
          progress?.(section.table, done, checked.rows)
        },
        5_000,
      )
      if (isPostgres(trx)) await moveSequences(trx)
      if (tables.has('journal_state')) await alignJournalAfterRestore(trx)
    }),
  )
  const upgraded = await migrateToLatest(db)
  await movePageGeneration(db)
  return { tables: checked.header.tables, rows: checked.rows, upgraded }
}

async function insertSection(trx: Transaction<DB>, { table, columns, rows }: BackupSection): Promise<void> {
  const any = trx as unknown as Kysely<Record<string, Record<string, unknown>>>
  const objectOf = (row: unknown[]) => Object.fromEntries(columns.map((column, i) => [column, row[i]]))
  if (table === 'wallets') {
    // The first migration created the reserved mint wallet already: it takes the backup's row.
    const at = columns.indexOf('id')
    const mint = rows.find((row) => Number(row[at]) === MINT_WALLET_ID)
    if (mint) {
      const { id: _id, ...rest } = objectOf(mint)
      await any.updateTable('wallets').set(rest).where('id', '=', MINT_WALLET_ID).execute()
      rows = rows.filter((row) => row !== mint)
    }
  }
  if (table === 'journal_state') {
    // The journal's migration created its one state row already: it takes the backup's.
    for (const { id, ...rest } of rows.map(objectOf)) await any.updateTable('journal_state').set(rest).where('id', '=', id).execute()
    return
  }
  if (rows.length === 0) return
  const names = columns.map(quoteName).join(', ')
  const statements = sqliteStatementsOf(trx)
  if (statements) {
    // One prepared statement run per row on the driver.
    const insert = statements.prepare(`insert into ${quoteName(table)} (${names}) values (${columns.map(() => '?').join(', ')})`)
    for (const row of rows) insert.run(row)
    return
  }
  // One statement per chunk, the rows as one JSON parameter that takes the table's own column types.
  await sql`insert into ${sql.table(table)} (${sql.raw(names)})
    select ${sql.raw(names)} from json_populate_recordset(null::${sql.table(table)}, ${JSON.stringify(rows.map(objectOf))})`.execute(trx)
}

/** Moves the page generation past every earlier value, so no history page kept from before is served again. */
async function movePageGeneration(db: Kysely<DB>): Promise<void> {
  const larger = isPostgres(db) ? sql`greatest` : sql`max`
  await sql`update page_generation set generation = ${larger}(generation + 1, cast(${Date.now() * 1000} as bigint))`.execute(db)
}

/** Sets every id sequence past the largest restored id, so new rows never collide with restored ones. */
async function moveSequences(trx: Transaction<DB>): Promise<void> {
  const { rows } = await sql<{ table: string; sequence: string }>`
    select table_name as table, pg_get_serial_sequence(quote_ident(table_name), 'id') as sequence
    from information_schema.columns
    where table_schema = current_schema() and column_name = 'id'`.execute(trx)
  for (const { table, sequence } of rows) {
    if (!sequence) continue
    await sql`select setval(${sequence}::regclass, coalesce((select max(id) from ${sql.table(table)}), 0) + 1, false)`.execute(trx)
  }
}
