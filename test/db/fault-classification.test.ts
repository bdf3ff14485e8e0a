import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { describe, it } from 'node:test'
import { sql } from 'kysely'
import { Backoff, commitOutcomeUnknown, describeStorageFault, isStorageUnavailable, StorageFault } from '../../src/db/faults.ts'
import { parsePostgresUrl } from '../../src/config.ts'
import { openSqlite } from '../../src/db/database.ts'

/** An error as the drivers make them: a message and, mostly, a code. */
function driverError(message: string, code?: string): Error {
  return Object.assign(new Error(message), code === undefined ? {} : { code })
}

describe('storage fault classification', () => {
  const faults: [string, Error][] = [
    ['PostgreSQL shutting down (57P01)', driverError('terminating connection due to administrator command', '57P01')],
    ['PostgreSQL starting up (57P03)', driverError('the database system is starting up', '57P03')],
    ['statement_timeout (57014)', driverError('canceling statement due to statement timeout', '57014')],
    ['lock_timeout (55P03)', driverError('canceling statement due to lock timeout', '55P03')],
    ['idle_in_transaction_session_timeout (25P03)', driverError('terminating connection due to idle-in-transaction timeout', '25P03')],
    ['a read-only server (25006)', driverError('cannot execute INSERT in a read-only transaction', '25006')],
    ['too many connections (53300)', driverError('sorry, too many clients already', '53300')],
    ['disk full on PostgreSQL (53100)', driverError('could not extend file', '53100')],
    ['a connection exception (08006)', driverError('connection failure', '08006')],
    ['connection refused', driverError('connect ECONNREFUSED 127.0.0.1:5432', 'ECONNREFUSED')],
    ['a connection lost mid-query', driverError('Connection terminated unexpectedly')],
    ['a client whose connection broke', driverError('Client has encountered a connection error and is not queryable')],
    ['no free connection in time', driverError('timeout exceeded when trying to connect')],
    ['SQLite disk full', driverError('database or disk is full', 'SQLITE_FULL')],
    ['SQLite I/O error', driverError('disk I/O error', 'SQLITE_IOERR_WRITE')],
    ['SQLite read-only', driverError('attempt to write a readonly database', 'SQLITE_READONLY')],
    ['SQLite locked past the busy timeout', driverError('database is locked', 'SQLITE_BUSY')],
    ['a serialization failure left after the retries', driverError('could not serialize access', '40001')],
  ]
  for (const [what, error] of faults) {
    it(`counts ${what} as a storage fault`, () => assert.equal(isStorageUnavailable(error), true))
  }

  const bugs: [string, Error][] = [
    ['a unique violation', driverError('duplicate key value violates unique constraint', '23505')],
    ['a syntax error', driverError('syntax error at or near "selec"', '42601')],
    ['a check violation', driverError('new row violates check constraint', '23514')],
    ['SQLite constraint', driverError('UNIQUE constraint failed', 'SQLITE_CONSTRAINT_UNIQUE')],
    ['SQLite corruption (not transient)', driverError('database disk image is malformed', 'SQLITE_CORRUPT')],
    ['a plain bug', new TypeError("Cannot read properties of undefined (reading 'id')")],
  ]
  for (const [what, error] of bugs) {
    it(`does not count ${what} as a storage fault`, () => assert.equal(isStorageUnavailable(error), false))
  }

  it('names the real cause, found through the error’s causes', () => {
    const lost = driverError('Client has encountered a connection error and is not queryable')
    lost.cause = driverError('terminating connection due to administrator command', '57P01')
    assert.deepEqual(describeStorageFault(lost), { code: '57P01', message: 'terminating connection due to administrator command' })
    assert.equal(describeStorageFault(driverError('Connection terminated unexpectedly')).code, 'CONNECTION_LOST')
    const refused = new AggregateError([driverError('connect ECONNREFUSED ::1:5432', 'ECONNREFUSED')], 'connect failed')
    assert.equal(isStorageUnavailable(refused), true)
    assert.equal(describeStorageFault(refused).code, 'ECONNREFUSED')
  })

  it('turns a failed COMMIT into a storage fault that keeps its cause', () => {
    const fault = commitOutcomeUnknown(driverError('Connection terminated unexpectedly'))
    assert.ok(fault instanceof StorageFault)
    assert.equal(isStorageUnavailable(fault), true)
    assert.match(fault.message, /outcome of COMMIT is unknown/)
    assert.equal(describeStorageFault(commitOutcomeUnknown(driverError('database or disk is full', 'SQLITE_FULL'))).code, 'SQLITE_FULL')
  })
})

