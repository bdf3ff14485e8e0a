import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { CompiledQuery, sql } from 'kysely'
import pg from 'pg'
import { inTransaction } from '../src/db/dialect.ts'
import type { Database } from '../src/db/database.ts'
import { MAX_PREPARED_STATEMENTS, openPostgres } from '../src/db/postgres.ts'
import { buildTestApp, STORAGE, type TestApp } from './helpers/app.ts'
import { createUser } from './helpers/factories.ts'
import { createDatabase, runStatement } from './helpers/postgres.ts'

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
    /** The statement in three transactions at once, one on each connection; not run again on failure. */
    const onEveryConnection = () =>
      Promise.all(
        [0, 1, 2].map(() =>
          database.db.transaction().execute(async (trx) => {
            const { rows } = await sql<Record<string, unknown>>`select * from probe where id = ${1}`.execute(trx)
            const { rows: backend } = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(trx)
            await new Promise((resolve) => setTimeout(resolve, 50))
            return { rows, pid: backend[0].pid }
          }),
        ),
      )
    const prepared = await onEveryConnection()
    assert.equal(new Set(prepared.map((answer) => answer.pid)).size, 3)
    await runStatement(url, `alter table probe add column extra text default 'x'`)
    // One connection meets the change, outside a transaction: it runs its statement again.
    assert.deepEqual((await sql<Record<string, unknown>>`select * from probe where id = ${1}`.execute(database.db)).rows, [{ id: 1, name: 'one', extra: 'x' }])
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
    await runStatement(url, `select pg_terminate_backend(pid) from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()`)
    await new Promise((resolve) => setTimeout(resolve, 100))
    // The pool drops the idle clients it lost and opens new ones, whose statements are prepared anew.
    for (let i = 0; i < 4; i++) assert.equal(await runCount(database.db, 'select $1::int + 1 as x', i), i + 1)
    assert.deepEqual(await preparedStatements(database.db), ['select $1::int + 1 as x'])
  })
})

describe('a schema change under kept statements', () => {
  let t: TestApp
  before(async () => {
    t = await buildTestApp()
  })
  after(() => t.close())

  it('answers logins and registrations after a migration added a column to users', async () => {
    const user = await createUser(t.app)
    const login = () => t.app.inject({ method: 'POST', url: `/users/${user.username}/sessions`, payload: { password: user.password, return_token: true } })
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
