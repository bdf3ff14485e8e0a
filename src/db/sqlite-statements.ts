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
  /** Whether a transaction is open on the connection (`BEGIN` … `COMMIT`/`ROLLBACK`). */
  inTransaction(): boolean
}

export function registerSqliteStatements(adapter: object, statements: SqliteStatements): void {
  caches.set(adapter, statements)
}

/** The statement cache behind this executor; undefined for PostgreSQL (or a SQLite database opened elsewhere). */
export function sqliteStatementsOf(executor: Executor): SqliteStatements | undefined {
  return caches.get(executor.getExecutor().adapter)
}

/**
 * The rows of a read run straight on better-sqlite3 when no transaction is open on the connection;
 * undefined otherwise (or on PostgreSQL), and the caller then runs it through Kysely. Outside a
 * transaction the read sees exactly what a Kysely query would: every committed write. Inside one
 * it would see that transaction's uncommitted writes, so it is left to Kysely, which waits for the
 * transaction to end (or runs the read in it, when the executor is that transaction).
 */
export function readOutsideTransaction<Row>(executor: Executor, text: string, parameters: unknown[]): Row[] | undefined {
  const statements = sqliteStatementsOf(executor)
  if (!statements || statements.inTransaction()) return undefined
  return statements.prepare(text).all(parameters) as Row[]
}
