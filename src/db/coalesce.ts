import { CompiledQuery } from 'kysely'
import type { Executor } from './database.ts'
import { isPostgres, readRows } from './dialect.ts'
import { perDatabase, perTurn } from './per-turn.ts'

/**
 * Writes of the same kind that requests make in the same turn of the event loop go to the
 * database as one statement (`write` with every key of the turn) instead of one statement, one
 * transaction and, on SQLite, one fsync each: a hundred wallet keys first used in the same second
 * mark themselves as used with one write, not a hundred in a row that the thread waits on in turn.
 * On both storages, unlike lookups: a write on SQLite is worth a turn's wait. Each caller's
 * promise settles when the statement holding its key has: resolved once it has committed,
 * rejected with its error. Nothing is cached or skipped: every key given is written.
 */
export function batchedWrites<K>(write: (db: Executor, keys: K[]) => Promise<void>): (db: Executor, key: K) => Promise<void> {
  const writesOf = perDatabase((db) =>
    perTurn((keys: K[]) => {
      // Each key once, at most MAX_KEYS_PER_WRITE in one statement; all the statements at once.
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

const MAX_KEYS_PER_WRITE = 500

/** `items` in slices of at most `size`, in order. */
function chunks<T>(items: T[], size: number): T[][] {
  return Array.from({ length: Math.ceil(items.length / size) }, (_, i) => items.slice(i * size, (i + 1) * size))
}

/**
 * A lookup written once as SQL text, one per dialect, where `$keys` stands for the keys
 * (`any($1::<type>[])` on PostgreSQL, as `anyOf` in dialect.ts writes them; one key, `(?)`, on
 * SQLite). Every authenticated request makes such a lookup, and building it with Kysely's query
 * builder each time cost more than SQLite took to answer it. On PostgreSQL the lookups of one turn
 * of the event loop go as one statement, whatever their kind (`lookUpTurn`): under load a
 * request's lookups (its credential, a transfer's recipient and asset) cost a share of one round
 * trip. Nothing is cached: every lookup reads the database as it is, so a revoked session or a
 * renamed asset is seen by the next request exactly as without batching.
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
  // SQLite answers in process, without a round trip: there each key is looked up at once (batching
  // would only add turns of the event loop), as a plain parameter, straight on the driver when no
  // transaction is open (`readRows`).
  const sqlite = text.replace('$keys', '(?)')
  const onSqlite = async (db: Executor, key: K): Promise<Row | undefined> =>
    (await readRows<Row>(db, sqlite, [key])).find((row) => keyOf(row) === key)
  return (db, key) => (isPostgres(db) ? (turnLookupsOf(db)({ kind, key }) as Promise<Row | undefined>) : onSqlite(db, key))
}

/** One `coalescedStatement`: its text, the type of its keys, and how a row names its key. */
interface LookupKind {
  /** A turn's statement lists its kinds in the order of their texts, so that its own text repeats. */
  text: string
  type: 'bigint' | 'text'
  /** The text run when a turn has lookups of this kind only. */
  alone: string
  keyOf: (row: unknown) => string | number
}

/** Most keys of one kind in one statement. */
const MAX_KEYS_PER_KIND = 256

interface Lookup {
  kind: LookupKind
  key: string | number
}

/** A kind and its keys, in a statement of a turn. */
interface Part {
  kind: LookupKind
  keys: (string | number)[]
}

const turnLookupsOf = perDatabase((db) => perTurn((lookups: Lookup[]) => lookUpTurn(db, lookups)))

/**
 * PostgreSQL: the `coalescedStatement` lookups that requests make in one turn of the event loop,
 * of every kind, as one statement: `select (select coalesce(json_agg(t), '[]') from (<the kind's
 * text, its keys as $1>) t) as q0, (…$2…) as q1`. A transfer looks up its key, then its
 * recipient and its asset in the same turn, and requests arrive together: the kinds of a turn
 * share one round trip instead of one each. A turn with one kind runs that kind's own text, as
 * before, and its rows come as node-postgres reads them; in a statement of several, each kind's
 * rows come back as JSON, which reads every column these lookups have (bigint ids below 2^53,
 * double precision, text, nulls) as node-postgres does. A failing statement fails every lookup
 * in it with its error.
 */
function lookUpTurn(db: Executor, lookups: Lookup[]): Promise<unknown[]> {
  // Each kind's keys once, numbered as they came.
  const positions = new Map<LookupKind, Map<string | number, number>>()
  for (const { kind, key } of lookups) {
    const keys = positions.get(kind) ?? new Map<string | number, number>()
    if (!keys.has(key)) positions.set(kind, keys.set(key, keys.size))
  }
  // Usually one statement; more only past MAX_KEYS_PER_KIND keys of a kind in one turn: the n-th
  // statement then looks up the n-th slice of the keys of every kind that has one, and each
  // lookup is answered by its own statement (its rows, or its error) once all have ended.
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

/** The rows of each part (a kind and its keys) by one statement, by kind and key. */
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
