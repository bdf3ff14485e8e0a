import { Kysely, PostgresDialect, type Driver } from 'kysely'
import pg from 'pg'
import { DEFAULT_POSTGRES_TIMEOUTS, parsePostgresUrl, type PostgresHost, type PostgresTimeouts, type PostgresUrl } from '../config.ts'
import type { Database } from './database.types.ts'
import { StorageFault } from './faults.ts'
import type { DB } from './tables.ts'

// Quantities are bigint columns capped at 2^53-1 by the ledger rules, so they fit a JS number.
pg.types.setTypeParser(pg.types.builtins.INT8, (value) => Number(value))

/** Whether the session can write: not a standby in recovery, and not read-only by default. */
const WRITABLE = `select pg_is_in_recovery() as in_recovery, current_setting('transaction_read_only') = 'on' as read_only`

interface Writability {
  in_recovery: boolean
  read_only: boolean
}

/** A read-only transaction error: the server is a standby, or the old primary after a failover. */
const READ_ONLY_TRANSACTION = '25006'

/**
 * Chooses the host new connections go to, as libpq does for a multi-host URL: the hosts in the
 * given order, the first that fits `target_session_attrs`. The choice is kept while connections to
 * it succeed; once one fails, or lands on a server that no longer takes writes, it is forgotten and
 * the next connection looks again from the first host (after a failover: the promoted standby).
 */
class HostSelector {
  readonly #url: PostgresUrl
  readonly #connectTimeoutMs: number
  #chosen: PostgresHost | undefined
  #looking: Promise<PostgresHost> | undefined

  constructor(url: PostgresUrl, connectTimeoutMs: number) {
    this.#url = url
    this.#connectTimeoutMs = connectTimeoutMs
    // One host: nothing to choose; whether it takes writes is still checked per connection.
    if (url.hosts.length === 1) this.#chosen = url.hosts[0]
  }

  /** True when each new connection must be checked for taking writes. */
  get checksWrites(): boolean {
    return this.#url.targetSessionAttrs !== 'any'
  }

