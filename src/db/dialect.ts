import { CompiledQuery, PostgresAdapter, sql, type Expression, type RawBuilder, type Transaction } from 'kysely'
import type { Database, Db, Executor } from './database.ts'
import { withRetries } from './retry.ts'
import { readOutsideTransaction, sqliteStatementsOf } from './sqlite-statements.ts'
import type { DB } from './tables.ts'

export function nowIso(): string {
  return new Date().toISOString()
}

/** True for a unique or primary-key violation on either dialect. */
export function isUniqueViolation(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code
  return code === '23505' || code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY'
}

/** Runs `work` in one transaction, retried on the races of `retry.ts`; it must be safe to run again. */
export async function inTransaction<T>(database: Database | Db, work: (trx: Transaction<DB>) => Promise<T>): Promise<T> {
  const db = 'db' in database ? database.db : database
  return withRetries(() => db.transaction().execute(work))
}

/**
 * `inTransaction` committed on SQLite without a sync of its own (durable with the next synced
 * commit, the log being synced in order): for work that a crash may undo because it is done again
 * identically from what was durable. PostgreSQL commits it as usual.
 */
export async function inTransactionSyncedLater<T>(database: Database, work: (trx: Transaction<DB>) => Promise<T>): Promise<T> {
  if (database.dialect === 'postgres') return inTransaction(database, work)
  // SQLite has one connection: held for the round, so nothing else commits at NORMAL.
  return database.db.connection().execute(async (connection) => {
    await sql`pragma synchronous = NORMAL`.execute(connection)
    try {
      return await inTransaction(connection, work)
    } finally {
      await sql`pragma synchronous = FULL`.execute(connection)
    }
  })
}

/**
 * Runs `write` committed without waiting for its own sync to disk: for marks whose loss in a crash
 * costs nothing (a key's or session's last use), so they add no fsync to the request that makes
 * them. The write becomes durable with the next durable commit or checkpoint (SQLite: WAL frames
 * are synced in order; PostgreSQL: asynchronous commit, flushed by the WAL writer within moments).
 */
export async function writeUnsynced(db: Executor, write: (executor: Executor) => Promise<unknown>): Promise<void> {
  // Inside a caller's transaction the write is as durable as that transaction.
  if (db.isTransaction) {
    await write(db)
    return
  }
  if (isPostgres(db)) {
    await db.transaction().execute(async (trx) => {
      await sql`set local synchronous_commit = off`.execute(trx)
      await write(trx)
    })
    return
  }
  // SQLite has one connection: held for the three statements, so nothing else runs at NORMAL.
  await db.connection().execute(async (connection) => {
    await sql`pragma synchronous = NORMAL`.execute(connection)
    try {
      await write(connection)
    } finally {
      await sql`pragma synchronous = FULL`.execute(connection)
    }
  })
}

/** The rows of a read in the dialect's SQL text; on SQLite straight on the driver outside a transaction, skipping Kysely. */
export async function readRows<Row>(executor: Executor, text: string, parameters: unknown[]): Promise<Row[]> {
  return (
    readOutsideTransaction<Row>(executor, text, parameters) ?? (await executor.executeQuery<Row>(CompiledQuery.raw(text, parameters))).rows
  )
}

/** `SELECT … FOR UPDATE` on PostgreSQL; SQLite already serializes writers, so a no-op there. */
export function forUpdate<Q extends { forUpdate(): Q }>(query: Q, executor: Executor): Q {
  return isPostgres(executor) ? query.forUpdate() : query
}

/** `SELECT … FOR SHARE` of one row on PostgreSQL; SQLite serializes writers already. */
export async function holdRow(executor: Executor, table: 'users' | 'wallets' | 'assets', id: number): Promise<void> {
  if (isPostgres(executor)) await executor.selectFrom(table).select('id').where('id', '=', id).forShare().execute()
}

/** For helpers given only an executor; long-lived parts read `Database.dialect`. */
export function isPostgres(executor: Executor): boolean {
  return executor.getExecutor().adapter instanceof PostgresAdapter
}

