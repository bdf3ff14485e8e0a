import assert from 'node:assert/strict'
import net from 'node:net'
import { after, describe, it } from 'node:test'
import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import pg from 'pg'
import { buildApp } from '../../src/app.ts'
import { loadConfig, type PostgresTimeouts } from '../../src/config.ts'
import { openPostgres, type Database } from '../../src/db/database.ts'
import { migrateToLatest } from '../../src/db/migrate.ts'
import { hashToken } from '../../src/http/tokens.ts'
import { AppError } from '../../src/http/errors.ts'
import { Idempotency } from '../../src/ledger/idempotency.ts'
import { verifyLedger } from '../../src/ledger/verify.ts'
import { generateSecretsKey } from '../../src/secrets/secret-box.ts'
import { ADMIN_KEY, expectError, journalCovered, openTestDatabase, STORAGE } from '../helpers/app.ts'
import { createAsset, createUser, issue, type TestUser } from '../helpers/factories.ts'
import { createDatabase, runStatement, startPostgres } from '../../scripts/lib/postgres.ts'

/** The simple-protocol COMMIT as node-postgres sends it: 'Q', its length (4 + 7), the text and its NUL. */
const COMMIT_MESSAGE = Buffer.from('Q\u0000\u0000\u0000\u000bcommit\u0000', 'latin1')

/**
 * A TCP proxy in front of PostgreSQL that can freeze: it stops reading both ways without closing
 * a socket, as a host whose PostgreSQL processes are stopped (the kernel still acknowledges, nothing
 * answers). Closes seen while frozen reach the other side on thawing.
 */
class FreezingProxy {
  readonly #server: net.Server
  readonly #sockets = new Set<net.Socket>()
  #frozen = false
  #freezeAfterCommit = false
  #onThaw: (() => void)[] = []

  private constructor(server: net.Server) {
    this.#server = server
  }

