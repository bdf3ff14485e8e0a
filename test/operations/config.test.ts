import assert from 'node:assert/strict'
import path from 'node:path'
import { describe, it } from 'node:test'
import { ConfigError, DEFAULT_WEBHOOK_SCHEDULE, loadConfig } from '../../src/config.ts'

/** Asserts that loading `env` fails with a ConfigError naming `variable` in its message. */
function expectBad(env: Record<string, string>, variable: string): void {
  assert.throws(
    () => loadConfig(env),
    (error: unknown) => {
      assert.ok(error instanceof ConfigError, `expected a ConfigError, got ${String(error)}`)
      assert.equal(error.variable, variable)
      assert.match(error.message, new RegExp(`\\b${variable}\\b`))
      return true
    },
  )
}

describe('loadConfig', () => {
  it('starts with the documented defaults on an empty environment', () => {
    const config = loadConfig({})
    assert.equal(config.port, 8080)
    assert.equal(config.host, '0.0.0.0')
    assert.equal(config.databaseUrl, undefined)
    assert.equal(config.dataDir, path.resolve('./data'))
    assert.equal(config.adminApiKey, undefined)
    assert.deepEqual(config.corsOrigins, [])
    assert.equal(config.sessionCookieName, 'coffer_session')
    assert.equal(config.cookieSecure, false)
    assert.equal(config.sessionLifetimeDays, 30)
    assert.equal(config.webhookAllowPrivate, false)
    assert.deepEqual(config.webhookRetrySchedule, DEFAULT_WEBHOOK_SCHEDULE)
    assert.equal(config.webhookTimeoutMs, 10_000)
    assert.equal(config.webhookOriginConcurrency, 128)
    assert.equal(config.webhookOriginMinConcurrency, 4)
    assert.equal(config.webhookConcurrency, 256)
    assert.equal(config.webhookCircuitFailures, 5)
    assert.equal(config.webhookCircuitOpenMs, 5_000)
    assert.ok(config.authRateLimit > 0, 'login is rate limited unless turned off')
    assert.equal(config.logLevel, 'info')
  })

  it('treats empty variables as unset', () => {
    const config = loadConfig({
      PORT: '',
      DATABASE_URL: '',
      ADMIN_API_KEY: '',
      CORS_ORIGINS: '',
      LOG_LEVEL: '',
      AUTH_RATE_LIMIT: '',
      COOKIE_SECURE: '',
      HOST: '',
      SESSION_COOKIE_NAME: '',
    })
    assert.equal(config.port, 8080)
    assert.equal(config.databaseUrl, undefined)
    assert.equal(config.adminApiKey, undefined)
    assert.deepEqual(config.corsOrigins, [])
    assert.equal(config.logLevel, 'info')
    assert.equal(config.cookieSecure, false)
    assert.equal(config.host, '0.0.0.0')
    assert.equal(config.sessionCookieName, 'coffer_session')
  })

  it('reads every documented variable', () => {
    const config = loadConfig({
      PORT: '9090',
      HOST: '127.0.0.1',
      DATABASE_URL: 'postgres://coffer:secret@db.example.com:5432/coffer',
      DATA_DIR: '/tmp/coffer-config-test',
      ADMIN_API_KEY: 'cfa_a_long_enough_admin_key_here',
      CORS_ORIGINS: 'https://app.example.com, http://localhost:3000/',
      SESSION_COOKIE_NAME: 'sid',
      COOKIE_SECURE: 'true',
      WEBHOOK_ALLOW_PRIVATE: 'yes',
      AUTH_RATE_LIMIT: '0',
      LOG_LEVEL: 'warn',
    })
    assert.equal(config.port, 9090)
    assert.equal(config.host, '127.0.0.1')
    assert.equal(config.databaseUrl, 'postgres://coffer:secret@db.example.com:5432/coffer')
    assert.equal(config.dataDir, '/tmp/coffer-config-test')
    assert.equal(config.adminApiKey, 'cfa_a_long_enough_admin_key_here')
    assert.deepEqual(config.corsOrigins, ['https://app.example.com', 'http://localhost:3000'])
    assert.equal(config.sessionCookieName, 'sid')
    assert.equal(config.cookieSecure, true)
    assert.equal(config.webhookAllowPrivate, true)
    assert.equal(config.authRateLimit, 0)
    assert.equal(config.logLevel, 'warn')
  })

  it('accepts postgresql:// as well as postgres://', () => {
    assert.equal(loadConfig({ DATABASE_URL: 'postgresql://localhost/coffer' }).databaseUrl, 'postgresql://localhost/coffer')
  })

  it('accepts a multi-host DATABASE_URL, with or without target_session_attrs', () => {
    for (const url of [
      'postgres://coffer:secret@db1:5432,db2:5433/coffer?target_session_attrs=read-write',
      'postgres://coffer@db1,db2/coffer',
      'postgresql://coffer@10.0.0.1:5432,[::1]:5432/coffer?target_session_attrs=primary&sslmode=disable',
      'postgres://coffer@db1/coffer?target_session_attrs=any',
      'postgres://coffer@pgbouncer:6432/coffer?prepared_statements=off',
    ]) {
      assert.equal(loadConfig({ DATABASE_URL: url }).databaseUrl, url)
    }
  })

  it('bounds the waits on PostgreSQL by default, and reads the timeouts in milliseconds', () => {
    const defaults = loadConfig({}).postgresTimeouts
    for (const value of Object.values(defaults)) assert.ok(value > 0 && value <= 60_000, 'every wait is bounded')
    const config = loadConfig({
      PG_STATEMENT_TIMEOUT_MS: '20000',
      PG_LOCK_TIMEOUT_MS: '2000',
      PG_IDLE_IN_TRANSACTION_TIMEOUT_MS: '60000',
      PG_CONNECT_TIMEOUT_MS: '3000',
      PG_QUERY_TIMEOUT_MS: '25000',
      PG_READY_PROBE_TIMEOUT_MS: '1500',
      IDEMPOTENCY_LEASE_MS: '45000',
    })
    assert.deepEqual(config.postgresTimeouts, {
      statementTimeoutMs: 20_000,
      lockTimeoutMs: 2_000,
      idleInTransactionTimeoutMs: 60_000,
      connectTimeoutMs: 3_000,
      queryTimeoutMs: 25_000,
      readyProbeTimeoutMs: 1_500,
    })
    assert.equal(config.idempotencyLeaseMs, 45_000)
    // The client's own bound outlasts the server's, which ends a statement with a clean error first.
    assert.ok(defaults.queryTimeoutMs > defaults.statementTimeoutMs)
    assert.ok(loadConfig({}).idempotencyLeaseMs > defaults.queryTimeoutMs)
  })

  const bad: [string, string, string][] = [
    ['PORT', 'abc', 'not a number'],
    ['PORT', '70000', 'out of range'],
    ['PORT', '-1', 'negative'],
    ['PORT', '80.5', 'fractional'],
    ['HOST', 'my host', 'contains a space'],
    ['DATABASE_URL', 'mysql://localhost/coffer', 'not PostgreSQL'],
    ['DATABASE_URL', 'postgres://[bad', 'not a URL'],
    ['DATABASE_URL', 'postgres://db1/coffer?prepared_statements=no', 'prepared_statements neither on nor off'],
    ['ADMIN_API_KEY', 'short', 'too short to be a secret'],
    ['CORS_ORIGINS', 'app.example.com', 'not an origin'],
    ['CORS_ORIGINS', 'https://app.example.com/path', 'a URL with a path'],
    ['CORS_ORIGINS', 'ftp://files.example.com', 'not http(s)'],
    ['SESSION_COOKIE_NAME', 'my cookie', 'contains a space'],
    ['COOKIE_SECURE', 'maybe', 'not a boolean'],
    ['WEBHOOK_ALLOW_PRIVATE', 'sometimes', 'not a boolean'],
    ['AUTH_RATE_LIMIT', 'lots', 'not a number'],
    ['AUTH_RATE_LIMIT', '-5', 'negative'],
    ['LOG_LEVEL', 'loud', 'not a pino level'],
    ['SESSION_LIFETIME_DAYS', '0', 'zero'],
    ['WEBHOOK_RETRY_SCHEDULE', '5,soon', 'not seconds'],
    ['WEBHOOK_TIMEOUT_MS', '5', 'below the minimum'],
    ['WEBHOOK_RETRY_SCHEDULE', ',', 'empty entries'],
    ['WEBHOOK_ORIGIN_CONCURRENCY', '0', 'zero: an origin could never be called'],
    ['WEBHOOK_ORIGIN_CONCURRENCY', 'many', 'not a number'],
    ['WEBHOOK_ORIGIN_MIN_CONCURRENCY', '0', 'zero: a new origin could never be called'],
    ['WEBHOOK_CONCURRENCY', '0', 'zero: nothing could be delivered'],
    ['WEBHOOK_CONCURRENCY', '20000', 'above the maximum'],
    ['WEBHOOK_CIRCUIT_FAILURES', '0', 'zero'],
    ['WEBHOOK_CIRCUIT_OPEN_MS', '10', 'below the minimum'],
    ['SESSION_IDLE_DAYS', 'week', 'not a number'],
    ['BODY_LIMIT_BYTES', '10', 'too small for any request'],
    ['TRUST_PROXY', 'perhaps', 'not a boolean'],
    ['DATABASE_URL', 'postgres://db1:5432,,db2:5432/coffer', 'an empty host in the list'],
    ['DATABASE_URL', 'postgres://db1:5432,db2:99999/coffer', 'a port out of range in the list'],
    ['DATABASE_URL', 'postgres://db1:54x2/coffer', 'a port that is not a number'],
    ['DATABASE_URL', 'postgres:///coffer', 'no host'],
    ['DATABASE_URL', 'postgres://db1,db2/coffer?target_session_attrs=fastest', 'an unknown target_session_attrs'],
    ['DATABASE_URL', 'postgres://db1,db2/coffer?target_session_attrs=read-only', 'a target that cannot write'],
    ['PG_STATEMENT_TIMEOUT_MS', '0', 'not positive'],
    ['PG_STATEMENT_TIMEOUT_MS', '1.5', 'not a whole number'],
    ['PG_LOCK_TIMEOUT_MS', '-100', 'negative'],
    ['PG_LOCK_TIMEOUT_MS', 'soon', 'not a number'],
    ['PG_IDLE_IN_TRANSACTION_TIMEOUT_MS', '0', 'not positive'],
    ['PG_CONNECT_TIMEOUT_MS', '5s', 'a unit'],
  ]
  for (const [variable, value, why] of bad) {
    it(`refuses ${variable}=${JSON.stringify(value)} (${why}) naming the variable`, () => {
      expectBad({ [variable]: value }, variable)
    })
  }

  it('names the bad variable even when other variables are fine', () => {
    expectBad({ PORT: '8081', HOST: 'localhost', LOG_LEVEL: 'nope' }, 'LOG_LEVEL')
  })

  it('shows the offending value so the operator can find it', () => {
    assert.throws(() => loadConfig({ PORT: 'eighty' }), /eighty/)
  })

  it('never echoes a too-short admin key into the message', () => {
    assert.throws(
      () => loadConfig({ ADMIN_API_KEY: 'hunter2' }),
      (error: Error) => !error.message.includes('hunter2'),
    )
  })

  it('never echoes the database password into the message', () => {
    for (const url of [
      'mysql://coffer:s3cretpw@db/coffer',
      'postgres://coffer:s3cretpw/x@db1,db2/coffer',
      'postgres://coffer:s3cretpw@db1,:1/coffer',
    ]) {
      assert.throws(
        () => loadConfig({ DATABASE_URL: url }),
        (error: Error) => !error.message.includes('s3cretpw'),
      )
    }
  })
})
