import crypto from 'node:crypto'
import type { Executor } from './database.types.ts'
import type SQLite from 'better-sqlite3'

/** What spans requests for one open database, hung on its Kysely adapter so any executor on it reaches it. */
export class StorageState {
  /** Names this database in commit states: two stores that count alike are never confused. */
  readonly id = crypto.randomUUID()
  statements: SqliteStatements | undefined
  /** PostgreSQL: transaction blocks ended (committed or rolled back). */
  transactionsEnded = 0
  /** Moves on every request's arrival and every start of a commit-state read. */
  clock = 0
  latest: LatestCommitState | undefined
  /** PostgreSQL: until when a good readiness probe is believed. */
  readyUntil = 0
  readonly #parts = new Map<symbol, unknown>()

  part<T>(key: symbol, make: () => T): T {
    if (!this.#parts.has(key)) this.#parts.set(key, make())
    return this.#parts.get(key) as T
  }
}

export interface LatestCommitState {
  state: string
  /** The `clock` and this process's own writes as the read began. */
  mark: number
  writes: number
  at: number
}

export interface SqliteStatements {
  prepare(sql: string): SQLite.Statement
  inTransaction(): boolean
}

const STATE = Symbol('coffer storage state')

export function attachStorageState(adapter: object, state: StorageState): void {
  Object.defineProperty(adapter, STATE, { value: state })
}

/** Made on first use for a database opened elsewhere (a test's own Kysely). */
export function storageStateOf(executor: Executor): StorageState {
  const adapter = executor.getExecutor().adapter as { [STATE]?: StorageState }
  if (!adapter[STATE]) attachStorageState(adapter, new StorageState())
  return adapter[STATE] as StorageState
}
