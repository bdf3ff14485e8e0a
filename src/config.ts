import path from 'node:path'
import { decodeSecretsKey } from './secrets/secrets-key.ts'
import { parseSigningKey, type SigningKey } from './secrets/signing-key.ts'

/** Typed, validated configuration. Built once at start from the environment (README, Configuration). */
export interface Config {
  port: number
  host: string
  /** `undefined` selects the embedded SQLite file in `dataDir`; one host or several (`parsePostgresUrl`). */
  databaseUrl: string | undefined
  /** PostgreSQL: statement, lock, idle-in-transaction, connect, client-side query and readiness probe timeouts. */
  postgresTimeouts: PostgresTimeouts
  /** How long an Idempotency-Key's first request holds the key in this process (G004) before a retry may run (`ledger/idempotency.ts`). */
  idempotencyLeaseMs: number
  dataDir: string
  adminApiKey: string | undefined
  /** Bearer token a Prometheus scraper sends to `/metrics` (the admin key is taken there too); undefined = admin key only. */
  metricsToken: string | undefined
  /** SECRETS_KEY decoded (32 bytes); undefined selects the key file in `dataDir` (`secrets/secrets-key.ts`). */
  secretsKey: Buffer | undefined
  /** SIGNING_KEY parsed; undefined selects the key file in `dataDir` (`journal/signing-key.ts`). */
  signingKey: SigningKey | undefined
  /** How long a new journal entry may wait for a signed checkpoint to cover it. */
  checkpointIntervalMs: number
  corsOrigins: string[]
  sessionCookieName: string
  cookieSecure: boolean
  sessionLifetimeDays: number
  sessionIdleDays: number
  /** Ended webhook deliveries and events older than this are pruned (`operations/retention.ts`). */
  eventRetentionDays: number
  /** Idempotency keys older than this are pruned; at least 24. */
  idempotencyRetentionHours: number
  webhookAllowPrivate: boolean
  /** Seconds between webhook retries, one entry per retry; the last entry ends the schedule. */
  webhookRetrySchedule: number[]
  webhookTimeoutMs: number
  /** The most webhook attempts in flight at once to one receiving origin, over every instance (each origin's limit adapts below it). */
  webhookOriginConcurrency: number
  /** Where each origin's adaptive limit starts, and the least it falls to (the cap if lower). */
  webhookOriginMinConcurrency: number
  /** Webhook attempts in flight at once in this instance, over all origins. */
  webhookConcurrency: number
  /** Failed attempts in a row (no answer, 5xx, 429) that open an origin's circuit. */
  webhookCircuitFailures: number
  /** How long an origin's circuit first stays open; doubled on each reopening, up to 5 minutes. */
  webhookCircuitOpenMs: number
  /** Login and registration attempts per minute per client address and per username; 0 = off. */
  authRateLimit: number
  bodyLimitBytes: number
  /** Time a client has to send its whole request (headers and body); slow senders get 400 G000. */
  requestTimeoutMs: number
  logLevel: string
  trustProxy: boolean
  /** Most transfers committed together (`ledger/group-committer.ts`); undefined = the dialect's default. */
  groupCommitMaxBatch: number | undefined
  /** Milliseconds between runs of the job that writes holds' expiry (`ledger/hold-expiry.plugin.ts`); 0 = never (reads see it anyway). */
  holdExpiryIntervalMs: number
  /** Seconds over which the schedule runner spreads a backlog of due runs (`schedules/runner.ts`); 0 = flat out. */
  schedulePaceSeconds: number
}

export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    reason: string,
  ) {
    super(`invalid configuration: ${variable} ${reason}`)
  }
}

/** `DATABASE_URL` in libpq's form with one host or several, taken apart here as node-postgres reads only one. */

export interface PostgresHost {
  host: string
  port: number
}

/** libpq's values that make sense for a service that writes. */
export type TargetSessionAttrs = 'any' | 'read-write' | 'primary'

export interface PostgresUrl {
  hosts: PostgresHost[]
  targetSessionAttrs: TargetSessionAttrs
  /** `prepared_statements=off` sends queries unnamed, for a pooler in transaction mode. */
  preparedStatements: boolean
  /** A single-host URL for `host` that node-postgres reads: the same user, database and parameters. */
  urlFor(host: PostgresHost): string
}

const TARGETS = ['any', 'read-write', 'primary']
const REFUSED_TARGETS = ['read-only', 'standby', 'prefer-standby']
/** A host name, an IPv4 address, a bracketed IPv6 address, or a percent-encoded socket directory. */
const HOST = /^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._~%-]+)$/

