import assert from 'node:assert/strict'
import { after, describe, it } from 'node:test'
import type { FastifyInstance } from 'fastify'
import pg from 'pg'
import { buildApp } from '../../src/app.ts'
import { loadConfig } from '../../src/config.ts'
import { openPostgres, type Database } from '../../src/db/database.ts'
import { describeStorageFault, isStorageUnavailable } from '../../src/db/faults.ts'
import { migrateToLatest } from '../../src/db/migrate.ts'
import { hashToken } from '../../src/http/tokens.ts'
import { generateSecretsKey } from '../../src/secrets/secret-box.ts'
import { ADMIN_KEY, expectError, STORAGE } from '../helpers/app.ts'
import { createUser } from '../helpers/factories.ts'
import { createDatabase, freePort, runStatement } from '../../scripts/lib/postgres.ts'

/**
 * PostgreSQL faults met inside one process (the whole service under a real restart, outage,
 * failover and full disk is `npm run test:faults`): connections lost while checked out, servers
 * that do not take writes, a host list whose first host is down, and bounded lock waits.
 */
describe('PostgreSQL storage faults', { skip: STORAGE !== 'postgres' && 'PostgreSQL only' }, () => {
  const adminUrl = process.env.TEST_PG_ADMIN_URL ?? ''
  const cleanups: (() => Promise<void>)[] = []
  after(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup()
  })

  async function serve(
    url: string,
    env: Record<string, string> = {},
    timeouts = {},
  ): Promise<{ app: FastifyInstance; database: Database }> {
    const database = openPostgres(url, 4, timeouts)
    const config = loadConfig({ DATABASE_URL: url, ADMIN_API_KEY: ADMIN_KEY, LOG_LEVEL: 'silent', AUTH_RATE_LIMIT: '0', ...env })
    const app = await buildApp({ config, database, adminKeyHash: hashToken(ADMIN_KEY), secretsKey: generateSecretsKey() })
    cleanups.push(async () => {
      await app.close()
      await database.close()
    })
    return { app, database }
  }

  it('survives a connection lost while checked out: the query fails as a storage fault naming 57P01', async () => {
    const url = await createDatabase(adminUrl)
    const database = openPostgres(url, 2)
    cleanups.push(() => database.close())
    const error = await database.db
      .connection()
      .execute(async (connection) => {
        const rows = await connection.selectNoFrom((eb) => eb.fn<number>('pg_backend_pid').as('pid')).execute()
        // Ended from outside while this client is checked out and idle: its 'error' event has no query to fail.
        await runStatement(url, `select pg_terminate_backend(${rows[0].pid})`)
        await new Promise((resolve) => setTimeout(resolve, 100))
        await connection.selectNoFrom((eb) => eb.val(1).as('one')).execute()
      })
      .then(
        () => undefined,
        (failure: unknown) => failure,
      )
    assert.ok(error, 'the query on the lost connection failed')
    assert.equal(isStorageUnavailable(error), true)
    assert.equal(describeStorageFault(error).code, '57P01')
    // The pool dropped that client and opens a new one.
    await database.checkWritable()
  })

  it('connects to the host that takes writes when the first of a host list is down', async () => {
    const url = new URL(await createDatabase(adminUrl))
    const dead = await freePort()
    const multi = `postgres://${url.username}:${url.password}@127.0.0.1:${dead},${url.host}${url.pathname}?target_session_attrs=read-write`
    const { app, database } = await serve(multi)
    await migrateToLatest(database.db)
    assert.equal((await app.inject({ method: 'GET', url: '/readyz' })).statusCode, 200)
    const alice = await createUser(app)
    assert.equal((await app.inject({ method: 'GET', url: '/wallet/assets', headers: alice.auth })).statusCode, 200)
  })

  it('drops connections to a server that does not take writes: 503 S001 with Retry-After, /readyz 503, and 200 again after', async () => {
    const url = await createDatabase(adminUrl)
    const setup = openPostgres(url, 1)
    await migrateToLatest(setup.db)
    await setup.close()
    const name = new URL(url).pathname.slice(1)
    await runStatement(adminUrl, `alter database ${name} set default_transaction_read_only = on`)
    const readWrite = `${url}?target_session_attrs=read-write`
    const { app } = await serve(readWrite)
    const ready = await app.inject({ method: 'GET', url: '/readyz' })
    expectError(ready, 503, 'S001')
    const register = await app.inject({ method: 'POST', url: '/users', payload: { username: 'readonlyuser', password: 'correct horse' } })
    expectError(register, 503, 'S001')
    assert.ok(Number(register.headers['retry-after']) >= 1, 'S001 carries Retry-After')
    await runStatement(adminUrl, `alter database ${name} set default_transaction_read_only = off`)
    assert.equal((await app.inject({ method: 'GET', url: '/readyz' })).statusCode, 200)
    assert.equal(
      (await app.inject({ method: 'POST', url: '/users', payload: { username: 'readonlyuser', password: 'correct horse' } })).statusCode,
      201,
    )
  })

  it('answers 503 S001 when a transfer waits for a lock past lock_timeout', async () => {
    const url = await createDatabase(adminUrl)
    const { app, database } = await serve(url, {}, { lockTimeoutMs: 300 })
    await migrateToLatest(database.db)
    const alice = await createUser(app)
    const bob = await createUser(app)
    const asset = await app.inject({
      method: 'POST',
      url: '/assets',
      headers: { authorization: `Bearer ${ADMIN_KEY}` },
      payload: { name: 'gold', value: 1 },
    })
    await app.inject({
      method: 'POST',
      url: `/wallets/${alice.walletId}/assets`,
      headers: { authorization: `Bearer ${ADMIN_KEY}` },
      payload: { id: asset.json().id, quantity: 10 },
    })
    // Another session holds alice's wallet turn (the lock every move of her wallet takes) and sits on it.
    const holder = new pg.Client({ connectionString: url })
    await holder.connect()
    try {
      await holder.query('begin')
      await holder.query('select pg_advisory_xact_lock($1)', [alice.walletId])
      const started = Date.now()
      const sent = await app.inject({
        method: 'POST',
        url: '/wallet/transactions',
        headers: alice.auth,
        payload: { recipient: bob.username, assets: { gold: 1 } },
      })
      expectError(sent, 503, 'S001')
      assert.ok(Date.now() - started < 5_000, 'answered soon after the lock timeout, not held')
      await holder.query('rollback')
    } finally {
      await holder.end()
    }
    const again = await app.inject({
      method: 'POST',
      url: '/wallet/transactions',
      headers: alice.auth,
      payload: { recipient: bob.username, assets: { gold: 1 } },
    })
    assert.equal(again.statusCode, 201, 'nothing was moved by the refused transfer, and the next one goes through')
    const holdings = await app.inject({ method: 'GET', url: '/wallet/assets', headers: alice.auth })
    assert.equal(holdings.json()[0].quantity, 9)
  })
})
