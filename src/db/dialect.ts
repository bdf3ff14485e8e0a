import { PostgresAdapter, sql, type Expression, type RawBuilder, type Transaction } from 'kysely'
import type { Database, Db, Executor } from './database.ts'
import { withRetries } from './retry.ts'
import type { DB } from './tables.ts'

/** Dialect differences live here, one small helper each. */

export function nowIso(): string {
  return new Date().toISOString()
}

/** True for a unique or primary-key violation on either dialect. */
export function isUniqueViolation(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code
  return code === '23505' || code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY'
}

/**
 * Runs `work` in one database transaction, retrying it on the races `isRetryable` names
 * (`retry.ts`) so that callers never see them. `work` must be safe to run again from the start.
 */
export async function inTransaction<T>(database: Database | Db, work: (trx: Transaction<DB>) => Promise<T>): Promise<T> {
  const db = 'db' in database ? database.db : database
  return withRetries(() => db.transaction().execute(work))
}

/** `SELECT … FOR UPDATE` on PostgreSQL; SQLite already serializes writers, so a no-op there. */
export function forUpdate<Q extends { forUpdate(): Q }>(query: Q, executor: Executor): Q {
  return isPostgres(executor) ? query.forUpdate() : query
}

/**
 * Holds one row shared for the rest of the transaction (`SELECT … FOR SHARE` on PostgreSQL): waits
 * for a transaction that holds it for update to end. Nothing to do on SQLite, which serializes
 * writers.
 */
export async function holdRow(executor: Executor, table: 'users' | 'wallets' | 'assets', id: number): Promise<void> {
  if (isPostgres(executor)) await executor.selectFrom(table).select('id').where('id', '=', id).forShare().execute()
}

/**
 * True when the executor talks to PostgreSQL: for the helpers here, which are given only an
 * executor (a database or a transaction). Long-lived parts are told by `Database.dialect`.
 */
export function isPostgres(executor: Executor): boolean {
  return executor.getExecutor().adapter instanceof PostgresAdapter
}

/**
 * `column` is one of `values`, as one statement text whatever the number of values: `= any($1)`
 * with an array on PostgreSQL, `in (select value from json_each(?))` on SQLite.
 */
export function anyOf(executor: Executor, column: Expression<unknown>, values: readonly (number | string)[], type: 'bigint' | 'text' = 'bigint'): RawBuilder<boolean> {
  return isPostgres(executor)
    ? sql<boolean>`${column} = any(${values}::${sql.raw(type)}[])`
    : sql<boolean>`${column} in (select value from json_each(${JSON.stringify(values)}))`
}

/**
 * A table of `rows` for `insert … select … from`, named `r`, with the given columns, as one
 * statement text whatever the number of rows: `unnest` of one array per column on PostgreSQL, a
 * JSON array of rows read with `json_each` on SQLite.
 */
export function rowsOf(executor: Executor, columns: readonly (readonly [name: string, type: 'bigint' | 'text'])[], rows: unknown[][]): RawBuilder<unknown> {
  const names = sql.raw(columns.map(([name]) => name).join(', '))
  if (isPostgres(executor)) {
    const arrays = columns.map(([, type], i) => sql`${rows.map((row) => row[i])}::${sql.raw(type)}[]`)
    return sql`unnest(${sql.join(arrays)}) as r(${names})`
  }
  const fields = sql.raw(columns.map(([name], i) => `value ->> ${i} as ${name}`).join(', '))
  return sql`(select ${fields} from json_each(${JSON.stringify(rows)})) as r`
}

/** A data-changing statement for `runWrites`; with `returning`, the columns it gives back. */
export interface Write {
  statement: RawBuilder<unknown>
  returning?: string
}

/**
 * Runs independent data-changing statements (none reads what another writes) and returns the
 * rows each gives back. On PostgreSQL they go as one statement, one data-modifying CTE each, so a
 * batch of writes costs one round trip; SQLite runs them one after the other, in process.
 */
export async function runWrites(executor: Executor, writes: Write[]): Promise<Record<string, unknown>[][]> {
  const statements = writes.map(({ statement, returning }) => (returning ? sql`${statement} returning ${sql.raw(returning)}` : statement))
  if (!isPostgres(executor)) {
    const results: Record<string, unknown>[][] = []
    for (const statement of statements) results.push((await statement.execute(executor)).rows as Record<string, unknown>[])
    return results
  }
  const name = (i: number) => sql.raw(`w${i}`)
  const ctes = sql.join(
    statements.map((statement, i) => sql`${name(i)} as (${statement})`),
    sql`, `,
  )
  const outputs = writes.map((write, i) => (write.returning ? sql`coalesce((select json_agg(${name(i)}) from ${name(i)}), '[]') as ${name(i)}` : sql`null as ${name(i)}`))
  const { rows } = await sql<Record<string, Record<string, unknown>[] | null>>`with ${ctes} select ${sql.join(outputs)}`.execute(executor)
  return writes.map((_, i) => rows[0][`w${i}`] ?? [])
}
