import { Kysely, PostgresDialect, type DialectAdapter, type Driver, type PostgresDialectConfig } from 'kysely'
import pg from 'pg'
import { DEFAULT_POSTGRES_TIMEOUTS, parsePostgresUrl, type PostgresHost, type PostgresTimeouts, type PostgresUrl } from '../config.ts'
import type { Database } from './database.types.ts'
import { isStorageUnavailable, StorageFault } from './faults.ts'
import { isStaleStatement } from './retry.ts'
import { attachStorageState, StorageState } from './storage-state.ts'
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

/** "cached plan must not change result type" (with that message: `isStaleStatement`). */
const RESULT_TYPE_CHANGED = '0A000'

/**
 * Chooses the host for new connections as libpq does: the first, in order, that fits
 * `target_session_attrs`; kept until a connection to it fails or cannot write (after a failover).
 */
class HostSelector {
  readonly #url: PostgresUrl
  readonly #connectTimeoutMs: number
  #chosen: PostgresHost | undefined
  #looking: Promise<PostgresHost> | undefined

  constructor(url: PostgresUrl, connectTimeoutMs: number) {
    this.#url = url
    this.#connectTimeoutMs = connectTimeoutMs
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
      // Its query bounded too: a silent host must not hold every new connection's look.
      const probe = new pg.Client({
        connectionString: this.#url.urlFor(host),
        connectionTimeoutMillis: this.#connectTimeoutMs,
        query_timeout: this.#connectTimeoutMs,
      })
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
        const ending = setTimeout(() => probe.connection.stream.destroy(), this.#connectTimeoutMs)
        void probe
          .end()
          .catch(() => {})
          .finally(() => clearTimeout(ending))
      }
    }
    const wanted = this.checksWrites ? 'accepts writes' : 'accepts connections'
    throw new StorageFault(`no host of DATABASE_URL ${wanted}`, 'NO_USABLE_HOST', { cause: lastError })
  }
}

/**
 * Named statements one connection keeps at most: planning costs more than running the small hot
 * queries, and the bound keeps the server's memory for them small whatever texts clients cause
 * (`docs/decisions.md#postgresql-prepared-statements`).
 */
export const MAX_PREPARED_STATEMENTS = 100

/** The named statements of one connection by SQL text, least recently used first and closed past the bound. */
class PreparedStatements {
  readonly #names = new Map<string, string>()
  readonly #connection: pg.Connection
  #made = 0
  #generation: number

  constructor(connection: pg.Connection, generation: number) {
    this.#connection = connection
    this.#generation = generation
  }

