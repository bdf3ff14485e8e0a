import { LRUCache } from 'lru-cache'
import { CompiledQuery } from 'kysely'
import { perDatabase, perTurn } from './coalesce.ts'
import type { Executor } from './database.types.ts'
import { isPostgres } from './dialect.ts'
import { sqliteStatementsOf } from './sqlite-statements.ts'

/**
 * The database's commit state: a text that stays the same only while nothing at all has been
 * committed to the database, by anyone (this process, another instance, the `coffer` CLI, a
 * restore). A value read from the database and kept with the state read BEFORE it was loaded may
 * be served again, without reading, for as long as the state read now is the same text: nothing
 * committed in between, so a read now would answer the same (`KeptReads` below;
 * `docs/decisions.md#reads-kept-while-nothing-was-committed` has the argument in full).
 *
 * - SQLite: `total_changes()` counts every row this connection has inserted, updated or deleted
 *   (triggers included; never decreasing, a rollback included), and `data_version` moves whenever
 *   ANY OTHER connection commits (another process, the CLI, the checkpointer's worker, which only
 *   copies pages and does not move it). Together they move on every commit; one statement, about
 *   3 µs.
 * - PostgreSQL: `pg_current_snapshot()` (xmin:xmax:in-progress ids) decides exactly which
 *   transactions a read sees. A commit either raises xmax (its id was at or past it) or removes
 *   its id from the in-progress list (xmax never goes down), so equal texts mean nothing committed
 *   between them. `pg_postmaster_start_time()` goes with it, so another server (a restart, a
 *   promoted standby, a restored cluster) never gives the same text. Read once per turn of the
 *   event loop for every request of that turn (`coalesce.ts` perTurn): one round trip shared,
 *   taken after every request of the turn arrived, so every write acknowledged before one of them
 *   arrived is counted.
 *
 * Every state names its database object too: two stores (a test's, a restore's target) may well
 * count the same, and what was read from one is never served for the other.
 *
 * Undefined when the state cannot be known: inside a transaction (its own uncommitted writes
 * count already), or when the statement failed (then the caller reads as ever, and meets the
 * storage's fault there).
 */
export type CommitState = string

/** One serial number per database object (a Kysely instance and its transactions share an adapter). */
const serials = new WeakMap<object, number>()
let lastSerial = 0

function serialOf(executor: Executor): number {
  const adapter = executor.getExecutor().adapter
  let serial = serials.get(adapter)
  if (serial === undefined) serials.set(adapter, (serial = ++lastSerial))
  return serial
}

const SQLITE_STATE = 'select total_changes() as c, data_version as v from pragma_data_version'
const POSTGRES_STATE = "select pg_current_snapshot()::text || ' ' || pg_postmaster_start_time()::text as state"

/** The PostgreSQL state of each database, one query per turn of the event loop. */
const postgresState = perDatabase((db: Executor) =>
  perTurn(async () => {
    const { rows } = await db.executeQuery<{ state: string }>(CompiledQuery.raw(POSTGRES_STATE, []))
    return new Map([[0, rows[0].state]])
  }, 1),
)

export async function readCommitState(db: Executor): Promise<CommitState | undefined> {
  if (db.isTransaction) return undefined
  try {
    if (isPostgres(db)) {
      const state = await postgresState(db, 0)
      return state === undefined ? undefined : `${serialOf(db)} ${state}`
    }
    const statements = sqliteStatementsOf(db)
    // A transaction open on the one connection: its writes are counted before they are committed.
    if (!statements || statements.inTransaction()) return undefined
    const { c, v } = statements.prepare(SQLITE_STATE).get() as { c: number; v: number }
    return `${serialOf(db)} ${c} ${v}`
  } catch {
    return undefined
  }
}

/** Lookups of a `KeptReads`, by outcome (for a counter in /metrics and for tests). */
export type KeptOutcome = 'unchanged' | 'read'

/**
 * Values read from the database by key, each with the commit state it was read at; bounded, the
 * least recently used going first. `get` answers a value only when the state given (read now) is
 * the one it was kept with; `set` keeps a value with the state read BEFORE it was loaded (a
 * state from after could miss a commit made in between). A value whose meaning depends on the
 * time (an expiry) must still be judged by the caller on every use.
 */
export class KeptReads<K extends NonNullable<unknown>, V extends NonNullable<unknown>> {
  readonly #values: LRUCache<K, { state: CommitState; value: V }>

  constructor(maxEntries: number) {
    this.#values = new LRUCache({ max: maxEntries })
  }

  get(key: K, state: CommitState | undefined): V | undefined {
    if (state === undefined) return undefined
    const kept = this.#values.get(key)
    return kept?.state === state ? kept.value : undefined
  }

  set(key: K, state: CommitState | undefined, value: V | undefined): void {
    if (state === undefined || value === undefined) this.#values.delete(key)
    else this.#values.set(key, { state, value })
  }

  get size(): number {
    return this.#values.size
  }
}

/**
 * `load(key)`, or the value kept for `key` while the database's commit state has not moved since
 * it was read. A key the load finds nothing for is not kept.
 */
export async function readKept<K extends NonNullable<unknown>, V extends NonNullable<unknown>>(
  db: Executor,
  kept: KeptReads<K, V>,
  key: K,
  load: (key: K) => Promise<V | undefined>,
): Promise<V | undefined> {
  const state = await readCommitState(db)
  const value = kept.get(key, state)
  if (value !== undefined) return value
  const loaded = await load(key)
  kept.set(key, state, loaded)
  return loaded
}
