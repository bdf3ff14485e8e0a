import type SQLite from 'better-sqlite3'
import type { Executor } from './database.types.ts'

/**
 * The prepared-statement cache of each SQLite database (`database.ts` withStatementCache), by the
 * Kysely adapter that a database and every transaction on it share. `runWrites` (`dialect.ts`)
 * runs the ledger's row-by-row writes through it directly, inside the Kysely transaction that
 * holds the one connection.
 */
const caches = new WeakMap<object, SqliteStatements>()

export interface SqliteStatements {
  prepare(sql: string): SQLite.Statement
}

export function registerSqliteStatements(adapter: object, statements: SqliteStatements): void {
  caches.set(adapter, statements)
}

/** The statement cache behind this executor; undefined for PostgreSQL (or a SQLite database opened elsewhere). */
export function sqliteStatementsOf(executor: Executor): SqliteStatements | undefined {
  return caches.get(executor.getExecutor().adapter)
}
