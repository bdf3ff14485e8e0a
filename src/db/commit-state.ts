import { LRUCache } from 'lru-cache'
import { CompiledQuery } from 'kysely'
import type { Executor } from './database.types.ts'
import { isPostgres } from './dialect.ts'
import { oncePerTurn, perDatabase } from './per-turn.ts'
import { sqliteStatementsOf } from './sqlite-statements.ts'
import { storageStateOf, type LatestCommitState } from './storage-state.ts'

/**
 * A text that stays the same only while nothing at all has been committed, by anyone; undefined
 * (serve nothing from memory) in a transaction, after a failed read, or just after this process
 * wrote. Why it is sound: `docs/decisions.md#reads-kept-while-nothing-was-committed`.
 */
export type CommitState = string

function remember(db: Executor, state: CommitState, began: Omit<LatestCommitState, 'state'>): CommitState {
  const storage = storageStateOf(db)
  if ((storage.latest?.mark ?? 0) < began.mark) storage.latest = { state, ...began }
  return state
}

const SQLITE_OWN_WRITES = 'select total_changes() as c'

/** A cheap count that moves when this process commits. */
function ownWrites(db: Executor): number {
  if (isPostgres(db)) return storageStateOf(db).transactionsEnded
  return (sqliteStatementsOf(db)?.prepare(SQLITE_OWN_WRITES).get() as { c: number } | undefined)?.c ?? 0
}

/** While this process writes, the state is taken as moved without reading it, for this long after the last read. */
const WRITING_RECHECK_MS = 50

/** A mark taken as a request arrives, for `readCommitState(db, since)` later in that request. */
export function arrivalMark(db: Executor): number {
  return ++storageStateOf(db).clock
}

const SQLITE_STATE = 'select total_changes() as c, data_version as v from pragma_data_version'
const POSTGRES_STATE = "select pg_current_snapshot()::text || ' ' || pg_postmaster_start_time()::text as state"

/** Read once per turn of the event loop for all its callers: one read per request would fill the pool (docs/performance.md#reads). */
const turnStateOf = perDatabase((db: Executor) => oncePerTurn(() => (isPostgres(db) ? readPostgresState(db) : readSqliteState(db))))

async function readPostgresState(db: Executor): Promise<CommitState> {
  const storage = storageStateOf(db)
  const began = { mark: ++storage.clock, writes: storage.transactionsEnded, at: Date.now() }
  const { rows } = await db.executeQuery<{ state: string }>(CompiledQuery.raw(POSTGRES_STATE, []))
  return remember(db, `${storage.id} ${rows[0].state}`, began)
}

function readSqliteState(db: Executor): CommitState | undefined {
  try {
    const statements = sqliteStatementsOf(db)
    if (!statements || statements.inTransaction()) return undefined
    const storage = storageStateOf(db)
    const began = { mark: ++storage.clock, writes: 0, at: Date.now() }
    const { c, v } = statements.prepare(SQLITE_STATE).get() as { c: number; v: number }
    return remember(db, `${storage.id} ${c} ${v}`, { ...began, writes: c })
  } catch {
    return undefined
  }
}

/**
 * The commit state as read this turn. With `since` (the request's `arrivalMark`), a state already
 * read after that mark serves at once: it shows the database at a moment after the request arrived.
 */
export async function readCommitState(db: Executor, since?: number): Promise<CommitState | undefined> {
  if (db.isTransaction) return undefined
  if (since !== undefined) {
    const last = storageStateOf(db).latest
    if (last && last.mark > since) return last.state
  }
  try {
    const statements = sqliteStatementsOf(db)
    // An open SQLite transaction counts its writes before they commit.
    if (statements?.inTransaction()) return undefined
    const last = storageStateOf(db).latest
    if (last && ownWrites(db) !== last.writes && Date.now() - last.at < WRITING_RECHECK_MS) return undefined
    if (!statements && !isPostgres(db)) return undefined
    return await turnStateOf(db)()
  } catch {
    return undefined
  }
}

/**
 * Values by key, each kept with the commit state read BEFORE it was loaded (one read after could
 * miss a commit in between) and served only while the state is unchanged. Expiries are the caller's to judge.
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

/** `load(key)`, or the value kept for `key` while nothing has been committed since. */

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
