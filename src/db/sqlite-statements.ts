import type SQLite from 'better-sqlite3'
import { sql, type RawBuilder } from 'kysely'
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

/**
 * Prepared statements kept by SQL text, the least recently used dropped past `size`: preparing
 * costs SQLite more than running the small queries, and the one-off texts of a multi-row insert
 * or a long `in (…)` must not push the hot statements out.
 */
export function statementCache(sqlite: SQLite.Database, size = 500): SqliteStatements {
  const statements = new Map<string, SQLite.Statement>()
  return {
    inTransaction: () => sqlite.inTransaction,
    prepare(sql: string) {
      let statement = statements.get(sql)
      if (statement) {
        // Map keeps insertion order: moved to the end, the first key is the least recently used.
        statements.delete(sql)
      } else {
        statement = sqlite.prepare(sql)
        if (statements.size >= size) statements.delete(statements.keys().next().value as string)
      }
      statements.set(sql, statement)
      return statement
    },
  }
}

/**
 * The rows of a read as arrays of values in column order, with no object per row: on SQLite inside
 * a transaction straight on the driver (the transaction holds its one connection); on PostgreSQL in
 * node-postgres's array row mode. For long reads row by row (`coffer verify`).
 */
export async function readArrays(executor: Executor, statement: RawBuilder<unknown>): Promise<unknown[][]> {
  const statements = sqliteStatementsOf(executor)
  const compiled = statement.compile(executor)
  if (!statements) {
    // Kysely hands the text to node-postgres's `query` as it is, and `query` also takes a config
    // object: its `rowMode` answers arrays (the values still come from the parameters).
    const config = { text: compiled.sql, rowMode: 'array' }
    const { rows } = await executor.executeQuery({ ...compiled, sql: config as unknown as string })
    return rows as unknown[][]
  }
  if (!executor.isTransaction) return (await statement.execute(executor)).rows.map((row) => Object.values(row as object))
  const prepared = statements.prepare(compiled.sql).raw(true)
  try {
    return prepared.all(compiled.parameters) as unknown[][]
  } finally {
    // The statement is cached by its text: whoever runs the same text next expects objects.
    prepared.raw(false)
  }
}

/** Bytes of the file SQLite may map for a long read (`coffer verify`'s connections): at most the file's size is mapped. */
const LONG_READ_MMAP = 2 ** 40

/**
 * Prepares a connection of its own for one long read of the whole store: on SQLite the file is read
 * through a memory map (no copy per page read); nothing on PostgreSQL. Outside any transaction.
 */
export async function forLongReads(executor: Executor): Promise<void> {
  if (sqliteStatementsOf(executor)) await sql.raw(`pragma mmap_size = ${LONG_READ_MMAP}`).execute(executor)
}
