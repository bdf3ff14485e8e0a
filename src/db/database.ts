import fs from 'node:fs'
import path from 'node:path'
import SQLite from 'better-sqlite3'
import { CompiledQuery, Kysely, PostgresDialect, SqliteDialect, type Driver, type SqliteDatabase, type Transaction } from 'kysely'
import pg from 'pg'
import { startCheckpointer } from './checkpointer.ts'
import type { DB } from './tables.ts'

export type Dialect = 'sqlite' | 'postgres'
export type Db = Kysely<DB>
export type Executor = Kysely<DB> | Transaction<DB>

export interface Database {
  db: Db
  dialect: Dialect
  /** Checks that the storage answers (readiness). */
  ping(): Promise<void>
  /** PostgreSQL: the connection pool's use right now (metrics); undefined on SQLite, which has one connection. */
  poolUse?(): PoolUse
  close(): Promise<void>
}

export interface PoolUse {
  max: number
  open: number
  idle: number
  /** Queries waiting for a connection: the pool is saturated. */
  waiting: number
}

const UNAVAILABLE_CODES = new Set([
  // Node network errors while reaching PostgreSQL.
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EPIPE',
  // PostgreSQL: shutting down, starting up, out of connections.
  '57P01',
  '57P02',
  '57P03',
  '53300',
  // SQLite: still locked after the busy timeout, or the file cannot be opened.
  'SQLITE_BUSY',
  'SQLITE_CANTOPEN',
])
const UNAVAILABLE_MESSAGES = /driver has already been destroyed|Cannot use a pool after calling end|Connection terminated|timeout exceeded when trying to connect|database connection is not open/i

/**
 * True when a query failed because the storage cannot be reached right now (down, shutting down,
 * out of connections, locked), not because of the query: the request may be retried (S001).
 */
export function isStorageUnavailable(error: unknown): boolean {
  const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown }
  if (typeof code === 'string' && (UNAVAILABLE_CODES.has(code) || code.startsWith('08'))) return true
  return typeof message === 'string' && UNAVAILABLE_MESSAGES.test(message)
}

// Quantities are bigint columns capped at 2^53-1 by the ledger rules, so they fit a JS number.
pg.types.setTypeParser(pg.types.builtins.INT8, (value) => Number(value))

export interface DatabaseOptions {
  databaseUrl: string | undefined
  dataDir: string
  poolSize?: number
  /** SQLite: checkpoint the WAL from a worker thread instead of inside commits (servers; checkpointer.ts). */
  backgroundCheckpoints?: boolean
}

/** Opens PostgreSQL when a URL is given, else the embedded SQLite file in the data directory. */
export function openDatabase(options: DatabaseOptions): Database {
  if (options.databaseUrl) return openPostgres(options.databaseUrl, options.poolSize ?? 20)
  fs.mkdirSync(options.dataDir, { recursive: true })
  return openSqlite(path.join(options.dataDir, 'coffer.sqlite'), { backgroundCheckpoints: options.backgroundCheckpoints })
}

/**
 * Kysely prepares every query anew, and preparing costs SQLite more than running the small
 * queries of this service; so prepared statements are kept, by SQL text, for reuse. SQLite
 * re-prepares a kept statement by itself after a schema change. The cache is bounded because
 * `in (…)` lists of different lengths give different texts.
 */
function withStatementCache(sqlite: SQLite.Database, size = 500): SqliteDatabase {
  const statements = new Map<string, SQLite.Statement>()
  return {
    close: () => sqlite.close(),
    prepare(sql: string) {
      let statement = statements.get(sql)
      if (!statement) {
        statement = sqlite.prepare(sql)
        // Oldest first out: the hot statements are few and come straight back.
        if (statements.size >= size) statements.delete(statements.keys().next().value as string)
        statements.set(sql, statement)
      }
      return statement
    },
  }
}

/** Page size of new SQLite files. */
export const SQLITE_PAGE_SIZE = 2048

