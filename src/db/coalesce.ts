import DataLoader from 'dataloader'
import { CompiledQuery } from 'kysely'
import type { Executor } from './database.ts'
import { isPostgres, readRows } from './dialect.ts'

/**
 * On PostgreSQL, lookups by key that requests make in the same turn of the event loop go to the
 * database as one query (`where key = any(…)`) instead of a round trip each. Under load this
 * turns the per-request lookups of a transfer (session, recipient, assets) into a share of one.
 * SQLite answers in process, without a round trip: there each lookup runs at once, since batching
 * only adds turns of the event loop (measured: half again the CPU per transfer).
 *
 * Nothing is cached: every lookup reads the database as it is, so a revoked session or a renamed
 * asset is seen by the next request exactly as without batching. A failing query fails every
 * lookup of its batch with the same error.
 */
export function coalesced<K, V>(db: Executor, load: (keys: K[]) => Promise<Map<K, V>>): (key: K) => Promise<V | undefined> {
  if (!isPostgres(db)) return async (key) => (await load([key])).get(key)
  return perTurn(load, 256)
}

/**
 * The calls of one turn of the event loop as one `load` of their keys (each key once), at most
 * `maxBatchSize` keys a load; each caller gets its key's value, or the load's error.
 */
export function perTurn<K, V>(load: (keys: K[]) => Promise<Map<K, V>>, maxBatchSize: number): (key: K) => Promise<V | undefined> {
  const loader = new DataLoader<K, V | undefined>(
    async (keys) => {
      const found = await load([...new Set(keys)])
      return keys.map((key) => found.get(key))
    },
    // After the I/O callbacks of this turn, so that every request that arrived in it joins.
    { cache: false, batchScheduleFn: (run) => setImmediate(run), maxBatchSize },
  )
  return (key) => loader.load(key)
}

/** `make`'s function for each database (an app, a test, a CLI run each have their own). */
export function perDatabase<K, V>(make: (db: Executor) => (key: K) => Promise<V>): (db: Executor, key: K) => Promise<V> {
  const made = new WeakMap<Executor, (key: K) => Promise<V>>()
  return (db, key) => {
    let call = made.get(db)
    if (!call) made.set(db, (call = make(db)))
    return call(key)
  }
}

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
  return perDatabase((db) => {
    const mark = perTurn(async (keys: K[]) => {
      await write(db, keys)
      return new Map<K, never>()
    }, 500)
    return async (key: K) => {
      await mark(key)
    }
  })
}

/**
 * A lookup written once as SQL text, one per dialect, where `$keys` stands for the keys
 * (`any($1::<type>[])` on PostgreSQL, as `anyOf` in dialect.ts writes them; one key, `(?)`, on
 * SQLite). Every authenticated request makes such a lookup: building and compiling it with
 * Kysely's query builder each time cost more CPU than SQLite took to answer it
 * (`docs/performance.md#read-path-one-statement-per-page`). On PostgreSQL the lookups of one turn
 * of the event loop go as one statement, whatever their kind (`TurnLookups`).
 */
export function coalescedStatement<K extends string | number, Row>(
  text: string,
  type: 'bigint' | 'text',
  keyOf: (row: Row) => K,
): (db: Executor, key: K) => Promise<Row | undefined> {
  const kind: LookupKind = { index: kinds++, text, type, alone: text.replace('$keys', `any($1::${type}[])`), keyOf: keyOf as (row: unknown) => string | number }
  // SQLite looks each key up at once (see above), as a plain parameter, straight on the driver
  // when no transaction is open (`readRows`): no Kysely pass, no json_each, no batching
  // machinery. Measured in a loop, CPU per lookup: 6.7-8.3 µs before, 4.2-4.8 µs so; a transfer
  // by key makes three (its key, its recipient, its asset;
  // docs/performance.md#transfers-round-three-engineer-t).
  const sqlite = text.replace('$keys', '(?)')
  const onSqlite = async (db: Executor, key: K): Promise<Row | undefined> => (await readRows<Row>(db, sqlite, [key])).find((row) => keyOf(row) === key)
  return (db, key) => (isPostgres(db) ? (turnLookupsOf(db).load(kind, key) as Promise<Row | undefined>) : onSqlite(db, key))
}

/** One `coalescedStatement`: its text, the type of its keys, and how a row names its key. */
interface LookupKind {
  /** In the order of creation: a turn's statement lists its kinds in this order, so its text repeats. */
  index: number
  text: string
  type: 'bigint' | 'text'
  /** The text run when a turn has lookups of this kind only. */
  alone: string
  keyOf: (row: unknown) => string | number
}

