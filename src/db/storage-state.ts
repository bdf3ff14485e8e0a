import crypto from 'node:crypto'
import type { Executor } from './database.types.ts'
import type SQLite from 'better-sqlite3'

/**
 * What spans requests for one open database: built when it is opened (`database.ts`,
 * `postgres.ts`) and hung on its Kysely adapter, which the database and every transaction on it
 * share, so any executor reaches it (`storageStateOf`). Nothing of it lives at module level: an
 * app, a test and a CLI run each have their own.
 */
export class StorageState {
  /** Names this database in commit states: two stores that count alike are never confused. */
  readonly id = crypto.randomUUID()
  /** SQLite: the prepared-statement cache (`sqlite-statements.ts`). */
  statements: SqliteStatements | undefined
  /** PostgreSQL: transaction blocks this database's connections have ended (committed or rolled back). */
  transactionsEnded = 0
  /** A count that moves on every request's arrival and on the start of every read of the commit state (`commit-state.ts`). */
  clock = 0
  /** The latest commit state read, with what was noted as its read began (`commit-state.ts`). */
  latest: LatestCommitState | undefined
  /** PostgreSQL: until when a good readiness probe is believed; a lost connection or a storage fault ends it at once. */
  readyUntil = 0
  readonly #parts = new Map<symbol, unknown>()

  /** The part kept under `key`, made on first use (the per-turn batches of `coalesce.ts`, `commit-state.ts`). */
  part<T>(key: symbol, make: () => T): T {
    if (!this.#parts.has(key)) this.#parts.set(key, make())
    return this.#parts.get(key) as T
  }
}

export interface LatestCommitState {
  state: string
  /** The `clock` as the read began. */
  mark: number
  /** This process's own writes then (`commit-state.ts` ownWrites). */
  writes: number
  at: number
}

/** A SQLite database's prepared statements, by SQL text (`database.ts` withStatementCache). */
export interface SqliteStatements {
  prepare(sql: string): SQLite.Statement
  /** Whether a transaction is open on the connection (`BEGIN` … `COMMIT`/`ROLLBACK`). */
  inTransaction(): boolean
}

const STATE = Symbol('coffer storage state')

/** Hangs `state` on the adapter of a database being opened. */
export function attachStorageState(adapter: object, state: StorageState): void {
  Object.defineProperty(adapter, STATE, { value: state })
}

/** The state of the database behind this executor; made on first use for a database opened elsewhere (a test's own Kysely). */
export function storageStateOf(executor: Executor): StorageState {
  const adapter = executor.getExecutor().adapter as { [STATE]?: StorageState }
  if (!adapter[STATE]) attachStorageState(adapter, new StorageState())
  return adapter[STATE] as StorageState
}
