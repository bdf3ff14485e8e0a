import type { Kysely, Transaction } from 'kysely'
import type pg from 'pg'
import type { DB } from './tables.ts'

/** What the rest of the service sees of the storage, whichever it is (`database.ts` opens it). */
type Dialect = 'sqlite' | 'postgres'
export type Db = Kysely<DB>
/** A database transaction: what a function that locks rows or writes several of them must be given. */
export type Trx = Transaction<DB>
/** A database or a transaction: for reads that are right in either. */
export type Executor = Db | Trx

export interface Database {
  db: Db
  dialect: Dialect
  /**
   * Readiness: resolves when the storage can take a write now, throws a storage fault
   * (`faults.ts`) when it cannot (unreachable, a read-only server, SQLite's disk full, a
   * PostgreSQL commit not done within its bound, as on a primary waiting for a lost standby).
   */
  checkWritable(): Promise<void>
  /** PostgreSQL: the connection pool's use right now (metrics); undefined on SQLite, which has one connection. */
  poolUse?(): PoolUse
  /** PostgreSQL: a connection of the pool for work beyond the query builder (`COPY`); the caller releases it. */
  postgresClient?(): Promise<pg.PoolClient>
  close(): Promise<void>
}

export interface PoolUse {
  max: number
  open: number
  idle: number
  /** Queries waiting for a connection: the pool is saturated. */
  waiting: number
}