  /** The name to run `text` under; the statements are all dropped first when the schema changed since. */
  nameFor(text: string, generation: number): string {
    if (generation !== this.#generation) {
      this.dropAll()
      this.#generation = generation
    }
    let name = this.#names.get(text)
    if (name !== undefined) {
      this.#names.delete(text)
    } else {
      if (this.#names.size >= MAX_PREPARED_STATEMENTS) this.drop(this.#names.keys().next().value as string)
      name = `coffer_${++this.#made}`
    }
    this.#names.set(text, name)
    return name
  }

  dropAll(): void {
    for (const text of [...this.#names.keys()]) this.drop(text)
  }

  /** Closes the statement of `text` on the server; its next run prepares it again under a new name. */
  drop(text: string): void {
    const name = this.#names.get(text)
    if (name === undefined) return
    this.#names.delete(text)
    // node-postgres's own per-connection cache (`parsedStatements`, untyped) must forget it too.
    this.#connection.close({ type: 'S', name }, false)
    delete (this.#connection as unknown as { parsedStatements: Record<string, string> }).parsedStatements[name]
  }
}

/** Characters JSON escapes differently from an array literal: controls (`\n` would read as `n`) and surrogates (`\udXXX`). */
// eslint-disable-next-line no-control-regex -- control characters are what it looks for
const JSON_ONLY_ESCAPES = /[\u0000-\u001f\ud800-\udfff]/

/**
 * `values` as PostgreSQL's array text (`{…}`) from one `JSON.stringify`, which agrees with it for
 * plain strings, numbers, booleans and nulls; anything else is left to node-postgres's slower escaping.
 */
export function arrayLiteral(values: unknown[]): unknown {
  for (const value of values) {
    if (value === null || value === undefined || typeof value === 'boolean') continue
    if (typeof value === 'number' ? Number.isFinite(value) : typeof value === 'string' && !JSON_ONLY_ESCAPES.test(value)) continue
    return values
  }
  const json = JSON.stringify(values)
  return `{${json.slice(1, -1)}}`
}

/** Raised when a migration changed the schema under the named statements: every connection then drops all of its own. */
interface SchemaGeneration {
  value: number
}

/** The smallest write whose COMMIT waits for a synchronous standby as a transfer's does (a WAL message, no table). */
const PROBE_WRITE = `select pg_logical_emit_message(true, 'coffer-ready-probe', '')`

/**
 * The pool's clients: named statements, host selection, a bound on every statement's answer
 * (`queryTimeoutMs`, 0 = none), and errors that never crash the process.
 */
function clientClass(
  selector: HostSelector,
  schema: SchemaGeneration,
  prepared: boolean,
  queryTimeoutMs: number,
  state: StorageState,
): typeof pg.Client {
  return class CofferClient extends pg.Client implements ProbingClient {
    #host: PostgresHost | undefined
    #lostWith: unknown
    readonly #statements: PreparedStatements
    /** Of the last ReadyForQuery: I idle, T in a transaction block, E in a failed one. */
    #transactionStatus = ''

    constructor(config?: string | pg.ClientConfig) {
      super(config)
      this.#statements = new PreparedStatements(this.connection, schema.value)
      this.connection.on('readyForQuery', (message: { status: string }) => {
        if (message.status === 'I' && (this.#transactionStatus === 'T' || this.#transactionStatus === 'E')) state.transactionsEnded++
        this.#transactionStatus = message.status
      })
      // A connection lost while checked out must not end the process: its next query fails instead.
      this.on('error', (error) => {
        this.#lostWith ??= error
        state.readyUntil = 0
        if (this.#host) selector.forget(this.#host)
      })
    }

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
        // Not awaited: a connection that never opened may never report its end.
        selector.forget(host)
        void this.end().catch(() => {})
        throw error
      }
    }

    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    override query(config: any, values?: any, callback?: any): any {
      if (typeof config === 'string' && Array.isArray(values) && values.length > 0 && callback === undefined)
        return this.#runBounded(config, values)
      if (typeof values === 'function') [values, callback] = [undefined, values]
      const disarm = this.#arm(queryTimeoutMs)
      if (typeof callback === 'function') {
        const answer = callback as (error: Error | null, result?: unknown) => void
        return super.query(config, values, (error: Error | null, result: unknown) => {
          disarm?.()
          answer(error, result)
        })
      }
      const result: unknown = super.query(config, values)
      if (typeof (result as Promise<unknown> | undefined)?.then !== 'function') {
        // A cursor paces itself.
        disarm?.()
        return result
      }
      return (result as Promise<unknown>).then(
        (rows) => {
          disarm?.()
          return rows
        },
        (error: Error) => {
          disarm?.()
          throw this.#failed(error)
        },
      )
    }

    async probeWrite(timeoutMs: number): Promise<void> {
      const disarm = this.#arm(timeoutMs)
      try {
        const { rows } = await super.query<Writability>(WRITABLE)
        if (rows[0].in_recovery || rows[0].read_only)
          throw new StorageFault('the database does not accept writes (a standby, or read-only)', 'READ_ONLY_SERVER')
        await super.query(PROBE_WRITE)
      } catch (error) {
        throw this.#failed(error as Error)
      } finally {
        disarm?.()
      }
    }

    /** Bounds one answer: past it the connection is destroyed, so a silent server holds neither request nor pool slot. */
    #arm(timeoutMs: number): (() => void) | undefined {
      if (timeoutMs <= 0) return undefined
      const timer = setTimeout(() => {
        const fault = new StorageFault(`PostgreSQL did not answer within ${timeoutMs} ms; the connection was closed`, 'QUERY_TIMEOUT')
        if (this.#host) selector.forget(this.#host)
        this.connection.stream.destroy(fault)
      }, timeoutMs)
      return () => clearTimeout(timer)
    }

    async #runBounded(text: string, given: unknown[]): Promise<unknown> {
      const disarm = this.#arm(queryTimeoutMs)
      try {
        return await (prepared ? this.#runNamed(text, given) : this.#runUnnamed(text, given))
      } finally {
        disarm?.()
      }
    }

    /**
     * Runs `text` as a named statement. A stale one is dropped and, outside a transaction block, run
     * once more (it failed before running); inside one the caller's `withRetries` runs it again.
     */
    async #runNamed(text: string, given: unknown[]): Promise<unknown> {
      const outsideBlock = this.#transactionStatus === 'I'
      const values = given.map((value) => (Array.isArray(value) ? arrayLiteral(value) : value))
      try {
        return await super.query({ name: this.#statements.nameFor(text, schema.value), text, values })
      } catch (error) {
        if (!isStaleStatement(error)) throw this.#failed(error as Error)
        if ((error as { code?: string }).code === RESULT_TYPE_CHANGED) {
          schema.value += 1
          this.#statements.drop(text)
        } else {
          // The session lost it, so likely all (DEALLOCATE ALL, a pooler): fail once, not once per statement.
          this.#statements.dropAll()
        }
        if (!outsideBlock) throw this.#failed(error as Error)
      }
      try {
        return await super.query({ name: this.#statements.nameFor(text, schema.value), text, values })
      } catch (error) {
        throw this.#failed(error as Error)
      }
    }

    async #runUnnamed(text: string, given: unknown[]): Promise<unknown> {
      const values = given.map((value) => (Array.isArray(value) ? arrayLiteral(value) : value))
      try {
        return await super.query({ text, values })
      } catch (error) {
        throw this.#failed(error as Error)
      }
    }

    /** A query's error, caused by what broke the connection; a server that stopped taking writes ends it. */
    #failed(error: Error & { code?: string }): Error {
      // /readyz must not answer from a good probe while requests are failing on the storage.
      if (isStorageUnavailable(error)) state.readyUntil = 0
      if (this.#lostWith !== undefined && this.#lostWith !== error && error.cause === undefined) error.cause = this.#lostWith
      if (error.code === READ_ONLY_TRANSACTION && this.#host) {
        selector.forget(this.#host)
        void this.end().catch(() => {})
      }
      return error
    }
  }
}

interface ProbingClient {
  /** Whether the server commits a write within `timeoutMs`; past it the connection is destroyed. */
  probeWrite(timeoutMs: number): Promise<void>
}

/** How long a good readiness probe is believed, so /readyz stays cheap. */
const READY_PROBE_KEPT_MS = 1_000

/** PostgreSQL from a `DATABASE_URL` of one host or several, with a pool of `poolSize` and bounded waits. */
export function openPostgres(url: string, poolSize: number, timeouts: Partial<PostgresTimeouts> = {}): Database {
  const parsed = parsePostgresUrl(url)
  const limits = { ...DEFAULT_POSTGRES_TIMEOUTS, ...timeouts }
  const selector = new HostSelector(parsed, limits.connectTimeoutMs)
  const state = new StorageState()
  const pool = new pg.Pool({
    connectionString: parsed.urlFor(parsed.hosts[0]),
    max: poolSize,
    Client: clientClass(selector, { value: 0 }, parsed.preparedStatements, limits.queryTimeoutMs, state),
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
  const db = new Kysely<DB>({ dialect: new KeptErrorPostgresDialect({ pool }, state) })
  // A failed probe is not kept, so recovery shows at once.
  let probing: Promise<void> | undefined
  return {
    db,
    dialect: 'postgres',
    checkWritable() {
      if (Date.now() < state.readyUntil) return Promise.resolve()
      probing ??= probeWrite(pool, limits.readyProbeTimeoutMs)
        .then(() => {
          state.readyUntil = Date.now() + READY_PROBE_KEPT_MS
        })
        .finally(() => (probing = undefined))
      return probing
    },
    poolUse: () => ({ max: poolSize, open: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount }),
    postgresClient: () => pool.connect(),
    async close() {
      await db.destroy()
    },
  }
}

/** Whether a free pool connection commits a write within `timeoutMs` in all. */
async function probeWrite(pool: pg.Pool, timeoutMs: number): Promise<void> {
  const started = Date.now()
  const connecting = pool.connect()
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new StorageFault(`no PostgreSQL connection free within ${timeoutMs} ms`, 'CONNECT_TIMEOUT')), timeoutMs)
  })
  let client: pg.PoolClient
  try {
    client = await Promise.race([connecting, late])
  } catch (error) {
    connecting.then(
      (came) => came.release(),
      () => {},
    )
    throw error
  } finally {
    clearTimeout(timer)
  }
  try {
    await (client as unknown as ProbingClient).probeWrite(Math.max(1, timeoutMs - (Date.now() - started)))
    client.release()
  } catch (error) {
    // Not reused: it timed out, or its server does not take writes.
    client.release(true)
    throw error
  }
}

/** A lost connection fails the ROLLBACK too; the caller sees the error that ended the transaction, not that one. */
class KeptErrorPostgresDialect extends PostgresDialect {
  readonly #state: StorageState

  constructor(config: PostgresDialectConfig, state: StorageState) {
    super(config)
    this.#state = state
  }

  /** Shared by the database and its transactions, so it carries the storage state. */
  override createAdapter(): DialectAdapter {
    const adapter = super.createAdapter()
    attachStorageState(adapter, this.#state)
    return adapter
  }

  override createDriver(): Driver {
    const driver = super.createDriver()
    const rollback = driver.rollbackTransaction.bind(driver)
    driver.rollbackTransaction = async (connection) => {
      await rollback(connection).catch(() => {})
    }
    return driver
  }
}