/** Throws an Error saying what is wrong; several hosts default to `read-write`, one to `any`. */
export function parsePostgresUrl(raw: string): PostgresUrl {
  const match = /^(postgres(?:ql)?):\/\/(?:([^@/?#]*)@)?([^/?#]*)(.*)$/.exec(raw)
  if (!match) throw new Error('must start with postgres:// or postgresql://')
  const [, scheme, userinfo, hostList, rest] = match
  if (hostList === '') throw new Error('must name a host, e.g. postgres://user@db.example.com:5432/coffer')
  // Entries are never echoed: a password with an unencoded "/" or "@" would end up in one.
  const hosts = hostList.split(',').map((entry, index) => {
    const parts = /^(\[[^\]]*\]|[^:]*)(?::(\d*))?$/.exec(entry)
    if (!parts || parts[1] === '' || !HOST.test(parts[1]))
      throw new Error(`has a malformed host list: entry ${index + 1} is not host or host:port (hosts are separated by commas)`)
    const port = parts[2] === undefined || parts[2] === '' ? 5432 : Number(parts[2])
    if (!Number.isInteger(port) || port < 1 || port > 65535)
      throw new Error(`has a malformed host list: the port of entry ${index + 1} must be 1-65535`)
    return { host: parts[1], port }
  })
  const queryStart = rest.indexOf('?')
  const path = queryStart === -1 ? rest : rest.slice(0, queryStart)
  const params = new URLSearchParams(queryStart === -1 ? '' : rest.slice(queryStart + 1))
  const given = params.get('target_session_attrs')
  params.delete('target_session_attrs')
  if (given !== null && !TARGETS.includes(given)) {
    const why = REFUSED_TARGETS.includes(given)
      ? 'the service writes, so it needs read-write, primary or any'
      : `must be one of ${TARGETS.join(', ')}`
    throw new Error(`has target_session_attrs=${given}: ${why}`)
  }
  const targetSessionAttrs = (given ?? (hosts.length > 1 ? 'read-write' : 'any')) as TargetSessionAttrs
  const prepared = params.get('prepared_statements')
  params.delete('prepared_statements')
  if (prepared !== null && prepared !== 'on' && prepared !== 'off')
    throw new Error(`has prepared_statements=${prepared}: must be on or off`)
  const query = params.size > 0 ? `?${params.toString()}` : ''
  const urlFor = (host: PostgresHost) =>
    `${scheme}://${userinfo === undefined ? '' : `${userinfo}@`}${host.host}:${host.port}${path}${query}`
  for (const host of hosts) {
    try {
      new URL(urlFor(host))
    } catch {
      throw new Error('is not a valid URL')
    }
  }
  return { hosts, targetSessionAttrs, preparedStatements: prepared !== 'off', urlFor }
}

/** Bounded waits on PostgreSQL, in milliseconds; 0 leaves one to the server's setting, or unbounded (the `coffer` command). */
export interface PostgresTimeouts {
  /** Longest any statement may run (`statement_timeout`). */
  statementTimeoutMs: number
  /** Longest a statement may wait for a lock (`lock_timeout`): one stuck lock cannot stall the batch queue. */
  lockTimeoutMs: number
  /** A session idle inside a transaction this long is ended by the server (`idle_in_transaction_session_timeout`). */
  idleInTransactionTimeoutMs: number
  /** Longest to wait for a new connection, and for a free one from the pool. */
  connectTimeoutMs: number
  /** Longest wait for any answer, COMMIT included (a frozen server runs no `statement_timeout`). */
  queryTimeoutMs: number
  /** Longest the readiness probe waits for its committing write (`/readyz`). */
  readyProbeTimeoutMs: number
}

export const DEFAULT_POSTGRES_TIMEOUTS: PostgresTimeouts = {
  statementTimeoutMs: 15_000,
  lockTimeoutMs: 5_000,
  idleInTransactionTimeoutMs: 30_000,
  connectTimeoutMs: 5_000,
  // Past statement_timeout, so the server's own timeout, a clean error, normally ends a statement first.
  queryTimeoutMs: 20_000,
  readyProbeTimeoutMs: 2_000,
}

/** How long a key's first request holds it (`Config.idempotencyLeaseMs`): past the bounds of a request's storage calls. */
export const DEFAULT_IDEMPOTENCY_LEASE_MS = 30_000

type Env = Record<string, string | undefined>

function integer(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name]
  if (raw === undefined || raw === '') return fallback
  if (!/^\d+$/.test(raw)) throw new ConfigError(name, `must be a whole number, got "${raw}"`)
  const value = Number(raw)
  if (value < min || value > max) throw new ConfigError(name, `must be between ${min} and ${max}, got ${value}`)
  return value
}

function boolean(env: Env, name: string, fallback: boolean): boolean {
  const raw = env[name]
  if (raw === undefined || raw === '') return fallback
  if (/^(true|1|yes)$/i.test(raw)) return true
  if (/^(false|0|no)$/i.test(raw)) return false
  throw new ConfigError(name, `must be true or false, got "${raw}"`)
}

function oneOf(env: Env, name: string, fallback: string, allowed: string[]): string {
  const raw = env[name]
  if (raw === undefined || raw === '') return fallback
  if (!allowed.includes(raw)) throw new ConfigError(name, `must be one of ${allowed.join(', ')}, got "${raw}"`)
  return raw
}

function origins(env: Env, name: string): string[] {
  const raw = env[name]
  if (raw === undefined || raw.trim() === '') return []
  return raw.split(',').map((entry) => {
    const origin = entry.trim()
    let url: URL
    try {
      url = new URL(origin)
    } catch {
      throw new ConfigError(name, `contains "${origin}", which is not an origin like https://app.example.com`)
    }
    if (!['http:', 'https:'].includes(url.protocol) || url.origin !== origin.replace(/\/$/, '')) {
      throw new ConfigError(name, `contains "${origin}", which is not an origin like https://app.example.com`)
    }
    return url.origin
  })
}

function databaseUrl(env: Env, name: string): string | undefined {
  const raw = env[name]
  if (raw === undefined || raw === '') return undefined
  try {
    parsePostgresUrl(raw)
  } catch (error) {
    throw new ConfigError(name, (error as Error).message)
  }
  return raw
}

function schedule(env: Env, name: string, fallback: number[]): number[] {
  const raw = env[name]
  if (raw === undefined || raw === '') return fallback
  const parts = raw.split(',').map((part) => part.trim())
  if (parts.length === 0 || parts.some((part) => !/^\d+(\.\d+)?$/.test(part))) {
    throw new ConfigError(name, `must be a comma-separated list of seconds, got "${raw}"`)
  }
  return parts.map(Number)
}

/** Retries for about a day: 5 s, 30 s, 2 min, 10 min, 30 min, 1 h, 2 h, 4 h, 8 h, 8 h. */
export const DEFAULT_WEBHOOK_SCHEDULE = [5, 30, 120, 600, 1800, 3600, 7200, 14400, 28800, 28800]

/** Reads and validates the environment; throws ConfigError naming the first bad variable. */
export function loadConfig(env: Env = process.env): Config {
  const adminApiKey = env.ADMIN_API_KEY
  if (adminApiKey !== undefined && adminApiKey !== '' && adminApiKey.length < 24) {
    throw new ConfigError('ADMIN_API_KEY', 'must be at least 24 characters long')
  }
  const metricsToken = env.METRICS_TOKEN || undefined
  if (metricsToken !== undefined && (metricsToken.length < 24 || /\s/.test(metricsToken))) {
    throw new ConfigError('METRICS_TOKEN', 'must be at least 24 characters long, without spaces')
  }
  const cookieName = env.SESSION_COOKIE_NAME || 'coffer_session'
  if (!/^[A-Za-z0-9_-]{1,64}$/.test(cookieName)) {
    throw new ConfigError('SESSION_COOKIE_NAME', 'must be 1-64 letters, digits, "_" or "-"')
  }
  const secretsKey = env.SECRETS_KEY ? decodeSecretsKey(env.SECRETS_KEY) : undefined
  if (env.SECRETS_KEY && !secretsKey)
    throw new ConfigError('SECRETS_KEY', 'must be 32 random bytes, base64 (44 characters) or hex (64), e.g. from `openssl rand -base64 32`')
  const signingKey = env.SIGNING_KEY ? parseSigningKey(env.SIGNING_KEY) : undefined
  if (env.SIGNING_KEY && !signingKey)
    throw new ConfigError(
      'SIGNING_KEY',
      'must be an Ed25519 private key: its 32-byte seed as base64 (44 characters) or hex (64), ' +
        'e.g. from `openssl rand -base64 32`, or a PKCS#8 PEM from `openssl genpkey -algorithm ed25519`',
    )
  const host = env.HOST || '0.0.0.0'
  if (/\s/.test(host)) throw new ConfigError('HOST', 'must be a host name or IP address')
  return {
    port: integer(env, 'PORT', 8080, 0, 65535),
    host,
    databaseUrl: databaseUrl(env, 'DATABASE_URL'),
    postgresTimeouts: {
      statementTimeoutMs: integer(env, 'PG_STATEMENT_TIMEOUT_MS', DEFAULT_POSTGRES_TIMEOUTS.statementTimeoutMs, 1, 86_400_000),
      lockTimeoutMs: integer(env, 'PG_LOCK_TIMEOUT_MS', DEFAULT_POSTGRES_TIMEOUTS.lockTimeoutMs, 1, 86_400_000),
      idleInTransactionTimeoutMs: integer(
        env,
        'PG_IDLE_IN_TRANSACTION_TIMEOUT_MS',
        DEFAULT_POSTGRES_TIMEOUTS.idleInTransactionTimeoutMs,
        1,
        86_400_000,
      ),
      connectTimeoutMs: integer(env, 'PG_CONNECT_TIMEOUT_MS', DEFAULT_POSTGRES_TIMEOUTS.connectTimeoutMs, 1, 600_000),
      queryTimeoutMs: integer(env, 'PG_QUERY_TIMEOUT_MS', DEFAULT_POSTGRES_TIMEOUTS.queryTimeoutMs, 1, 86_400_000),
      readyProbeTimeoutMs: integer(env, 'PG_READY_PROBE_TIMEOUT_MS', DEFAULT_POSTGRES_TIMEOUTS.readyProbeTimeoutMs, 1, 600_000),
    },
    idempotencyLeaseMs: integer(env, 'IDEMPOTENCY_LEASE_MS', DEFAULT_IDEMPOTENCY_LEASE_MS, 1, 3_600_000),
    dataDir: path.resolve(env.DATA_DIR || './data'),
    adminApiKey: adminApiKey || undefined,
    metricsToken,
    secretsKey,
    signingKey,
    checkpointIntervalMs: integer(env, 'CHECKPOINT_INTERVAL_MS', 5_000, 100, 10_000),
    corsOrigins: origins(env, 'CORS_ORIGINS'),
    sessionCookieName: cookieName,
    cookieSecure: boolean(env, 'COOKIE_SECURE', false),
    sessionLifetimeDays: integer(env, 'SESSION_LIFETIME_DAYS', 30, 1, 3650),
    sessionIdleDays: integer(env, 'SESSION_IDLE_DAYS', 7, 0, 3650),
    eventRetentionDays: integer(env, 'EVENT_RETENTION_DAYS', 30, 1, 3650),
    idempotencyRetentionHours: integer(env, 'IDEMPOTENCY_RETENTION_HOURS', 168, 24, 87_600),
    webhookAllowPrivate: boolean(env, 'WEBHOOK_ALLOW_PRIVATE', false),
    webhookRetrySchedule: schedule(env, 'WEBHOOK_RETRY_SCHEDULE', DEFAULT_WEBHOOK_SCHEDULE),
    webhookTimeoutMs: integer(env, 'WEBHOOK_TIMEOUT_MS', 10_000, 100, 60_000),
    webhookOriginConcurrency: integer(env, 'WEBHOOK_ORIGIN_CONCURRENCY', 128, 1, 10_000),
    webhookOriginMinConcurrency: integer(env, 'WEBHOOK_ORIGIN_MIN_CONCURRENCY', 4, 1, 10_000),
    webhookConcurrency: integer(env, 'WEBHOOK_CONCURRENCY', 256, 1, 10_000),
    webhookCircuitFailures: integer(env, 'WEBHOOK_CIRCUIT_FAILURES', 5, 1, 1_000),
    webhookCircuitOpenMs: integer(env, 'WEBHOOK_CIRCUIT_OPEN_MS', 5_000, 100, 300_000),
    authRateLimit: integer(env, 'AUTH_RATE_LIMIT', 20, 0, 1_000_000),
    bodyLimitBytes: integer(env, 'BODY_LIMIT_BYTES', 64 * 1024, 1024, 10 * 1024 * 1024),
    requestTimeoutMs: integer(env, 'REQUEST_TIMEOUT_MS', 30_000, 100, 600_000),
    logLevel: oneOf(env, 'LOG_LEVEL', 'info', ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']),
    trustProxy: boolean(env, 'TRUST_PROXY', false),
    groupCommitMaxBatch: env.GROUP_COMMIT_MAX_BATCH ? integer(env, 'GROUP_COMMIT_MAX_BATCH', 0, 1, 10_000) : undefined,
    holdExpiryIntervalMs: integer(env, 'HOLD_EXPIRY_INTERVAL_MS', 1_000, 0, 3_600_000),
    schedulePaceSeconds: integer(env, 'SCHEDULE_PACE_SECONDS', 30, 0, 50),
  }
}
