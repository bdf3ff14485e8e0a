import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, before, describe, it } from 'node:test'
import { CompiledQuery, sql } from 'kysely'
import pg from 'pg'
import { inTransaction } from '../../src/db/dialect.ts'
import type { Database } from '../../src/db/database.ts'
import { listAppliedMigrations, MIGRATION_NAMES, migrateTo, migrateToLatest } from '../../src/db/migrate.ts'
import { arrayLiteral, MAX_PREPARED_STATEMENTS, openPostgres } from '../../src/db/postgres.ts'
import { verifyLedger } from '../../src/ledger/verify.ts'
import { createBackup } from '../../src/operations/backup.ts'
import { checkBackup, restoreBackup } from '../../src/operations/restore.ts'
import { pruneOnce } from '../../src/operations/retention.ts'
import { buildTestApp, STORAGE, type TestApp } from '../helpers/app.ts'
import { createUser } from '../helpers/factories.ts'
import { createDatabase, runStatement } from '../../scripts/lib/postgres.ts'
import { waitUntil } from '../helpers/receiver.ts'

/**
 * On PostgreSQL every query with parameters runs as a named statement of its connection
 * (`src/db/postgres.ts`): the statements a connection keeps stay bounded whatever texts it is
 * given, and a statement the server can no longer run (the schema changed under it, or the server
 * lost it) is prepared again instead of failing the request. SQLite keeps its own statements
 * (`src/db/database.ts`); the schema change is checked on both storages.
 */

async function runCount(db: Database['db'], text: string, value: number): Promise<number> {
  const { rows } = await db.executeQuery<{ x: number }>(CompiledQuery.raw(text, [value]))
  return rows[0].x
}

async function preparedStatements(db: Database['db']): Promise<string[]> {
  // No parameters: sent unnamed, so it does not count itself.
  const { rows } = await sql<{ statement: string }>`select statement from pg_prepared_statements`.execute(db)
  return rows.map((row) => row.statement)
}

