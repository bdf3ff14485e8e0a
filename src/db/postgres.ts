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
        // Ended politely, and destroyed if a silent server never lets it end.
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
 * Kysely sends every query unnamed, so PostgreSQL would parse and plan each one on every call,
 * and planning costs more than running the small queries of a transfer or a history page. A
 * named statement is parsed once per connection and, after PostgreSQL's first five custom plans,
 * usually planned once (a generic plan); `docs/decisions.md#postgresql-prepared-statements` has
 * the decisions.
 * Queries without parameters (begin, commit, savepoints) stay on the simple protocol.
 */

/**
 * Named statements one connection keeps at most. The hot paths use about ten texts; a statement
 * costs the server 40-200 KB of memory, so 100 per connection bound it to a few MB whatever texts
 * clients cause (filter combinations, page sizes and offsets written into history's text, `in (…)`
 * lists of different lengths).
 */
export const MAX_PREPARED_STATEMENTS = 100

/**
 * The named statements of one connection, by SQL text, least recently used first. Past the bound
 * the least recently used is closed on the server (a protocol Close written ahead of the next
 * statement, no round trip of its own) and forgotten by node-postgres, so both sides stay bounded.
 * Names are never reused on a connection.
 */
class PreparedStatements {
  readonly #names = new Map<string, string>()
  readonly #connection: pg.Connection
  #made = 0
  /** The statements' schema generation (`SchemaGeneration`) when they were prepared. */
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
      // Moved to the most recently used end.
      this.#names.delete(text)
    } else {
      if (this.#names.size >= MAX_PREPARED_STATEMENTS) this.drop(this.#names.keys().next().value as string)
      name = `coffer_${++this.#made}`
    }
    this.#names.set(text, name)
    return name
  }

  /** Closes every statement (`drop`). */
  dropAll(): void {
    for (const text of [...this.#names.keys()]) this.drop(text)
  }

  /** Closes the statement of `text` on the server; its next run prepares it again under a new name. */
  drop(text: string): void {
    const name = this.#names.get(text)
    if (name === undefined) return
    this.#names.delete(text)
    // Written now, so it reaches the server after every statement already sent and before the
    // next; a connection that is gone writes nothing. node-postgres keeps the texts it has parsed
    // per connection (`parsedStatements`, not part of its typed API) and would otherwise keep them
    // all; `test/db/postgres-statements.test.ts` checks that both sides stay bounded.
    this.#connection.close({ type: 'S', name }, false)
    delete (this.#connection as unknown as { parsedStatements: Record<string, string> }).parsedStatements[name]
  }
}

/** Characters JSON escapes differently from an array literal: controls (`\n` would read as `n`) and surrogates (`\udXXX`). */
// eslint-disable-next-line no-control-regex -- control characters are what it looks for
const JSON_ONLY_ESCAPES = /[\u0000-\u001f\ud800-\udfff]/

/**
 * `values` as PostgreSQL's text for an array (`{…}`), as node-postgres would send it, built with
 * one `JSON.stringify`: for strings, numbers, booleans and nulls the two notations agree once the
 * brackets become braces (each string in double quotes with `"` and `\` escaped by a backslash; an
 * unquoted `null` is NULL to PostgreSQL, whatever its case). Anything else (a string with a control
 * character or a surrogate, a non-finite number, an object, a nested array) goes to node-postgres.
 *
 * A batch of transfers sends every row as such arrays (`unnest` in `db/dialect.ts`), where
 * node-postgres's element-by-element escaping was a noticeable share of the service's CPU.
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

/**
 * A count shared by the connections of one pool, raised when one of them finds that the schema
 * changed under its named statements ("cached plan must not change result type": a migration,
 * perhaps by another instance, changed the columns of a `select *`). Every connection then drops
 * all its named statements before its next one, instead of each failing once per statement.
 */
interface SchemaGeneration {
  value: number
}

/**
 * The smallest write that commits as a transfer does: a transactional message in the WAL (no
 * table; logical decoding sees it under this prefix), so its COMMIT waits for a synchronous
 * standby. An id alone (`txid_current()`) writes no WAL and commits without waiting.
 */
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
    /** What broke the connection, reported as the cause of the next query's failure. */
    #lostWith: unknown
    readonly #statements: PreparedStatements
    /** The transaction status of the server's last ReadyForQuery: I idle, T in a transaction block, E in a failed one. */
    #transactionStatus = ''

    constructor(config?: string | pg.ClientConfig) {
      super(config)
      this.#statements = new PreparedStatements(this.connection, schema.value)
      this.connection.on('readyForQuery', (message: { status: string }) => {
        if (message.status === 'I' && (this.#transactionStatus === 'T' || this.#transactionStatus === 'E')) state.transactionsEnded++
        this.#transactionStatus = message.status
      })
      // A connection lost while checked out (a restart, a failover) emits 'error' with no query to
      // fail; the pool listens only while the client is idle. Without this listener that error
      // would end the process. The next query on this client fails instead, and the pool drops
      // the client when it comes back (it is no longer queryable).
      this.on('error', (error) => {
        this.#lostWith ??= error
        state.readyUntil = 0
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
        // A submittable (a cursor) paces itself: not bounded here.
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
        // Whatever target_session_attrs allows: ready means a write would be taken now.
        if (rows[0].in_recovery || rows[0].read_only)
          throw new StorageFault('the database does not accept writes (a standby, or read-only)', 'READ_ONLY_SERVER')
        await super.query(PROBE_WRITE)
      } catch (error) {
        throw this.#failed(error as Error)
      } finally {
        disarm?.()
      }
    }

    /**
     * Starts the bound on one statement's answer: past it the connection is destroyed, which fails
     * the statement (and any queued behind it) as a storage fault, and the pool drops the client
     * when it comes back, so a silent server holds neither the request nor the pool slot. Returns
     * the function that stops it once the answer came.
     */
    #arm(timeoutMs: number): (() => void) | undefined {
      if (timeoutMs <= 0) return undefined
      const timer = setTimeout(() => {
        const fault = new StorageFault(`PostgreSQL did not answer within ${timeoutMs} ms; the connection was closed`, 'QUERY_TIMEOUT')
        // A silent host is forgotten, so the next connection looks again (a multi-host URL finds the promoted standby).
        if (this.#host) selector.forget(this.#host)
        this.connection.stream.destroy(fault)
      }, timeoutMs)
      return () => clearTimeout(timer)
    }

    /** A statement with values, named or not (`prepared`), within the bound on its answer. */
    async #runBounded(text: string, given: unknown[]): Promise<unknown> {
      const disarm = this.#arm(queryTimeoutMs)
      try {
        return await (prepared ? this.#runNamed(text, given) : this.#runUnnamed(text, given))
      } finally {
        disarm?.()
      }
    }

    /**
     * Runs `text` as this connection's named statement for it. When the server can no longer run
     * that statement (`isStaleStatement`) it is dropped (with all the others when the server lost
     * it), and run once more, prepared anew, if it ran outside a transaction block: it failed
     * before running, so it changed nothing. Inside a block the error goes to the caller, whose
     * transaction `withRetries` runs again.
     */
    async #runNamed(text: string, given: unknown[]): Promise<unknown> {
      // Read before sending: queries of one connection are sent one after another (Kysely, the pool).
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
          // The server session lost this statement, so most likely all of them (DEALLOCATE ALL, a
          // pooler that switched server sessions): all are prepared anew, so that a transaction
          // fails once on this connection rather than once per statement it runs, which could
          // outlast `withRetries`. Closing a statement the server does not have is no error.
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

    /** Runs `text` unnamed (`prepared_statements=off`): parsed and planned on every run, as behind a pooler that mixes sessions. */
    async #runUnnamed(text: string, given: unknown[]): Promise<unknown> {
      const values = given.map((value) => (Array.isArray(value) ? arrayLiteral(value) : value))
      try {
        return await super.query({ text, values })
      } catch (error) {
        throw this.#failed(error as Error)
      }
    }

    /** `error` of a query, with what broke the connection as its cause; a server that stopped taking writes ends it. */
    #failed(error: Error & { code?: string }): Error {
      // /readyz must not answer from a good probe while requests are failing on the storage.
      if (isStorageUnavailable(error)) state.readyUntil = 0
      if (this.#lostWith !== undefined && this.#lostWith !== error && error.cause === undefined) error.cause = this.#lostWith
      if (error.code === READ_ONLY_TRANSACTION && this.#host) {
        // The server stopped taking writes (demoted after a failover): this connection is done.
        selector.forget(this.#host)
        void this.end().catch(() => {})
      }
      return error
    }
  }
}

/** The readiness probe of the pool's clients (`clientClass`). */
interface ProbingClient {
  /**
   * Whether this connection's server takes a write and commits it within `timeoutMs` (a primary
   * waiting for a synchronous standby that has gone does not); past it the connection is destroyed.
   */
  probeWrite(timeoutMs: number): Promise<void>
}

/** How long a good readiness probe is believed, so that /readyz stays cheap however often it is asked. */
const READY_PROBE_KEPT_MS = 1_000

/**
 * PostgreSQL from a `DATABASE_URL` of one host or several (`parsePostgresUrl`), with a pool of
 * `poolSize` connections and bounded waits (`timeouts`).
 */
export function openPostgres(url: string, poolSize: number, timeouts: Partial<PostgresTimeouts> = {}): Database {
  const parsed = parsePostgresUrl(url)
  const limits = { ...DEFAULT_POSTGRES_TIMEOUTS, ...timeouts }
  const selector = new HostSelector(parsed, limits.connectTimeoutMs)
  // Counts the transaction blocks the pool's connections end: a hint for `commit-state.ts` that
  // this process has likely committed something since it last looked.
  const state = new StorageState()
  const pool = new pg.Pool({
    connectionString: parsed.urlFor(parsed.hosts[0]),
    max: poolSize,
    Client: clientClass(selector, { value: 0 }, parsed.preparedStatements, limits.queryTimeoutMs, state),
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
  const db = new Kysely<DB>({ dialect: new KeptErrorPostgresDialect({ pool }, state) })
  // A good probe is kept briefly; a failed one is not, so recovery shows at once. Callers at the same time share one probe.
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
    async close() {
      await db.destroy()
    },
  }
}

/**
 * Whether a write commits now, within `timeoutMs` in all: a free connection from the pool (a pool
 * full of connections waiting on a silent server is not ready), then a committing statement on it.
 */
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
    // A connection that comes after all goes straight back.
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

/**
 * When a transaction fails because its connection was lost, its ROLLBACK fails too; the error
 * that ended the transaction is the one its caller must see, not the ROLLBACK's. (The pool drops
 * a connection that can no longer be queried when it comes back.)
 */
class KeptErrorPostgresDialect extends PostgresDialect {
  readonly #state: StorageState

  constructor(config: PostgresDialectConfig, state: StorageState) {
    super(config)
    this.#state = state
  }

  /** The adapter is shared by the database and its transactions: it carries the storage state. */
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
