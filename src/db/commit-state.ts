import { LRUCache } from 'lru-cache'
import { CompiledQuery } from 'kysely'
import type { Executor } from './database.types.ts'
import { isPostgres } from './dialect.ts'
import { oncePerTurn, perDatabase } from './per-turn.ts'
import { sqliteStatementsOf } from './sqlite-statements.ts'
import { storageStateOf, type LatestCommitState } from './storage-state.ts'

/**
 * The database's commit state: a text that stays the same only while nothing at all has been
 * committed, by anyone. A value kept with the state read BEFORE it was loaded may be served again
 * without reading while the state now is the same text (`KeptReads` below). SQLite:
 * `total_changes()` and `data_version`; PostgreSQL: `pg_current_snapshot()` and the server's start
 * time; both read once per turn of the event loop. Every state names its database object, so one
 * store's value is never served for another. Undefined (serve nothing from memory) inside a
 * transaction, when the read failed, or just after this process wrote (`WRITING_RECHECK_MS`).
 * Why it is sound: `docs/decisions.md#reads-kept-while-nothing-was-committed`.
 */
export type CommitState = string

function remember(db: Executor, state: CommitState, began: Omit<LatestCommitState, 'state'>): CommitState {
  const storage = storageStateOf(db)
  if ((storage.latest?.mark ?? 0) < began.mark) storage.latest = { state, ...began }
  return state
}

const SQLITE_OWN_WRITES = 'select total_changes() as c'

/**
 * What this process has written, by a cheap count that moves when it commits: SQLite's
 * `total_changes()` (a function call, no read transaction), PostgreSQL's count of transaction
 * blocks ended.
 */
function ownWrites(db: Executor): number {
  if (isPostgres(db)) return storageStateOf(db).transactionsEnded
  return (sqliteStatementsOf(db)?.prepare(SQLITE_OWN_WRITES).get() as { c: number } | undefined)?.c ?? 0
}

/**
 * While this process writes, the state moves with every one of its commits: a read of the state
 * is then spent (the value is read as before anyway). So when it has written since the latest
 * read began, the state is taken as moved without reading it, for up to this long after that
 * read; then it is read again, so that the reads kept resume within this time once the writes
 * stop.
 */
const WRITING_RECHECK_MS = 50

/** A mark taken as a request arrives, for `readCommitState(db, since)` later in that request. */
export function arrivalMark(db: Executor): number {
  return ++storageStateOf(db).clock
}

const SQLITE_STATE = 'select total_changes() as c, data_version as v from pragma_data_version'
const POSTGRES_STATE = "select pg_current_snapshot()::text || ' ' || pg_postmaster_start_time()::text as state"

/**
 * The state of each database, read once per turn of the event loop for every caller of that turn
 * (`oncePerTurn`): the read begins after every request of the turn arrived, and a caller after
 * the read joins the next turn's. A read per request would fill PostgreSQL's pool under load and
 * cost SQLite a read transaction per request; so the requests of a turn go on, and answer,
 * together (docs/performance.md#reads).
 */
const turnStateOf = perDatabase((db: Executor) => oncePerTurn(() => (isPostgres(db) ? readPostgresState(db) : readSqliteState(db))))

/** Marked as the query is sent. */
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
 * The commit state now: on both storages the state read once for this turn of the event loop,
 * after every request of the turn arrived (`turnStateOf`), so a caller waits for
 * the end of the turn's I/O. With `since` (an `arrivalMark` of the request asking), the latest
 * state already read after that mark serves at once instead: a history page uses the state its
 * request's credential lookup waited for. Serving what was committed when that state was read is
 * serving the database as it was at a moment after the request arrived, as a read made then
 * would.
 */
export async function readCommitState(db: Executor, since?: number): Promise<CommitState | undefined> {
  if (db.isTransaction) return undefined
  if (since !== undefined) {
    const last = storageStateOf(db).latest
    if (last && last.mark > since) return last.state
  }
  try {
    const statements = sqliteStatementsOf(db)
    // A transaction open on SQLite's one connection: its writes are counted before they are
    // committed (checked again when the turn's state is read).
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