describe('PostgreSQL named statements', { skip: STORAGE !== 'postgres' && 'PostgreSQL only' }, () => {
  const adminUrl = process.env.TEST_PG_ADMIN_URL ?? ''
  const cleanups: (() => Promise<void>)[] = []
  after(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup()
  })

  /** A database of its own with one connection, so that every query meets the same statements. */
  async function oneConnection(poolSize = 1): Promise<{ database: Database; url: string }> {
    const url = await createDatabase(adminUrl)
    const database = openPostgres(url, poolSize)
    cleanups.push(() => database.close())
    return { database, url }
  }

  it(`keeps at most ${MAX_PREPARED_STATEMENTS} statements per connection, on the server and in node-postgres, the most recently used`, async () => {
    // node-postgres's own record of the statements it parsed on each connection.
    const connections = new Set<{ parsedStatements: Record<string, string> }>()
    const parse = pg.Connection.prototype.parse
    pg.Connection.prototype.parse = function (this: pg.Connection, ...args: Parameters<typeof parse>) {
      connections.add(this as unknown as { parsedStatements: Record<string, string> })
      return parse.apply(this, args)
    }
    try {
      const { database } = await oneConnection()
      const hot = 'select $1::int * 2 as x'
      for (let i = 0; i < MAX_PREPARED_STATEMENTS * 3; i++) {
        // Texts that differ by a number, as counts written into a statement do.
        assert.equal(await runCount(database.db, `select $1::int + ${i} as x`, 1), i + 1)
        if (i % 20 === 0) assert.equal(await runCount(database.db, hot, i), i * 2)
      }
      const statements = await preparedStatements(database.db)
      assert.equal(statements.length, MAX_PREPARED_STATEMENTS)
      assert.ok(statements.includes(hot), 'the statement used all along is still prepared')
      assert.ok(statements.includes(`select $1::int + ${MAX_PREPARED_STATEMENTS * 3 - 1} as x`), 'the newest is prepared')
      assert.ok(!statements.includes('select $1::int + 0 as x'), 'the oldest was closed')
      // A statement closed earlier runs again, prepared anew.
      assert.equal(await runCount(database.db, 'select $1::int + 0 as x', 5), 5)
      assert.equal(connections.size, 1)
      for (const connection of connections) assert.equal(Object.keys(connection.parsedStatements).length, MAX_PREPARED_STATEMENTS)
    } finally {
      pg.Connection.prototype.parse = parse
    }
  })

  it('sends arrays as node-postgres would: every element reads back the same, through the one-JSON notation or node-postgres', async () => {
    const { database } = await oneConnection()
    const texts = [
      '',
      'plain',
      'with "quotes" and \\ back\\slashes',
      '{braces}, commas, and spaces',
      'NULL',
      'null',
      '\u00e9t\u00e9 \u2028',
      'a\nnew line',
      'tab\there',
      'emoji \ud83d\ude00',
      JSON.stringify({ memo: 'a "b" \\ c', assets: [{ quantity: 1 }] }),
    ]
    // eslint-disable-next-line no-control-regex -- control characters are what it leaves out
    const printable = texts.filter((text) => !/[\u0000-\u001f\ud800-\udfff]/.test(text))
    const cases: [unknown[], 'text' | 'bigint'][] = [
      [printable, 'text'],
      [[...printable, null, 12], 'text'],
      [texts, 'text'],
      [[...texts, null, undefined], 'text'],
      [[1, -2, 0, 9007199254740991, null], 'bigint'],
      [[], 'bigint'],
      [[true, false, null], 'text'],
    ]
    for (const [values, type] of cases) {
      // The server's answer is node-postgres's own reading of the array it was sent.
      const { rows } = await database.db.executeQuery<{ a: unknown[] }>(
        CompiledQuery.raw(`select $1::${type}[] as a, $2::int as n`, [values, values.length]),
      )
      // (node-postgres reads a bigint[] as strings.)
      const expected = values.map((value) => (value === undefined || value === null ? null : String(value)))
      assert.deepEqual(rows[0].a, expected)
    }
    // Taken by the one-JSON notation or handed on unchanged, whichever reads back the same.
    assert.equal(typeof arrayLiteral(printable), 'string')
    assert.equal(arrayLiteral(['a "b"', null, 3]), '{"a \\"b\\"",null,3}')
    assert.deepEqual(arrayLiteral(['a\nb']), ['a\nb'])
    assert.deepEqual(arrayLiteral([Number.NaN]), [Number.NaN])
  })

  it('runs a statement again after a migration changed the columns it answers, outside and inside a transaction', async () => {
    const { database, url } = await oneConnection()
    await sql`create table probe (id int primary key, name text)`.execute(database.db)
    await sql`insert into probe values (1, 'one')`.execute(database.db)
    const read = () => sql<Record<string, unknown>>`select * from probe where id = ${1}`.execute(database.db)
    assert.deepEqual((await read()).rows, [{ id: 1, name: 'one' }])
    // Another instance's migration: "cached plan must not change result type" for the statement above.
    await runStatement(url, `alter table probe add column extra text default 'x'`)
    assert.deepEqual((await read()).rows, [{ id: 1, name: 'one', extra: 'x' }])

    await runStatement(url, `alter table probe add column more int default 2`)
    let attempts = 0
    const rows = await inTransaction(database, async (trx) => {
      attempts += 1
      return (await sql<Record<string, unknown>>`select * from probe where id = ${1}`.execute(trx)).rows
    })
    assert.deepEqual(rows, [{ id: 1, name: 'one', extra: 'x', more: 2 }])
    // The first attempt met the old statement and failed; the connection dropped it, and the transaction ran again.
    assert.equal(attempts, 2)
  })

  it('after a schema change met on one connection, every connection of the pool prepares its statements anew', async () => {
    const { database, url } = await oneConnection(3)
    await sql`create table probe (id int primary key, name text)`.execute(database.db)
    await sql`insert into probe values (1, 'one')`.execute(database.db)
    /**
     * The statement in three transactions at once, not run again on failure; each stays open until
     * all three have run it (not for a fixed time, which a slow machine could outlast), so they
     * hold the pool's three connections, one each.
     */
    const onEveryConnection = () => {
      let arrived = 0
      let allArrived!: () => void
      const together = new Promise<void>((resolve) => (allArrived = resolve))
      return Promise.all(
        [0, 1, 2].map(() =>
          database.db.transaction().execute(async (trx) => {
            try {
              const { rows } = await sql<Record<string, unknown>>`select * from probe where id = ${1}`.execute(trx)
              const { rows: backend } = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(trx)
              return { rows, pid: backend[0].pid }
            } finally {
              if (++arrived === 3) allArrived()
              await together
            }
          }),
        ),
      )
    }
    const prepared = await onEveryConnection()
    assert.equal(new Set(prepared.map((answer) => answer.pid)).size, 3)
    await runStatement(url, `alter table probe add column extra text default 'x'`)
    // One connection meets the change, outside a transaction: it runs its statement again.
    assert.deepEqual((await sql<Record<string, unknown>>`select * from probe where id = ${1}`.execute(database.db)).rows, [
      { id: 1, name: 'one', extra: 'x' },
    ])
    // The two others drop their statements before their next one, so no transaction fails.
    for (const answer of await onEveryConnection()) assert.deepEqual(answer.rows, [{ id: 1, name: 'one', extra: 'x' }])
  })

  it('prepares again a statement the server no longer has', async () => {
    const { database } = await oneConnection()
    assert.equal(await runCount(database.db, 'select $1::int + 1 as x', 1), 2)
    // Dropped behind the connection's back, as a pooler changing the server session would.
    await sql`deallocate all`.execute(database.db)
    assert.equal(await runCount(database.db, 'select $1::int + 1 as x', 2), 3)
    await sql`deallocate all`.execute(database.db)
    let attempts = 0
    const x = await inTransaction(database, async (trx) => {
      attempts += 1
      return runCount(trx, 'select $1::int + 1 as x', 3)
    })
    assert.equal(x, 4)
    assert.equal(attempts, 2)
  })

  it('prepares its statements on the new connections after the old ones were lost', async () => {
    const { database, url } = await oneConnection(2)
    assert.equal(await runCount(database.db, 'select $1::int + 1 as x', 1), 2)
    await runStatement(
      url,
      `select pg_terminate_backend(pid) from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()`,
    )
    // The pool drops the idle clients it lost (waited for, not a fixed pause a slow machine could
    // outlast) and opens new ones, whose statements are prepared anew.
    await waitUntil(() => database.poolUse?.().open === 0, 5_000, 'the pool to drop the connections it lost')
    for (let i = 0; i < 4; i++) assert.equal(await runCount(database.db, 'select $1::int + 1 as x', i), i + 1)
    assert.deepEqual(await preparedStatements(database.db), ['select $1::int + 1 as x'])
  })
})

