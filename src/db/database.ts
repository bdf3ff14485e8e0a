import fs from 'node:fs'
import path from 'node:path'
import SQLite from 'better-sqlite3'
import {
  CompiledQuery,
  Kysely,
  SqliteDialect,
  type DialectAdapter,
  type Driver,
  type SqliteDatabase,
  type SqliteDialectConfig,
} from 'kysely'
import type { PostgresTimeouts } from '../config.ts'
import { startCheckpointer } from './checkpointer.ts'
import type { Database } from './database.types.ts'
import { StorageFault } from './faults.ts'
import { openPostgres } from './postgres.ts'
import { makeDataDirectory, makePrivate } from '../secrets/private-files.ts'
import { statementCache } from './sqlite-statements.ts'
import { attachStorageState, StorageState, type SqliteStatements } from './storage-state.ts'
import type { DB } from './tables.ts'

export { openPostgres }
export type { Database, Db, Executor, Trx } from './database.types.ts'

export interface DatabaseOptions {
  databaseUrl: string | undefined
  dataDir: string
  poolSize?: number
  /** SQLite: checkpoint the WAL from a worker thread instead of inside commits (servers; checkpointer.ts). */
  backgroundCheckpoints?: boolean
  /** PostgreSQL: bounded waits (`config.ts` has the defaults). */
  postgresTimeouts?: PostgresTimeouts
}

/** Opens PostgreSQL when a URL is given, else the embedded SQLite file in the data directory. */
export function openDatabase(options: DatabaseOptions): Database {
  if (options.databaseUrl) return openPostgres(options.databaseUrl, options.poolSize ?? 20, options.postgresTimeouts)
  makeDataDirectory(options.dataDir)
  return openSqlite(path.join(options.dataDir, 'coffer.sqlite'), { backgroundCheckpoints: options.backgroundCheckpoints })
}

/** The driver's database for Kysely, preparing through the statement cache (`sqlite-statements.ts`). */
function withStatementCache(sqlite: SQLite.Database): SqliteDatabase & SqliteStatements {
  const statements = statementCache(sqlite)
  return { close: () => sqlite.close(), ...statements }
}

/** The page cache of the service's SQLite connection, in KiB. */
const SQLITE_CACHE_KIB = 64 * 1024

/** Page size of new SQLite files. */
export const SQLITE_PAGE_SIZE = 2048

export function openSqlite(file: string, options: { backgroundCheckpoints?: boolean } = {}): Database {
  // Made 0600 before SQLite opens it: SQLite gives the WAL and SHM files the database file's mode.
  const onDisk = file !== ':memory:' && !file.startsWith('file:')
  if (onDisk) makePrivate(file, { create: true })
  const sqlite = new SQLite(file)
  // New files only; smaller pages write fewer bytes per transfer (docs/performance.md#the-write-path).
  sqlite.pragma(`page_size = ${SQLITE_PAGE_SIZE}`)
  sqlite.pragma('journal_mode = WAL')
  if (onDisk) for (const suffix of ['-wal', '-shm']) makePrivate(file + suffix)
  // A 201 means durably committed: fsync the WAL on every commit.
  sqlite.pragma('synchronous = FULL')
  sqlite.pragma('foreign_keys = ON')
  sqlite.pragma('busy_timeout = 10000')
  // A batch writes rows at many places of each table's indexes: keep their pages in memory (up to
  // 64 MiB, against SQLite's 2 MiB) rather than read them back from the file for every batch.
  sqlite.pragma(`cache_size = -${SQLITE_CACHE_KIB}`)
  const checkpointer = options.backgroundCheckpoints ? startCheckpointer(file) : undefined
  if (checkpointer) {
    // Commits checkpoint by themselves only past 40 MB of log.
    const pageSize = sqlite.pragma('page_size', { simple: true }) as number
    sqlite.pragma(`wal_autocheckpoint = ${Math.round((40 * 1024 * 1024) / pageSize)}`)
  }
  const statements = withStatementCache(sqlite)
  const db = new Kysely<DB>({ dialect: new ImmediateSqliteDialect(sqlite, statements, { database: statements }) })
  const probeFile = path.join(path.dirname(file), '.coffer-write-probe')
  return {
    db,
    dialect: 'sqlite',
    async checkWritable() {
      sqlite.prepare('select 1').get()
      await probeWrite(probeFile)
    },
    async close() {
      await checkpointer?.stop()
      await db.destroy()
    },
  }
}

/** Bytes the readiness probe writes: a few pages of log, as a small batch of transfers needs. */
const PROBE_BYTES = 64 * 1024

/** Whether the disk takes a synced write now: `select 1` still answers on a full or read-only disk. */
async function probeWrite(file: string): Promise<void> {
  let handle: fs.promises.FileHandle | undefined
  try {
    handle = await fs.promises.open(file, 'w')
    await handle.write(Buffer.alloc(PROBE_BYTES))
    await handle.sync()
  } catch (error) {
    const code = (error as { code?: string }).code ?? 'EIO'
    throw new StorageFault(`the database's disk does not take writes (${code})`, code, { cause: error })
  } finally {
    await handle?.close().catch(() => {})
    await fs.promises.rm(file, { force: true }).catch(() => {})
  }
}

/**
 * Writing transactions begin `IMMEDIATE`, so they wait out another process's write lock instead of
 * failing at their first write; read-only ones stay deferred and never hold writers up.
 */
class ImmediateSqliteDialect extends SqliteDialect {
  readonly #sqlite: SQLite.Database
  readonly #statements: SqliteStatements

  constructor(sqlite: SQLite.Database, statements: SqliteStatements, config: SqliteDialectConfig) {
    super(config)
    this.#sqlite = sqlite
    this.#statements = statements
  }

  /** Shared by the database and its transactions, so it carries the storage state. */
  override createAdapter(): DialectAdapter {
    const adapter = super.createAdapter()
    const state = new StorageState()
    state.statements = this.#statements
    attachStorageState(adapter, state)
    return adapter
  }

  override createDriver(): Driver {
    const driver = super.createDriver()
    driver.beginTransaction = async (connection, settings) => {
      await connection.executeQuery(CompiledQuery.raw(settings.accessMode === 'read only' ? 'begin' : 'begin immediate'))
    }
    // SQLite rolls back by itself after some errors; a second ROLLBACK's error would hide the real one.
    const rollback = driver.rollbackTransaction.bind(driver)
    driver.rollbackTransaction = async (connection) => {
      if (this.#sqlite.inTransaction) await rollback(connection)
    }
    return driver
  }
}
