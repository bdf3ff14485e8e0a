import { CompiledQuery, sql } from 'kysely'
import type { Executor } from './database.ts'
import { anyOf, isPostgres, nowIso, readRows, writeUnsynced } from './dialect.ts'
import { withRetries } from './retry.ts'
import { perDatabase, perTurn } from './per-turn.ts'

/**
 * Writes of one kind made in the same turn of the event loop go as one statement (one commit, one
 * fsync); each caller's promise settles with the statement holding its key. Every key is written.
 */
export function batchedWrites<K>(write: (db: Executor, keys: K[]) => Promise<void>): (db: Executor, key: K) => Promise<void> {
  const writesOf = perDatabase((db) =>
    perTurn((keys: K[]) => {
      const written = new Map<K, Promise<void>>()
      for (const chunk of chunks([...new Set(keys)], MAX_KEYS_PER_WRITE)) {
        const writing = write(db, chunk)
        for (const key of chunk) written.set(key, writing)
      }
      return keys.map((key) => written.get(key) as Promise<void>)
    }),
  )
  return (db, key) => writesOf(db)(key)
}

/**
 * Marks rows of `table` as used now (`last_used_at` of a key or a session): the marks of one turn
 * as one statement, committed without a sync of its own (`writeUnsynced`).
 */
export function useMarks(table: 'wallet_sessions' | 'user_sessions'): (db: Executor, id: number) => Promise<void> {
  return batchedWrites<number>(async (db, ids) => {
    const now = nowIso()
    await withRetries(() =>
      writeUnsynced(db, (executor) =>
        executor
          .updateTable(table)
          .set({ last_used_at: now })
          .where(anyOf(executor, sql.ref('id'), ids))
          .execute(),
      ),
    )
  })
}

const MAX_KEYS_PER_WRITE = 500

function chunks<T>(items: T[], size: number): T[][] {
  return Array.from({ length: Math.ceil(items.length / size) }, (_, i) => items.slice(i * size, (i + 1) * size))
}

/**
 * A hot lookup as SQL text where `$keys` stands for the keys. On PostgreSQL a turn's lookups of
 * every kind share one statement (`lookUpTurn`); nothing is cached, so each reads the database as it is.
 */
export function coalescedStatement<K extends string | number, Row>(
  text: string,
  type: 'bigint' | 'text',
  keyOf: (row: Row) => K,
): (db: Executor, key: K) => Promise<Row | undefined> {
  const kind: LookupKind = {
    text,
    type,
    alone: text.replace('$keys', `any($1::${type}[])`),
    keyOf: keyOf as (row: unknown) => string | number,
  }
  // SQLite answers in process: batching would only add turns.
  const sqlite = text.replace('$keys', '(?)')
  const onSqlite = async (db: Executor, key: K): Promise<Row | undefined> =>
    (await readRows<Row>(db, sqlite, [key])).find((row) => keyOf(row) === key)
  return (db, key) => (isPostgres(db) ? (turnLookupsOf(db)({ kind, key }) as Promise<Row | undefined>) : onSqlite(db, key))
}

interface LookupKind {
  text: string
  type: 'bigint' | 'text'
  /** The text run when a turn has lookups of this kind only. */
  alone: string
  keyOf: (row: unknown) => string | number
}

const MAX_KEYS_PER_KIND = 256

interface Lookup {
  kind: LookupKind
  key: string | number
}

interface Part {
  kind: LookupKind
  keys: (string | number)[]
}

const turnLookupsOf = perDatabase((db) => perTurn((lookups: Lookup[]) => lookUpTurn(db, lookups)))

/**
 * PostgreSQL: a turn's lookups as one statement, one `json_agg` column per kind (JSON reads these
 * columns as node-postgres does); a failing statement fails every lookup in it.
 */
function lookUpTurn(db: Executor, lookups: Lookup[]): Promise<unknown[]> {
  const positions = new Map<LookupKind, Map<string | number, number>>()
  for (const { kind, key } of lookups) {
    const keys = positions.get(kind) ?? new Map<string | number, number>()
    if (!keys.has(key)) positions.set(kind, keys.set(key, keys.size))
  }
  // Past MAX_KEYS_PER_KIND keys of a kind, the n-th statement takes the n-th slice of each kind.
  const statements: Part[][] = []
  for (const [kind, keys] of [...positions].sort(([a], [b]) => (a.text < b.text ? -1 : a.text > b.text ? 1 : 0))) {
    chunks([...keys.keys()], MAX_KEYS_PER_KIND).forEach((slice, i) => (statements[i] ??= []).push({ kind, keys: slice }))
  }
  return Promise.allSettled(statements.map((parts) => readLookups(db, parts))).then((found) =>
    lookups.map(({ kind, key }) => {
      const rows = found[Math.floor((positions.get(kind)?.get(key) ?? 0) / MAX_KEYS_PER_KIND)]
      return rows.status === 'fulfilled' ? rows.value.get(kind)?.get(key) : Promise.reject(rows.reason)
    }),
  )
}

async function readLookups(db: Executor, parts: Part[]): Promise<Map<LookupKind, Map<string | number, unknown>>> {
  let found: unknown[][]
  if (parts.length === 1) found = [(await db.executeQuery(CompiledQuery.raw(parts[0].kind.alone, [parts[0].keys]))).rows]
  else {
    const column = ({ kind }: (typeof parts)[number], i: number) =>
      `(select coalesce(json_agg(t), '[]') from (${kind.text.replace('$keys', `any($${i + 1}::${kind.type}[])`)}) t) as q${i}`
    const text = `select ${parts.map(column).join(', ')}`
    const { rows } = await db.executeQuery<Record<string, unknown[]>>(
      CompiledQuery.raw(
        text,
        parts.map(({ keys }) => keys),
      ),
    )
    found = parts.map((_, i) => rows[0][`q${i}`])
  }
  return new Map(parts.map(({ kind }, i) => [kind, new Map(found[i].map((row) => [kind.keyOf(row), row]))]))
}