let kinds = 0

/** Most keys of one kind in one statement (as `perTurn` bounds a load). */
const MAX_KEYS_PER_KIND = 256

type Waiter = { resolve: (row: unknown) => void; reject: (error: unknown) => void }

/**
 * PostgreSQL: the `coalescedStatement` lookups that requests make in one turn of the event loop,
 * of every kind, as one statement: `select (select coalesce(json_agg(t), '[]') from (<the kind's
 * text, its keys as $1>) t) as q0, (…$2…) as q1`. A transfer looks up its key, then its
 * recipient and its asset in the same turn, and requests arrive together: the kinds of a turn
 * share one round trip instead of one each. A turn with one kind runs that kind's own text, as
 * before, and its rows come as node-postgres reads them; in a statement of several, each kind's
 * rows come back as JSON, which reads every column these lookups have (bigint ids below 2^53,
 * double precision, text, nulls) as node-postgres does. Nothing is cached; a failing statement
 * fails every lookup in it with its error.
 */
class TurnLookups {
  readonly #db: Executor
  #pending = new Map<LookupKind, Map<string | number, Waiter[]>>()

  constructor(db: Executor) {
    this.#db = db
  }

  load(kind: LookupKind, key: string | number): Promise<unknown> {
    return new Promise((resolve, reject) => {
      // After the I/O callbacks of this turn, so that every request that arrived in it joins.
      if (this.#pending.size === 0) setImmediate(() => this.#flush())
      let keys = this.#pending.get(kind)
      if (!keys) this.#pending.set(kind, (keys = new Map()))
      const waiting = keys.get(key)
      if (waiting) waiting.push({ resolve, reject })
      else keys.set(key, [{ resolve, reject }])
    })
  }

  #flush(): void {
    const pending = this.#pending
    this.#pending = new Map()
    const kinds = [...pending.keys()].sort((a, b) => a.index - b.index)
    // Usually one statement; more only past MAX_KEYS_PER_KIND keys of a kind in one turn.
    const parts = kinds.map((kind) => {
      const keys = [...(pending.get(kind) as Map<string | number, Waiter[]>).keys()]
      return Array.from({ length: Math.ceil(keys.length / MAX_KEYS_PER_KIND) }, (_, i) => ({ kind, keys: keys.slice(i * MAX_KEYS_PER_KIND, (i + 1) * MAX_KEYS_PER_KIND) }))
    })
    for (let round = 0; parts.some((chunks) => chunks.length > round); round++) {
      void this.#run(parts.flatMap((chunks) => (chunks.length > round ? [chunks[round]] : [])), pending)
    }
  }

  async #run(parts: { kind: LookupKind; keys: (string | number)[] }[], pending: Map<LookupKind, Map<string | number, Waiter[]>>): Promise<void> {
    try {
      const found = parts.length === 1 ? [await this.#one(parts[0].kind, parts[0].keys)] : await this.#several(parts)
      parts.forEach(({ kind, keys }, i) => {
        const byKey = new Map(found[i].map((row) => [kind.keyOf(row), row]))
        const waiting = pending.get(kind) as Map<string | number, Waiter[]>
        for (const key of keys) for (const { resolve } of waiting.get(key) ?? []) resolve(byKey.get(key))
      })
    } catch (error) {
      for (const { kind, keys } of parts) for (const key of keys) for (const { reject } of pending.get(kind)?.get(key) ?? []) reject(error)
    }
  }

  async #one(kind: LookupKind, keys: (string | number)[]): Promise<unknown[]> {
    const { rows } = await this.#db.executeQuery(CompiledQuery.raw(kind.alone, [keys]))
    return rows
  }

  async #several(parts: { kind: LookupKind; keys: (string | number)[] }[]): Promise<unknown[][]> {
    const text = `select ${parts.map(({ kind }, i) => `(select coalesce(json_agg(t), '[]') from (${kind.text.replace('$keys', `any($${i + 1}::${kind.type}[])`)}) t) as q${i}`).join(', ')}`
    const { rows } = await this.#db.executeQuery<Record<string, unknown[]>>(CompiledQuery.raw(text, parts.map(({ keys }) => keys)))
    return parts.map((_, i) => rows[0][`q${i}`])
  }
}

const turnLookups = new WeakMap<Executor, TurnLookups>()

/** The turn's lookups of a database (an app, a test, a CLI run each have their own). */
function turnLookupsOf(db: Executor): TurnLookups {
  let lookups = turnLookups.get(db)
  if (!lookups) turnLookups.set(db, (lookups = new TurnLookups(db)))
  return lookups
}