  static async start(targetPort: number): Promise<FreezingProxy> {
    const server = net.createServer()
    const proxy = new FreezingProxy(server)
    server.on('connection', (client) => proxy.#join(client, net.connect(targetPort, '127.0.0.1')))
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    return proxy
  }

  get port(): number {
    return (this.#server.address() as net.AddressInfo).port
  }

  #join(client: net.Socket, server: net.Socket): void {
    for (const socket of [client, server]) {
      this.#sockets.add(socket)
      socket.on('error', () => {})
      if (this.#frozen) socket.pause()
    }
    client.on('data', (chunk: Buffer) => {
      server.write(chunk)
      if (this.#freezeAfterCommit && chunk.includes(COMMIT_MESSAGE)) {
        this.#freezeAfterCommit = false
        this.freeze()
      }
    })
    server.on('data', (chunk: Buffer) => client.write(chunk))
    const closeBoth = (closed: net.Socket, other: net.Socket) => {
      closed.on('close', () => {
        this.#sockets.delete(closed)
        const close = () => other.destroy()
        if (this.#frozen) this.#onThaw.push(close)
        else close()
      })
    }
    closeBoth(client, server)
    closeBoth(server, client)
  }

  freeze(): void {
    this.#frozen = true
    for (const socket of this.#sockets) socket.pause()
  }

  /** Freezes right after forwarding the next COMMIT: the server commits, its answer is never passed on. */
  freezeAfterNextCommit(): void {
    this.#freezeAfterCommit = true
  }

  thaw(): void {
    this.#frozen = false
    for (const socket of this.#sockets) socket.resume()
    for (const close of this.#onThaw.splice(0)) close()
  }

  async close(): Promise<void> {
    this.thaw()
    for (const socket of this.#sockets) socket.destroy()
    await new Promise<void>((resolve) => this.#server.close(() => resolve()))
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

/** Asks /readyz until it answers `status` (a fault, or its end, shows within a probe or two). */
async function readiness(app: FastifyInstance, status: number): Promise<LightMyRequestResponse> {
  for (let attempt = 0; ; attempt++) {
    const response = await app.inject({ method: 'GET', url: '/readyz' })
    if (response.statusCode === status || attempt >= 100) return response
    await sleep(100)
  }
}

function expectUnavailable(response: LightMyRequestResponse): void {
  expectError(response, 503, 'S001')
  assert.ok(Number(response.headers['retry-after']) >= 1, 'S001 carries Retry-After')
}

describe('Idempotency-Key leases', () => {
  const cleanups: (() => Promise<void>)[] = []
  after(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup()
  })

  it('answers G004 while the first request holds its key, and runs a repeat past the lease instead of answering G004', async () => {
    const { database } = await openTestDatabase()
    cleanups.push(() => database.close())
    const leaseMs = 200
    const idempotency = new Idempotency(database.db, leaseMs)
    let started!: () => void
    const running = new Promise<void>((resolve) => (started = resolve))
    let finish!: () => void
    const gate = new Promise<void>((resolve) => (finish = resolve))
    const first = idempotency.answerOnce(1, 'hung', 'hash', async () => {
      started()
      await gate
      return { status: 201, body: 'first' }
    })
    await running
    await assert.rejects(
      idempotency.answerOnce(1, 'hung', 'hash', async () => ({ status: 201, body: 'early' })),
      (error: unknown) => error instanceof AppError && error.code === 'G004',
    )
    await sleep(leaseMs + 50)
    const repeat = await idempotency.answerOnce(1, 'hung', 'hash', async () => ({ status: 201, body: 'repeat' }))
    assert.deepEqual(repeat, { status: 201, body: 'repeat', replayed: false })
    finish()
    assert.equal((await first).body, 'first')
    // The first attempt's end does not end the repeat's lease, nor leave one behind.
    const later = await idempotency.answerOnce(1, 'hung', 'hash', async () => ({ status: 201, body: 'later' }))
    assert.equal(later.body, 'later')
  })
})

describe('PostgreSQL storage calls are bounded', { skip: STORAGE !== 'postgres' && 'PostgreSQL only' }, () => {
  const adminUrl = process.env.TEST_PG_ADMIN_URL ?? ''
  const cleanups: (() => Promise<void>)[] = []
  after(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup()
  })

  interface World {
    app: FastifyInstance
    database: Database
    alice: TestUser
    bob: TestUser
    asset: string
  }

  /** The app on `url` (migrated through `directUrl`), with alice holding 100 of an asset and bob nothing. */
  async function world(
    url: string,
    directUrl: string,
    timeouts: Partial<PostgresTimeouts>,
    env: Record<string, string> = {},
  ): Promise<World> {
    const setup = openPostgres(directUrl, 1)
    await migrateToLatest(setup.db)
    await setup.close()
    const database = openPostgres(url, 4, timeouts)
    const config = loadConfig({ DATABASE_URL: url, ADMIN_API_KEY: ADMIN_KEY, LOG_LEVEL: 'silent', AUTH_RATE_LIMIT: '0', ...env })
    const app = await buildApp({ config, database, adminKeyHash: hashToken(ADMIN_KEY), secretsKey: generateSecretsKey() })
    cleanups.push(async () => {
      await app.close()
      await database.close()
    })
    const api = { app, admin: { authorization: `Bearer ${ADMIN_KEY}` } }
    const asset = await createAsset(api)
    const alice = await createUser(app)
    const bob = await createUser(app)
    await issue(api, alice.walletId, asset.id, 100)
    return { app, database, alice, bob, asset: asset.name }
  }

  function send({ app, alice, bob, asset }: World, key: string): Promise<LightMyRequestResponse> {
    return app.inject({
      method: 'POST',
      url: '/wallet/transactions',
      headers: { ...alice.auth, 'idempotency-key': key },
      payload: { recipient: bob.username, assets: { [asset]: 1 } },
    })
  }

  async function holding({ app, asset }: World, user: TestUser): Promise<number> {
    const response = await app.inject({ method: 'GET', url: '/wallet/assets', headers: user.auth })
    assert.equal(response.statusCode, 200, response.body)
    const found = (response.json() as { asset: { name: string }; quantity: number }[]).find((line) => line.asset.name === asset)
    return found?.quantity ?? 0
  }

  async function verified(database: Database): Promise<void> {
    const report = await verifyLedger(database.db)
    assert.ok(report.ok, report.problems.join('\n'))
  }

  /** A fresh database behind a freezing proxy, and the app on the proxy. */
  async function frozenWorld(timeouts: Partial<PostgresTimeouts>): Promise<World & { proxy: FreezingProxy }> {
    const directUrl = await createDatabase(adminUrl)
    const direct = new URL(directUrl)
    const proxy = await FreezingProxy.start(Number(direct.port))
    cleanups.push(() => proxy.close())
    const viaProxy = new URL(directUrl)
    viaProxy.port = String(proxy.port)
    return { ...(await world(viaProxy.toString(), directUrl, timeouts)), proxy }
  }

  const SHORT = { queryTimeoutMs: 1_000, connectTimeoutMs: 1_000, readyProbeTimeoutMs: 500 }

  it('frees requests, connections and pool slots on a frozen server: 503 S001 with Retry-After, /readyz 503, fresh attempts after', async () => {
    const w = await frozenWorld(SHORT)
    w.proxy.freeze()
    const started = Date.now()
    // More requests than the pool has connections: those waiting for one are bounded too.
    const keys = Array.from({ length: 7 }, (_, index) => `frozen-${index}`)
    const answers = await Promise.all(keys.map((key) => send(w, key)))
    for (const answer of answers) expectUnavailable(answer)
    // Bounded by a few client-side timeouts, never held for as long as the server stays silent.
    assert.ok(Date.now() - started < 20_000, 'answered within the client-side bounds')
    expectUnavailable(await readiness(w.app, 503))
    w.proxy.thaw()
    assert.equal((await readiness(w.app, 200)).statusCode, 200)
    // Nothing had committed: every retry is a fresh attempt, each moving its one unit once.
    for (const key of keys) {
      const retried = await send(w, key)
      assert.equal(retried.statusCode, 201, retried.body)
      assert.equal(retried.headers['idempotent-replayed'], undefined)
    }
    for (const key of keys) assert.equal((await send(w, key)).headers['idempotent-replayed'], 'true')
    assert.equal(await holding(w, w.alice), 100 - keys.length)
    assert.equal(await holding(w, w.bob), keys.length)
    const pool = w.database.poolUse?.()
    assert.ok(pool && pool.open <= pool.max && pool.waiting === 0, JSON.stringify(pool))
    await verified(w.database)
  })

  it('leaves a frozen first host of a host list for the next that takes writes: 503 S001 meanwhile, then the transfer, once', async () => {
    const directUrl = await createDatabase(adminUrl)
    const direct = new URL(directUrl)
    const proxy = await FreezingProxy.start(Number(direct.port))
    cleanups.push(() => proxy.close())
    const hosts = `127.0.0.1:${proxy.port},127.0.0.1:${direct.port}`
    const multi = `postgres://${direct.username}:${direct.password}@${hosts}${direct.pathname}?target_session_attrs=read-write`
    const w = await world(multi, directUrl, SHORT)
    proxy.freeze()
    // Connections opened through the frozen host fail one by one; each retry is answered, never G004.
    let answer = await send(w, 'moved-on')
    for (let attempt = 0; answer.statusCode !== 201 && attempt < 20; attempt++) {
      expectUnavailable(answer)
      answer = await send(w, 'moved-on')
    }
    assert.equal(answer.statusCode, 201, answer.body)
    assert.equal(await holding(w, w.alice), 99)
    assert.equal(await holding(w, w.bob), 1)
    await verified(w.database)
  })

  it('answers 503 S001 for a COMMIT whose answer never came, and the retry with its key gets the committed answer', async () => {
    const w = await frozenWorld(SHORT)
    // The journal's sequencer commits on its own after other commits: once it has positioned and
    // signed what there is, it stays idle, so the next COMMIT through the proxy is the transfer's.
    await journalCovered(w.database.db)
    w.proxy.freezeAfterNextCommit()
    const lost = await send(w, 'commit-lost')
    expectUnavailable(lost)
    w.proxy.thaw()
    assert.equal((await readiness(w.app, 200)).statusCode, 200)
    const retried = await send(w, 'commit-lost')
    assert.equal(retried.statusCode, 201, retried.body)
    assert.equal(retried.headers['idempotent-replayed'], 'true', 'the first attempt had committed: its answer, not a second transfer')
    assert.equal(await holding(w, w.alice), 99)
    assert.equal(await holding(w, w.bob), 1)
    await verified(w.database)
  })

  it('lets a repeat past the lease run while the first attempt is stuck: one transfer, both answered with it', async () => {
    const directUrl = await createDatabase(adminUrl)
    const w = await world(
      directUrl,
      directUrl,
      { lockTimeoutMs: 60_000, statementTimeoutMs: 60_000, queryTimeoutMs: 65_000 },
      {
        IDEMPOTENCY_LEASE_MS: '300',
      },
    )
    // Another session holds alice's wallet turn, so the first attempt waits on it.
    const holder = new pg.Client({ connectionString: directUrl })
    await holder.connect()
    cleanups.push(() => holder.end())
    await holder.query('begin')
    await holder.query('select pg_advisory_xact_lock($1)', [w.alice.walletId])
    const first = send(w, 'stuck')
    for (let waiting = 0; waiting === 0; await sleep(20)) {
      const { rows } = await holder.query<{ count: number }>(
        `select count(*)::int as count from pg_locks where locktype = 'advisory' and not granted and database = (select oid from pg_database where datname = current_database())`,
      )
      waiting = rows[0].count
    }
    // The first attempt holds its lease from before it waited; once that has passed, a repeat runs.
    await sleep(400)
    const repeat = send(w, 'stuck')
    await holder.query('rollback')
    const [one, two] = await Promise.all([first, repeat])
    assert.equal(one.statusCode, 201, one.body)
    assert.equal(two.statusCode, 201, two.body)
    assert.equal(one.json().id, two.json().id)
    assert.equal(two.headers['idempotent-replayed'], 'true')
    assert.equal(await holding(w, w.alice), 99)
    await verified(w.database)
  })

  it('reports not ready while commits wait for a synchronous standby that is gone, and bounds those commits', async () => {
    // Its own server: the standby setting is server-wide.
    const server = await startPostgres({ name: 'coffer-sync', flags: ['-c', 'max_connections=40', '-c', 'shared_buffers=32MB'] })
    cleanups.push(() => server.stop())
    const directUrl = await createDatabase(server.url)
    const w = await world(directUrl, directUrl, SHORT)
    assert.equal((await readiness(w.app, 200)).statusCode, 200)
    await runStatement(server.url, `alter system set synchronous_standby_names = 'gone'`)
    await runStatement(server.url, 'select pg_reload_conf()')
    expectUnavailable(await readiness(w.app, 503))
    // The COMMIT waits for the standby: the request is answered all the same.
    expectUnavailable(await send(w, 'sync-lost'))
    await runStatement(server.url, 'alter system reset synchronous_standby_names')
    await runStatement(server.url, 'select pg_reload_conf()')
    assert.equal((await readiness(w.app, 200)).statusCode, 200)
    // The commit had been written locally and shows once the wait ends: the retry gets its answer.
    const retried = await send(w, 'sync-lost')
    assert.equal(retried.statusCode, 201, retried.body)
    assert.equal(retried.headers['idempotent-replayed'], 'true')
    assert.equal(await holding(w, w.alice), 99)
    await verified(w.database)
  })
})
