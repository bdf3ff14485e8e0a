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

/** One coalesced lookup per database. */
function coalescedPer<K, V>(load: (db: Executor, keys: K[]) => Promise<Map<K, V>>): (db: Executor, key: K) => Promise<V | undefined> {
  return perDatabase((db) => coalesced(db, (keys) => load(db, keys)))
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
 * `coalescedPer` for a lookup written once as SQL text, one per dialect, where `$keys` stands for
 * the keys (`any($1::<type>[])` on PostgreSQL, as `anyOf` in dialect.ts writes them; one key, `(?)`,
 * on SQLite). Every authenticated request makes such a lookup: building and compiling
 * it with Kysely's query builder each time cost more CPU than SQLite took to answer it
 * (`docs/performance.md#read-path-one-statement-per-page`).
 */
export function coalescedStatement<K extends string | number, Row>(
  text: string,
  type: 'bigint' | 'text',
  keyOf: (row: Row) => K,
): (db: Executor, key: K) => Promise<Row | undefined> {
  const postgres = text.replace('$keys', `any($1::${type}[])`)
  const onPostgres = coalescedPer(async (db: Executor, keys: K[]) => {
    const { rows } = await db.executeQuery<Row>(CompiledQuery.raw(postgres, [keys]))
    return new Map(rows.map((row) => [keyOf(row), row]))
  })
  // SQLite looks each key up at once (see above), as a plain parameter, straight on the driver
  // when no transaction is open (`readRows`): no Kysely pass, no json_each, no batching
  // machinery. Measured in a loop, CPU per lookup: 6.7-8.3 µs before, 4.2-4.8 µs so; a transfer
  // by key makes three (its key, its recipient, its asset;
  // docs/performance.md#transfers-round-three-engineer-t).
  const sqlite = text.replace('$keys', '(?)')
  const onSqlite = async (db: Executor, key: K): Promise<Row | undefined> => (await readRows<Row>(db, sqlite, [key])).find((row) => keyOf(row) === key)
  return (db, key) => (isPostgres(db) ? onPostgres(db, key) : onSqlite(db, key))
}
