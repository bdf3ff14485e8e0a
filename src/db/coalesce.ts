import DataLoader from 'dataloader'
import { CompiledQuery } from 'kysely'
import type { Executor } from './database.ts'
import { isPostgres } from './dialect.ts'

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
  const loader = new DataLoader<K, V | undefined>(
    async (keys) => {
      const found = await load([...new Set(keys)])
      return keys.map((key) => found.get(key))
    },
    // After the I/O callbacks of this turn, so that every request that arrived in it joins.
    { cache: false, batchScheduleFn: (run) => setImmediate(run), maxBatchSize: 256 },
  )
  return (key) => loader.load(key)
}

/** One coalesced lookup per database (an app, a test, a CLI run each have their own). */
function coalescedPer<K, V>(load: (db: Executor, keys: K[]) => Promise<Map<K, V>>): (db: Executor, key: K) => Promise<V | undefined> {
  const lookups = new WeakMap<Executor, (key: K) => Promise<V | undefined>>()
  return (db, key) => {
    let lookup = lookups.get(db)
    if (!lookup) lookups.set(db, (lookup = coalesced(db, (keys) => load(db, keys))))
    return lookup(key)
  }
}

/**
 * `coalescedPer` for a lookup written once as SQL text, one per dialect, where `$keys` stands for
 * the keys (`value` of `json_each(?)` on SQLite, `any($1::<type>[])` on PostgreSQL, as `anyOf` in
 * dialect.ts writes them). Every authenticated request makes such a lookup: building and compiling
 * it with Kysely's query builder each time cost more CPU than SQLite took to answer it
 * (`docs/performance.md#read-path-one-statement-per-page`).
 */
export function coalescedStatement<K extends string | number, Row>(
  text: string,
  type: 'bigint' | 'text',
  keyOf: (row: Row) => K,
): (db: Executor, key: K) => Promise<Row | undefined> {
  const sqlite = text.replace('$keys', '(select value from json_each(?))')
  const postgres = text.replace('$keys', `any($1::${type}[])`)
  return coalescedPer(async (db: Executor, keys: K[]) => {
    const query = isPostgres(db) ? CompiledQuery.raw(postgres, [keys]) : CompiledQuery.raw(sqlite, [JSON.stringify(keys)])
    const { rows } = await db.executeQuery<Row>(query)
    return new Map(rows.map((row) => [keyOf(row), row]))
  })
}