describe('Backoff', () => {
  it('pauses for doubling times up to its bound, and reports only the start and end of an outage', () => {
    const backoff = new Backoff(100, 1_000)
    assert.equal(backoff.ready(0), true)
    assert.equal(backoff.failed(0), true, 'the first failure is the one to log')
    assert.equal(backoff.ready(99), false)
    assert.equal(backoff.ready(100), true)
    assert.equal(backoff.failed(100), false)
    assert.equal(backoff.ready(299), false)
    for (let i = 0; i < 10; i++) backoff.failed(1_000)
    assert.equal(backoff.ready(1_999), false)
    assert.equal(backoff.ready(2_000), true, 'never longer than the bound')
    assert.equal(backoff.succeeded(), true, 'the end of the outage is the one to log')
    assert.equal(backoff.succeeded(), false)
    assert.equal(backoff.ready(0), true)
  })
})

describe('parsePostgresUrl', () => {
  it('takes a host list apart into single-host URLs with everything else kept', () => {
    const url = parsePostgresUrl('postgres://coffer:p%40ss@db1:5432,db2,[::1]:6543/coffer?sslmode=disable&target_session_attrs=read-write')
    assert.deepEqual(url.hosts, [
      { host: 'db1', port: 5432 },
      { host: 'db2', port: 5432 },
      { host: '[::1]', port: 6543 },
    ])
    assert.equal(url.targetSessionAttrs, 'read-write')
    assert.equal(url.urlFor(url.hosts[1]), 'postgres://coffer:p%40ss@db2:5432/coffer?sslmode=disable')
  })

  it('wants a server that writes when several hosts are given without target_session_attrs, any server for one', () => {
    assert.equal(parsePostgresUrl('postgres://db1,db2/coffer').targetSessionAttrs, 'read-write')
    assert.equal(parsePostgresUrl('postgres://db1/coffer').targetSessionAttrs, 'any')
    assert.equal(parsePostgresUrl('postgres://db1/coffer?target_session_attrs=primary').targetSessionAttrs, 'primary')
  })

  it('refuses malformed host lists and targets it cannot serve', () => {
    assert.throws(() => parsePostgresUrl('postgres://db1,,db2/coffer'), /malformed host list/)
    assert.throws(() => parsePostgresUrl('postgres://db1:0/coffer'), /1-65535/)
    assert.throws(() => parsePostgresUrl('postgres://db1/coffer?target_session_attrs=standby'), /the service writes/)
    assert.throws(() => parsePostgresUrl('postgres://db1/coffer?target_session_attrs=whatever'), /must be one of any, read-write, primary/)
    assert.throws(() => parsePostgresUrl('mysql://db1/coffer'), /postgres:\/\//)
  })
})

describe('SQLite after a fault', () => {
  it('reports the error that ended a transaction SQLite had already rolled back, not the ROLLBACK’s', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'coffer-faults-'))
    const database = openSqlite(path.join(dir, 'coffer.sqlite'))
    try {
      const failure = await database.db
        .transaction()
        .execute(async (trx) => {
          // As SQLite does by itself after SQLITE_FULL or SQLITE_IOERR: the transaction is gone.
          await sql`rollback`.execute(trx)
          throw Object.assign(new Error('database or disk is full'), { code: 'SQLITE_FULL' })
        })
        .then(
          () => undefined,
          (error: unknown) => error,
        )
      assert.equal((failure as { code?: string }).code, 'SQLITE_FULL')
      // And the connection takes the next transaction.
      await database.db.transaction().execute((trx) => sql`select 1`.execute(trx))
      await database.checkWritable()
    } finally {
      await database.close()
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })
})
