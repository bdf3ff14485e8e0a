import fs from 'node:fs'
import path from 'node:path'
import SQLite from 'better-sqlite3'
import { Kysely, PostgresDialect, SqliteDialect, type Transaction } from 'kysely'
import pg from 'pg'
import type { DB } from './tables.ts'

export type Dialect = 'sqlite' | 'postgres'
export type Db = Kysely<DB>
export type Executor = Kysely<DB> | Transaction<DB>

export interface Database {
  db: Db
  dialect: Dialect
  /** Checks that the storage answers (readiness). */
  ping(): Promise<void>
  close(): Promise<void>
}

// Quantities are bigint columns capped at 2^53-1 by the ledger rules, so they fit a JS number.
pg.types.setTypeParser(pg.types.builtins.INT8, (value) => Number(value))

export interface DatabaseOptions {
  databaseUrl: string | undefined
  dataDir: string
  poolSize?: number
}

/** Opens PostgreSQL when a URL is given, else the embedded SQLite file in the data directory. */
export function openDatabase(options: DatabaseOptions): Database {
  if (options.databaseUrl) return openPostgres(options.databaseUrl, options.poolSize ?? 20)
  fs.mkdirSync(options.dataDir, { recursive: true })
  return openSqlite(path.join(options.dataDir, 'coffer.sqlite'))
}

export function openSqlite(file: string): Database {
  const sqlite = new SQLite(file)
  sqlite.pragma('journal_mode = WAL')
  // A 201 means durably committed: fsync the WAL on every commit.
  sqlite.pragma('synchronous = FULL')
  sqlite.pragma('foreign_keys = ON')
  // Another process (the `coffer` CLI, a second server) holding the write lock makes us wait.
  sqlite.pragma('busy_timeout = 10000')
  const db = new Kysely<DB>({ dialect: new SqliteDialect({ database: sqlite }) })
  return {
    db,
    dialect: 'sqlite',
    async ping() {
      sqlite.prepare('select 1').get()
    },
    async close() {
      await db.destroy()
    },
  }
}

export function openPostgres(url: string, poolSize: number): Database {
  const pool = new pg.Pool({ connectionString: url, max: poolSize })
  // An idle client losing its connection must not crash the process; the next query reconnects.
  pool.on('error', () => {})
  const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool }) })
  return {
    db,
    dialect: 'postgres',
    async ping() {
      await pool.query('select 1')
    },
    async close() {
      await db.destroy()
    },
  }
}
