import type { Executor } from './database.types.ts'
import { storageStateOf, type SqliteStatements } from './storage-state.ts'

/**
 * The prepared-statement cache of a SQLite database (`database.ts` withStatementCache), kept in its
 * storage state. `runWrites` (`dialect.ts`) runs the ledger's row-by-row writes through it
 * directly, inside the Kysely transaction that holds the one connection.
 */

/** The statement cache behind this executor; undefined for PostgreSQL (or a SQLite database opened elsewhere). */
export function sqliteStatementsOf(executor: Executor): SqliteStatements | undefined {
  return storageStateOf(executor).statements
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