describe(
  'PostgreSQL transactions beside the request paths, after the server lost their statements',
  { skip: STORAGE !== 'postgres' && 'PostgreSQL only' },
  () => {
    const adminUrl = process.env.TEST_PG_ADMIN_URL ?? ''
    const cleanups: (() => Promise<void>)[] = []
    after(async () => {
      for (const cleanup of cleanups.reverse()) await cleanup()
    })

    /** A store of its own, migrated, with one connection, so that every transaction meets the statements prepared before. */
    async function oneConnectionStore(): Promise<Database> {
      const database = openPostgres(await createDatabase(adminUrl), 1)
      cleanups.push(() => database.close())
      await migrateToLatest(database.db)
      return database
    }

    /**
     * Drops the connection's named statements on the server behind its back, as a pooler that
     * switched server sessions would: all, or those whose text starts with `prefix`. The
     * connection still counts them as prepared, so the next run of one fails before it runs.
     */
    async function loseStatements(database: Database, prefix?: string): Promise<void> {
      if (prefix === undefined) return void (await sql`deallocate all`.execute(database.db))
      const { rows } = await sql<{ name: string }>`select name from pg_prepared_statements where starts_with(statement, ${prefix})`.execute(
        database.db,
      )
      assert.ok(rows.length > 0, `a statement starting ${prefix} is prepared`)
      for (const { name } of rows) await sql`deallocate ${sql.id(name)}`.execute(database.db)
    }

    it('a transaction fails once per connection, not once per statement it lost', async () => {
      const database = await oneConnectionStore()
      const texts = ['select $1::int + 1 as x', 'select $1::int + 2 as x', 'select $1::int + 3 as x']
      for (const text of texts) await runCount(database.db, text, 1)
      await loseStatements(database)
      let attempts = 0
      const sums = await inTransaction(database, async (trx) => {
        attempts += 1
        const answers: number[] = []
        for (const text of texts) answers.push(await runCount(trx, text, 1))
        return answers
      })
      assert.deepEqual(sums, [2, 3, 4])
      assert.equal(attempts, 2)
    })

    it('coffer verify reads its snapshot again', async () => {
      const database = await oneConnectionStore()
      assert.deepEqual((await verifyLedger(database.db)).problems, [])
      await loseStatements(database)
      assert.deepEqual((await verifyLedger(database.db)).problems, [])
    })

    it('a backup is written again from the start, and restores', async () => {
      const database = await oneConnectionStore()
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'coffer-statements-'))
      cleanups.push(async () => fs.rmSync(dir, { recursive: true, force: true }))
      await createBackup(database, path.join(dir, 'first.backup'))
      await loseStatements(database)
      const second = await createBackup(database, path.join(dir, 'second.backup'))
      assert.ok(!fs.existsSync(`${second.file}.partial`))
      const checked = await checkBackup(second.file)
      assert.equal(checked.rows, second.rows)
    })

    it('a restore runs its transaction again from the start of the file', async () => {
      const source = await oneConnectionStore()
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'coffer-statements-'))
      cleanups.push(async () => fs.rmSync(dir, { recursive: true, force: true }))
      const { file } = await createBackup(source, path.join(dir, 'store.backup'))
      const checked = await checkBackup(file)
      const target = await oneConnectionStore()
      // The store of a fresh migration holds only the mint wallet, which a restore overwrites: it
      // stays empty, so the same backup can be restored into it again.
      await restoreBackup(target, checked)
      // Only the restore transaction's own statement, so that nothing before it meets the loss.
      await loseStatements(target, 'update "wallets" set')
      const again = await restoreBackup(target, checked)
      assert.equal(again.rows, checked.rows)
      assert.deepEqual((await verifyLedger(target.db)).problems, [])
    })

    it('the retention job runs its batch again', async () => {
      const database = await oneConnectionStore()
      const policy = { eventRetentionDays: 30, idempotencyRetentionHours: 720, sessionIdleDays: 0 }
      assert.ok(await pruneOnce(database, policy))
      await loseStatements(database)
      assert.ok(await pruneOnce(database, policy))
    })

    it('migrations run again from the start', async () => {
      const database = await oneConnectionStore()
      const last = MIGRATION_NAMES[MIGRATION_NAMES.length - 1]
      await migrateTo(database.db, MIGRATION_NAMES[MIGRATION_NAMES.length - 2])
      // The bookkeeping row the migration transaction writes last.
      await loseStatements(database, 'insert into "coffer_migrations"')
      assert.deepEqual(await migrateToLatest(database.db), [last])
      assert.deepEqual(await listAppliedMigrations(database.db), MIGRATION_NAMES)
    })
  },
)

describe('a schema change under kept statements', () => {
  let t: TestApp
  before(async () => {
    t = await buildTestApp()
  })
  after(() => t.close())

  it('answers logins and registrations after a migration added a column to users', async () => {
    const user = await createUser(t.app)
    const login = () =>
      t.app.inject({ method: 'POST', url: `/users/${user.username}/sessions`, payload: { password: user.password, return_token: true } })
    // Enough requests to meet the statements on several connections of the pool.
    for (let i = 0; i < 4; i++) assert.equal((await login()).statusCode, 201)
    await createUser(t.app)
    await sql`alter table users add column nickname text`.execute(t.database.db)
    for (let i = 0; i < 8; i++) {
      const response = await login()
      assert.equal(response.statusCode, 201, response.body)
    }
    // Registration writes the user with `returning *` inside a transaction.
    await createUser(t.app)
    await createUser(t.app)
  })
})