export function openSqlite(file: string, options: { backgroundCheckpoints?: boolean } = {}): Database {
  const sqlite = new SQLite(file)
  // New files only (an existing file keeps its page size). A transfer changes a few rows spread
  // over many pages (two holdings; the sender's and the recipient's ranges in the (wallet, id)
  // indexes of transactions and events), and every changed page goes whole into the log, is
  // synced with it and copied back at the checkpoint: with 2 KB pages the service wrote a third
  // fewer bytes per transfer than with SQLite's default 4 KB (docs/performance.md, item 24).
  sqlite.pragma(`page_size = ${SQLITE_PAGE_SIZE}`)
  sqlite.pragma('journal_mode = WAL')
  // A 201 means durably committed: fsync the WAL on every commit.
  sqlite.pragma('synchronous = FULL')
  sqlite.pragma('foreign_keys = ON')
  // Another process (the `coffer` CLI, a second server) holding the write lock makes us wait.
  sqlite.pragma('busy_timeout = 10000')
  const checkpointer = options.backgroundCheckpoints ? startCheckpointer(file) : undefined
  if (checkpointer) {
    // Commits checkpoint by themselves only if the background checkpoints fall far behind: past
    // 40 MB of log (the threshold counts pages, of this file's size).
    const pageSize = sqlite.pragma('page_size', { simple: true }) as number
    sqlite.pragma(`wal_autocheckpoint = ${Math.round((40 * 1024 * 1024) / pageSize)}`)
  }
  const db = new Kysely<DB>({ dialect: new ImmediateSqliteDialect({ database: withStatementCache(sqlite) }) })
  return {
    db,
    dialect: 'sqlite',
    async ping() {
      sqlite.prepare('select 1').get()
    },
    async close() {
      await checkpointer?.stop()
      await db.destroy()
    },
  }
}

/**
 * SQLite transactions that may write begin `IMMEDIATE`: they take the write lock first, waiting
 * out another process that holds it (the `coffer` CLI beside a server) through the busy timeout.
 * A deferred transaction that read first is refused at once when it starts writing while the
 * other holds the lock: SQLite cannot wait then, since the other's commit would leave it reading
 * a stale snapshot. Read-only transactions (`setAccessMode('read only')`, `coffer verify`) stay
 * deferred and never hold writers up.
 */
class ImmediateSqliteDialect extends SqliteDialect {
  override createDriver(): Driver {
    const driver = super.createDriver()
    driver.beginTransaction = async (connection, settings) => {
      await connection.executeQuery(CompiledQuery.raw(settings.accessMode === 'read only' ? 'begin' : 'begin immediate'))
    }
    return driver
  }
}

/**
 * Kysely sends every query unnamed, so PostgreSQL parsed and planned each one on every call, and
 * planning cost more than running the small queries of a transfer. A named statement is parsed
 * once per connection and, after a few runs, planned once. Queries without parameters (begin,
 * commit, savepoints) stay on the simple protocol. The names are bounded, since `in (…)` lists
 * of different lengths give different texts; past the bound new texts simply go unnamed.
 */
const statementNames = new Map<string, string>()
const MAX_STATEMENT_NAMES = 2000

class PreparingClient extends pg.Client {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  override query(config: any, values?: any, callback?: any): any {
    if (typeof config === 'string' && Array.isArray(values) && values.length > 0 && callback === undefined) {
      let name = statementNames.get(config)
      if (name === undefined && statementNames.size < MAX_STATEMENT_NAMES) {
        name = `coffer_${statementNames.size + 1}`
        statementNames.set(config, name)
      }
      if (name !== undefined) return super.query({ name, text: config, values })
    }
    return super.query(config, values, callback)
  }
}

export function openPostgres(url: string, poolSize: number): Database {
  const pool = new pg.Pool({ connectionString: url, max: poolSize, Client: PreparingClient })
  // An idle client losing its connection must not crash the process; the next query reconnects.
  pool.on('error', () => {})
  const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool }) })
  return {
    db,
    dialect: 'postgres',
    async ping() {
      await pool.query('select 1')
    },
    poolUse: () => ({ max: poolSize, open: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount }),
    async close() {
      await db.destroy()
    },
  }
}