  fits({ in_recovery, read_only }: Writability): boolean {
    if (this.#url.targetSessionAttrs === 'primary') return !in_recovery
    return !in_recovery && !read_only
  }

  /** The host for the next connection. */
  choose(): Promise<PostgresHost> {
    if (this.#chosen) return Promise.resolve(this.#chosen)
    this.#looking ??= this.#look().finally(() => (this.#looking = undefined))
    return this.#looking
  }

  /** A connection to `host` failed or cannot write: the next one looks again. */
  forget(host: PostgresHost): void {
    if (this.#url.hosts.length > 1 && this.#chosen === host) this.#chosen = undefined
  }

  async #look(): Promise<PostgresHost> {
    let lastError: unknown
    for (const host of this.#url.hosts) {
      const probe = new pg.Client({ connectionString: this.#url.urlFor(host), connectionTimeoutMillis: this.#connectTimeoutMs })
      probe.on('error', () => {})
      try {
        await probe.connect()
        if (this.checksWrites && !this.fits((await probe.query<Writability>(WRITABLE)).rows[0])) {
          lastError = new StorageFault(`${host.host}:${host.port} does not accept writes`, 'READ_ONLY_SERVER')
          continue
        }
        this.#chosen = host
        return host
      } catch (error) {
        lastError = error
      } finally {
        void probe.end().catch(() => {})
      }
    }
    const wanted = this.checksWrites ? 'accepts writes' : 'accepts connections'
    throw new StorageFault(`no host of DATABASE_URL ${wanted}`, 'NO_USABLE_HOST', { cause: lastError })
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

/** The pool's clients: named statements, host selection, and errors that never crash the process. */
function clientClass(selector: HostSelector): typeof pg.Client {
  return class CofferClient extends pg.Client {
    #host: PostgresHost | undefined
    /** What broke the connection, reported as the cause of the next query's failure. */
    #lostWith: unknown

    constructor(config?: string | pg.ClientConfig) {
      super(config)
      // A connection lost while checked out (a restart, a failover) emits 'error' with no query to
      // fail; the pool listens only while the client is idle. Without this listener that error
      // would end the process. The next query on this client fails instead, and the pool drops
      // the client when it comes back (it is no longer queryable).
      this.on('error', (error) => {
        this.#lostWith ??= error
        if (this.#host) selector.forget(this.#host)
      })
    }

    // As pg's own: a promise of the client, or the callback (the pool's way) called with it.
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    override connect(callback?: any): any {
      const connecting = this.#connectToChosenHost().then(() => this)
      if (!callback) return connecting
      connecting.then(
        (client) => callback(null, client),
        (error: Error) => callback(error),
      )
    }

    async #connectToChosenHost(): Promise<void> {
      const host = await selector.choose()
      this.#host = host
      this.host = host.host
      this.port = host.port
      try {
        await super.connect()
        if (selector.checksWrites && !selector.fits((await super.query<Writability>(WRITABLE)).rows[0])) {
          throw new StorageFault(`${host.host}:${host.port} does not accept writes`, 'READ_ONLY_SERVER')
        }
      } catch (error) {
        // Landed on a standby or the old primary: dropped, never used; the next connection looks
        // again. Not waited for: a connection that never opened may never report its end.
        selector.forget(host)
        void this.end().catch(() => {})
        throw error
      }
    }

    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    override query(config: any, values?: any, callback?: any): any {
      let result
      if (typeof config === 'string' && Array.isArray(values) && values.length > 0 && callback === undefined) {
        let name = statementNames.get(config)
        if (name === undefined && statementNames.size < MAX_STATEMENT_NAMES) {
          name = `coffer_${statementNames.size + 1}`
          statementNames.set(config, name)
        }
        result = name === undefined ? super.query(config, values) : super.query({ name, text: config, values })
      } else {
        result = super.query(config, values, callback)
      }
      if (callback !== undefined || typeof result?.catch !== 'function') return result
      return (result as Promise<unknown>).catch((error: Error & { code?: string }) => {
        if (this.#lostWith !== undefined && error.cause === undefined) error.cause = this.#lostWith
        if (error.code === READ_ONLY_TRANSACTION && this.#host) {
          // The server stopped taking writes (demoted after a failover): this connection is done.
          selector.forget(this.#host)
          void this.end().catch(() => {})
        }
        throw error
      })
    }
  }
}

/**
 * PostgreSQL from a `DATABASE_URL` of one host or several (`parsePostgresUrl`), with a pool of
 * `poolSize` connections and bounded waits (`timeouts`).
 */
export function openPostgres(url: string, poolSize: number, timeouts: Partial<PostgresTimeouts> = {}): Database {
  const parsed = parsePostgresUrl(url)
  const limits = { ...DEFAULT_POSTGRES_TIMEOUTS, ...timeouts }
  const selector = new HostSelector(parsed, limits.connectTimeoutMs)
  const pool = new pg.Pool({
    connectionString: parsed.urlFor(parsed.hosts[0]),
    max: poolSize,
    Client: clientClass(selector),
    // Sent at connection start, so every session has them without a round trip.
    statement_timeout: limits.statementTimeoutMs,
    lock_timeout: limits.lockTimeoutMs,
    idle_in_transaction_session_timeout: limits.idleInTransactionTimeoutMs,
    connectionTimeoutMillis: limits.connectTimeoutMs,
    // A server that vanished without closing the connection (a failover) is noticed.
    keepAlive: true,
    keepAliveInitialDelayMillis: 10_000,
  })
  // An idle client losing its connection must not crash the process; the pool replaces it.
  pool.on('error', () => {})
  const db = new Kysely<DB>({ dialect: new KeptErrorPostgresDialect({ pool }) })
  return {
    db,
    dialect: 'postgres',
    async checkWritable() {
      const { rows } = await pool.query<Writability>(WRITABLE)
      // Whatever target_session_attrs allows: ready means a write would be taken now.
      if (rows[0].in_recovery || rows[0].read_only) throw new StorageFault('the database does not accept writes (a standby, or read-only)', 'READ_ONLY_SERVER')
    },
    poolUse: () => ({ max: poolSize, open: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount }),
    async close() {
      await db.destroy()
    },
  }
}

/**
 * When a transaction fails because its connection was lost, its ROLLBACK fails too; the error
 * that ended the transaction is the one its caller must see, not the ROLLBACK's. (The pool drops
 * a connection that can no longer be queried when it comes back.)
 */
class KeptErrorPostgresDialect extends PostgresDialect {
  override createDriver(): Driver {
    const driver = super.createDriver()
    const rollback = driver.rollbackTransaction.bind(driver)
    driver.rollbackTransaction = async (connection) => {
      await rollback(connection).catch(() => {})
    }
    return driver
  }
}