/** `column` is one of `values`, in one statement text whatever their number. */
export function anyOf(
  executor: Executor,
  column: Expression<unknown>,
  values: readonly (number | string)[],
  type: 'bigint' | 'text' = 'bigint',
): RawBuilder<boolean> {
  return isPostgres(executor)
    ? sql<boolean>`${column} = any(${values}::${sql.raw(type)}[])`
    : sql<boolean>`${column} in (select value from json_each(${JSON.stringify(values)}))`
}

type Columns = readonly (readonly [name: string, type: 'bigint' | 'text'])[]

/** PostgreSQL: `rows` as a table `r` (`unnest` of one array per column), one text whatever their number. */
function unnestRows(columns: Columns, rows: unknown[][]): RawBuilder<unknown> {
  const names = sql.raw(columns.map(([name]) => name).join(', '))
  const arrays = columns.map(([, type], i) => sql`${rows.map((row) => row[i])}::${sql.raw(type)}[]`)
  return sql`unnest(${sql.join(arrays)}) as r(${names})`
}

/** A data-changing statement for `runWrites`; with `returning`, the columns it gives back. */
export interface Write {
  statement: RawBuilder<unknown>
  returning?: string
  /** SQLite (`rowsWrite`): the statement reads one row, `r`, from its parameters; it runs once per row. */
  rows?: unknown[][]
  /** SQLite (`rowsWrite`): the statement reading `count` rows as `r`, for inserts run a chunk of rows at a time. */
  chunk?: (count: number) => RawBuilder<unknown>
  /** SQLite (`rowsWrite`): each row changes rows of its own, so an update too may run a chunk at a time. */
  distinct?: boolean
}

/**
 * A write of `rows` as a table `r`: one `unnest` statement on PostgreSQL; on SQLite one prepared
 * statement per chunk of rows (an insert, or a `distinct` write) or per row (`runWrites`) on the
 * driver, so `build` must give every other value as a literal (`sql.lit`). `distinct`: no two rows
 * change the same row (an update keyed by each row's own key).
 */
export function rowsWrite(
  executor: Executor,
  columns: Columns,
  rows: unknown[][],
  build: (from: RawBuilder<unknown>) => RawBuilder<unknown>,
  returning?: string,
  { distinct = false }: { distinct?: boolean } = {},
): Write {
  if (isPostgres(executor)) return { statement: build(unnestRows(columns, rows)), returning }
  // `cast` gives each value the type `json_each` gave it (better-sqlite3 binds every number as a real).
  const fields = columns.map(([name, type]) => (type === 'bigint' ? `cast(? as integer) as ${name}` : `? as ${name}`)).join(', ')
  const chunkFields = columns
    .map(([name, type], i) => (type === 'bigint' ? `cast(column${i + 1} as integer) as ${name}` : `column${i + 1} as ${name}`))
    .join(', ')
  const tuple = `(${columns.map(() => '?').join(', ')})`
  return {
    statement: build(sql.raw(`(select ${fields}) as r`)),
    returning,
    rows,
    distinct,
    chunk: (count) => build(sql.raw(`(select ${chunkFields} from (values ${Array<string>(count).fill(tuple).join(', ')})) as r`)),
  }
}

/**
 * A plain insert of `rows` into `table`, its columns named and typed by `columns`: `rowsWrite`'s
 * statement on PostgreSQL; on SQLite `values` straight into the table, whose columns' types convert
 * each value as the casts of `rowsWrite` would, without reading the rows through a subquery first.
 */
export function insertRows(executor: Executor, table: string, columns: Columns, rows: unknown[][]): Write {
  const names = columns.map(([name]) => name).join(', ')
  const into = `insert into ${table} (${names})`
  if (isPostgres(executor)) return rowsWrite(executor, columns, rows, (r) => sql`${sql.raw(into)} select ${sql.raw(names)} from ${r}`)
  const tuple = `(${columns.map(() => '?').join(', ')})`
  return {
    statement: sql.raw(`${into} values ${tuple}`),
    rows,
    chunk: (count) => sql.raw(`${into} values ${Array<string>(count).fill(tuple).join(', ')}`),
  }
}

