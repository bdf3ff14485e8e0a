import type { Executor } from './database.types.ts'
import { storageStateOf, type SqliteStatements } from './storage-state.ts'

/** The statement cache behind this executor; undefined for PostgreSQL. */
export function sqliteStatementsOf(executor: Executor): SqliteStatements | undefined {
  return storageStateOf(executor).statements
}

/**
 * A read straight on better-sqlite3 when no transaction is open (it then sees just what Kysely
 * would); undefined otherwise, for Kysely to run.
 */
export function readOutsideTransaction<Row>(executor: Executor, text: string, parameters: unknown[]): Row[] | undefined {
  const statements = sqliteStatementsOf(executor)
  if (!statements || statements.inTransaction()) return undefined
  return statements.prepare(text).all(parameters) as Row[]
}