/**
 * Runs writes and returns the rows each gives back: on PostgreSQL as CTEs of one statement (one
 * round trip; none sees another's rows), on SQLite one after the other.
 */
export async function runWrites(executor: Executor, writes: Write[]): Promise<Record<string, unknown>[][]> {
  const withReturning = (statement: RawBuilder<unknown>, returning: string | undefined) =>
    returning ? sql`${statement} returning ${sql.raw(returning)}` : statement
  const statements = writes.map(({ statement, returning }) => withReturning(statement, returning))
  if (!isPostgres(executor)) {
    const results: Record<string, unknown>[][] = []
    for (const [i, statement] of statements.entries()) {
      const { rows, chunk, returning, distinct } = writes[i]
      const chunked = chunk && ((count: number) => withReturning(chunk(count), returning))
      results.push(
        rows
          ? runPerRow(executor, statement, rows, returning !== undefined, chunked, distinct)
          : ((await statement.execute(executor)).rows as Record<string, unknown>[]),
      )
    }
    return results
  }
  const name = (i: number) => sql.raw(`w${i}`)
  const ctes = sql.join(
    statements.map((statement, i) => sql`${name(i)} as (${statement})`),
    sql`, `,
  )
  const outputs = writes.map((write, i) =>
    write.returning ? sql`coalesce((select json_agg(${name(i)}) from ${name(i)}), '[]') as ${name(i)}` : sql`null as ${name(i)}`,
  )
  const { rows } = await sql<Record<string, Record<string, unknown>[] | null>>`with ${ctes} select ${sql.join(outputs)}`.execute(executor)
  return writes.map((_, i) => rows[0][`w${i}`] ?? [])
}

/** Rows an insert takes per run on SQLite, largest first (under SQLite's 32,766 parameters); the rest go one by one. */
const CHUNKS = [256, 64, 16, 4]

/**
 * SQLite: a `rowsWrite` statement run on the driver in the caller's transaction. An insert, or a
 * `distinct` write, runs a chunk of rows at a time (a statement's fixed cost, an AUTOINCREMENT
 * table's sequence update, once per chunk); other statements once per row, each row seeing the one
 * before as a row of its own would.
 */
function runPerRow(
  executor: Executor,
  statement: RawBuilder<unknown>,
  rows: unknown[][],
  returning: boolean,
  chunk?: (count: number) => RawBuilder<unknown>,
  distinct = false,
): Record<string, unknown>[] {
  const statements = sqliteStatementsOf(executor)
  const prepare = (builder: RawBuilder<unknown>) => {
    const compiled = builder.compile(executor)
    if (!statements || compiled.parameters.length > 0)
      throw new Error('a row-by-row write needs a SQLite database of openSqlite and literals for every value but the rows')
    return statements.prepare(compiled.sql)
  }
  const single = prepare(statement)
  const out: Record<string, unknown>[] = []
  const run = (prepared: typeof single, values: unknown[]) => {
    if (returning) out.push(...(prepared.all(values) as Record<string, unknown>[]))
    else prepared.run(values)
  }
  let next = 0
  if (chunk && (distinct || /^\s*insert\b/i.test(single.source)))
    for (const size of CHUNKS) {
      if (rows.length - next < size) continue
      const prepared = prepare(chunk(size))
      // One parameter array filled in place: `slice(…).flat()` costs V8 about 3.5 µs a row.
      const width = rows[next].length
      const values: unknown[] = new Array(size * width)
      for (; rows.length - next >= size; next += size) {
        for (let i = 0; i < size; i++) {
          const row = rows[next + i]
          for (let j = 0; j < width; j++) values[i * width + j] = row[j]
        }
        run(prepared, values)
      }
    }
  for (; next < rows.length; next++) run(single, rows[next])
  return out
}
