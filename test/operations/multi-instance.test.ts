import assert from 'node:assert/strict'
import crypto from 'node:crypto'
import http from 'node:http'
import type net from 'node:net'
import { after, before, describe, it } from 'node:test'
import type { FastifyInstance } from 'fastify'
import { Webhook } from 'standardwebhooks'
import { buildApp } from '../../src/app.ts'
import { loadConfig } from '../../src/config.ts'
import { openPostgres, type Database } from '../../src/db/database.ts'
import { migrateToLatest } from '../../src/db/migrate.ts'
import { prepareWebhookSecrets } from '../../src/events/webhook-secrets.ts'
import { allEvents } from '../helpers/events.ts'
import { hashToken } from '../../src/http/tokens.ts'
import { verifyLedger } from '../../src/ledger/verify.ts'
import { ADMIN_KEY, STORAGE } from '../helpers/app.ts'
import { createUser, type TestUser } from '../helpers/factories.ts'
import { createDatabase } from '../../scripts/lib/postgres.ts'
import { startReceiver, waitUntil, type Receiver } from '../helpers/receiver.ts'

/**
 * Several instances: three service instances, each with its own connection pool, event
 * poller and webhook worker, on one PostgreSQL database. Load is spread across them, overdrafts
 * race across them, and every event reaches the webhooks and the event streams of any instance.
 */

const INSTANCES = 3
const ORIGIN_LIMIT = 3
const SHARED_SECRETS_KEY = crypto.randomBytes(32).toString('base64')
const admin = { authorization: `Bearer ${ADMIN_KEY}` }

interface Instance {
  app: FastifyInstance
  database: Database
  port: number
}

describe('three instances on one PostgreSQL database', { skip: STORAGE !== 'postgres' && 'PostgreSQL only' }, () => {
  const instances: Instance[] = []
  let url: string

  before(async () => {
    const adminUrl = process.env.TEST_PG_ADMIN_URL
    if (!adminUrl) throw new Error('TEST_PG_ADMIN_URL is not set: run with `npm run test:pg`')
    url = await createDatabase(adminUrl)
    for (let i = 0; i < INSTANCES; i++) {
      const database = openPostgres(url, 10)
      // Each instance migrates at start, as `coffer serve` does; the migrator's lock lets one win.
      await migrateToLatest(database.db)
      const config = loadConfig({
        DATABASE_URL: url,
        ADMIN_API_KEY: ADMIN_KEY,
        LOG_LEVEL: process.env.LOG_LEVEL ?? 'silent',
        AUTH_RATE_LIMIT: '0',
        WEBHOOK_ALLOW_PRIVATE: 'true',
        WEBHOOK_RETRY_SCHEDULE: '1,1,1,1,1',
        // Every receiver here is one origin: at most 3 attempts to it at once, over all instances.
        WEBHOOK_ORIGIN_CONCURRENCY: String(ORIGIN_LIMIT),
        // Several instances share the secrets key by config.
        SECRETS_KEY: SHARED_SECRETS_KEY,
      })
      const app = await buildApp({
        config,
        database,
        adminKeyHash: hashToken(ADMIN_KEY),
        secretsKey: await prepareWebhookSecrets(database.db, config),
      })
      await app.listen({ port: 0, host: '127.0.0.1' })
      instances.push({ app, database, port: (app.server.address() as net.AddressInfo).port })
    }
  })

  after(async () => {
    for (const instance of instances) await instance.app.close()
    const report = instances.length > 0 ? await verifyLedger(instances[0].database.db) : undefined
    for (const instance of instances) await instance.database.close()
    if (report && !report.ok) throw new Error(`ledger verification failed:\n${report.problems.join('\n')}`)
  })

  /** The instance for request `n`: round robin, as a balancer would. */
  const on = (n: number) => instances[n % INSTANCES].app

  async function asset(name: string): Promise<number> {
    const created = await on(0).inject({ method: 'POST', url: '/assets', headers: admin, payload: { name, value: 1 } })
    assert.equal(created.statusCode, 201, created.body)
    return created.json().id
  }

  async function fund(user: TestUser, assetId: number, quantity: number): Promise<void> {
    const issued = await on(user.id).inject({
      method: 'POST',
      url: `/wallets/${user.walletId}/assets`,
      headers: admin,
      payload: { id: assetId, quantity },
    })
    assert.equal(issued.statusCode, 201, issued.body)
  }

  async function held(user: TestUser, name: string, instance = 0): Promise<number> {
    const response = await on(instance).inject({ method: 'GET', url: '/wallet/assets', headers: user.auth })
    return (
      (response.json() as { asset: { name: string }; quantity: number }[]).find((holding) => holding.asset.name === name)?.quantity ?? 0
    )
  }

  /** Runs `count` jobs with at most `width` at once. */
  async function pool(count: number, width: number, job: (n: number) => Promise<void>): Promise<void> {
    let next = 0
    await Promise.all(
      Array.from({ length: width }, async () => {
        while (next < count) await job(next++)
      }),
    )
  }

  it('spreads a load of transfers over three instances and keeps every total exact', async () => {
    const users = await Promise.all(Array.from({ length: 8 }, () => createUser(on(0))))
    const coin = await asset('coin')
    for (const user of users) await fund(user, coin, 1000)
    const expected = new Map(users.map((user) => [user.id, 1000]))
    const transfers = 300
    await pool(transfers, 24, async (n) => {
      const from = users[n % users.length]
      const to = users[(n + 1 + (n % (users.length - 1))) % users.length]
      const quantity = 1 + (n % 5)
      const response = await on(n).inject({
        method: 'POST',
        url: '/wallet/transactions',
        headers: from.auth,
        payload: { recipient: to.username, memo: `spread #${n}`, assets: { coin: quantity } },
      })
      assert.equal(response.statusCode, 201, response.body)
      expected.set(from.id, (expected.get(from.id) ?? 0) - quantity)
      expected.set(to.id, (expected.get(to.id) ?? 0) + quantity)
    })
    for (const [index, user] of users.entries()) assert.equal(await held(user, 'coin', index), expected.get(user.id), user.username)
    const rows = await instances[1].database.db.selectFrom('transactions').select('memo').where('memo', 'like', 'spread #%').execute()
    assert.equal(rows.length, transfers)
    assert.equal(new Set(rows.map((row) => row.memo)).size, transfers, 'a transfer was recorded twice')
  })

  it('refuses every overdraft racing across instances: exactly what the wallet holds moves', async () => {
    const [payer, payee] = await Promise.all([createUser(on(0)), createUser(on(1))])
    const race = await asset('race')
    await fund(payer, race, 100)
    // 60 requests of 5 against 100 units, all at once, 20 to each instance.
    const answers = await Promise.all(
      Array.from({ length: 60 }, (_, n) =>
        on(n).inject({
          method: 'POST',
          url: '/wallet/transactions',
          headers: payer.auth,
          payload: { recipient: payee.username, assets: { race: 5 } },
        }),
      ),
    )
    const statuses = answers.map((answer) => (answer.statusCode === 201 ? '201' : `${answer.statusCode} ${answer.json().code}`))
    assert.equal(statuses.filter((status) => status === '201').length, 20, statuses.join(', '))
    assert.equal(statuses.filter((status) => status === '400 I002').length, 40, statuses.join(', '))
    assert.equal(await held(payer, 'race', 1), 0)
    assert.equal(await held(payee, 'race', 2), 100)
  })

  it('moves all or nothing of a two-asset transfer racing across instances', async () => {
    const [payer, payee] = await Promise.all([createUser(on(0)), createUser(on(1))])
    const [red, blue] = [await asset('red'), await asset('blue')]
    await fund(payer, red, 50)
    await fund(payer, blue, 30)
    // Each asks 5 red and 5 blue: blue runs out after 6, and then no red may move either.
    const answers = await Promise.all(
      Array.from({ length: 30 }, (_, n) =>
        on(n).inject({
          method: 'POST',
          url: '/wallet/transactions',
          headers: payer.auth,
          payload: { recipient: payee.username, assets: { red: 5, blue: 5 } },
        }),
      ),
    )
    assert.equal(answers.filter((answer) => answer.statusCode === 201).length, 6)
    assert.equal(await held(payer, 'red'), 20)
    assert.equal(await held(payer, 'blue'), 0)
    assert.equal(await held(payee, 'red'), 30)
    assert.equal(await held(payee, 'blue'), 30)
  })

  it('honours one Idempotency-Key sent to every instance at once: one transfer, the same answer', async () => {
    const [payer, payee] = await Promise.all([createUser(on(0)), createUser(on(1))])
    const idem = await asset('idem')
    await fund(payer, idem, 10)
    const answers = await Promise.all(
      Array.from({ length: 9 }, (_, n) =>
        on(n).inject({
          method: 'POST',
          url: '/wallet/transactions',
          headers: { ...payer.auth, 'idempotency-key': 'one-key-many-instances' },
          payload: { recipient: payee.username, assets: { idem: 3 } },
        }),
      ),
    )
    const done = answers.filter((answer) => answer.statusCode === 201)
    // A retry that lands while the first is still running on the same instance may get G004.
    for (const answer of answers)
      assert.ok(answer.statusCode === 201 || (answer.statusCode === 409 && answer.json().code === 'G004'), answer.body)
    assert.ok(done.length >= 1)
    assert.equal(new Set(done.map((answer) => answer.json().id)).size, 1, 'different transactions for one key')
    assert.equal(await held(payer, 'idem'), 7)
    assert.equal(await held(payee, 'idem'), 3)
  })

  describe('events', () => {
    let receiver: Receiver

    before(async () => {
      receiver = await startReceiver()
    })
    after(async () => {
      await receiver.close()
    })

    it('delivers a webhook for every event, whichever instance wrote it, signed with the wallet secret', async () => {
      const users = await Promise.all(Array.from({ length: 4 }, () => createUser(on(0))))
      const hook = await asset('hook')
      const secrets = new Map<number, string>()
      for (const [index, user] of users.entries()) {
        const set = await on(index).inject({
          method: 'PUT',
          url: '/wallet/webhook',
          headers: user.auth,
          payload: { webhook: `${receiver.url}/wallet/${user.walletId}` },
        })
        assert.equal(set.statusCode, 200, set.body)
        secrets.set(user.walletId, set.json().secret)
        await fund(user, hook, 100)
      }
      await pool(90, 12, async (n) => {
        const from = users[n % 4]
        const to = users[(n + 1 + (n % 3)) % 4]
        const response = await on(n).inject({
          method: 'POST',
          url: '/wallet/transactions',
          headers: from.auth,
          payload: { recipient: to.username, memo: `hook #${n}`, assets: { hook: 1 } },
        })
        assert.equal(response.statusCode, 201, response.body)
      })
      const walletIds = users.map((user) => user.walletId)
      const events = (await allEvents(instances[2].database.db)).filter((event) => walletIds.includes(event.wallet_id))
      // 4 issuances (one event each) and 90 transfers (two each).
      assert.equal(events.length, 4 + 90 * 2)
      const wanted = new Set(events.map((event) => JSON.parse(event.payload).id as string))
      const delivered = () => new Set(receiver.requests.map((request) => String(request.headers['webhook-id'])))
      await waitUntil(
        () => [...wanted].every((id) => delivered().has(id)),
        30_000,
        `all ${wanted.size} events delivered (got ${delivered().size})`,
      )
      for (const request of receiver.requests) {
        const walletId = Number(/\/wallet\/(\d+)$/.exec(request.path)?.[1])
        const headers = {
          'webhook-id': String(request.headers['webhook-id']),
          'webhook-timestamp': String(request.headers['webhook-timestamp']),
          'webhook-signature': String(request.headers['webhook-signature']),
        }
        const payload = new Webhook(secrets.get(walletId) as string).verify(request.body, headers) as {
          id: string
          data: { sending_wallet_id: number; receiving_wallet_id: number }
        }
        assert.equal(payload.id, headers['webhook-id'])
        assert.ok(
          payload.data.sending_wallet_id === walletId || payload.data.receiving_wallet_id === walletId,
          'an event went to a webhook of another wallet',
        )
      }
      const transactions = await instances[0].database.db
        .selectFrom('transactions')
        .select('memo')
        .where('memo', 'like', 'hook #%')
        .execute()
      assert.equal(new Set(transactions.map((row) => row.memo)).size, 90)
      assert.equal(transactions.length, 90)
    })

    it('never has more attempts in flight to one origin than its limit, counted over every instance', async () => {
      const slow = await startReceiver(() => ({ status: 200, delayMs: 30 }))
      try {
        const users = await Promise.all(Array.from({ length: 6 }, () => createUser(on(0))))
        const limited = await asset('limited')
        for (const [index, user] of users.entries()) {
          const set = await on(index).inject({
            method: 'PUT',
            url: '/wallet/webhook',
            headers: user.auth,
            payload: { webhook: `${slow.url}/limited/${user.walletId}` },
          })
          assert.equal(set.statusCode, 200, set.body)
          await fund(user, limited, 100)
        }
        await pool(60, 12, async (n) => {
          const response = await on(n).inject({
            method: 'POST',
            url: '/wallet/transactions',
            headers: users[n % 6].auth,
            payload: { recipient: users[(n + 1) % 6].username, assets: { limited: 1 } },
          })
          assert.equal(response.statusCode, 201, response.body)
        })
        const walletIds = users.map((user) => user.walletId)
        const events = (await allEvents(instances[0].database.db)).filter((event) => walletIds.includes(event.wallet_id))
        assert.equal(events.length, 6 + 60 * 2)
        const delivered = () => new Set(slow.requests.map((request) => String(request.headers['webhook-id'])))
        await waitUntil(
          () => events.every((event) => delivered().has(JSON.parse(event.payload).id)),
          30_000,
          `all ${events.length} events delivered (got ${delivered().size})`,
        )
        // The receiver counted the requests open at once: never more than the origin's limit.
        assert.ok(slow.maxOpen() <= ORIGIN_LIMIT, `${slow.maxOpen()} requests at once to one origin`)
      } finally {
        await slow.close()
      }
    })

    /** Reads an SSE stream until `done(ids)` holds; returns the ids in order. */
    function readStream(
      port: number,
      token: string,
      lastEventId: number | undefined,
      done: (ids: number[]) => boolean,
      timeoutMs = 20_000,
    ): { ready: Promise<void>; ids: Promise<number[]> } {
      let markReady: () => void = () => {}
      const ready = new Promise<void>((resolve) => (markReady = resolve))
      const ids = new Promise<number[]>((resolve, reject) => {
        const seen: number[] = []
        const headers: Record<string, string> = { authorization: `Bearer ${token}`, accept: 'text/event-stream' }
        if (lastEventId !== undefined) headers['last-event-id'] = String(lastEventId)
        const request = http.get({ host: '127.0.0.1', port, path: '/wallet/events', headers, agent: false }, (response) => {
          if (response.statusCode !== 200) return reject(new Error(`stream answered ${response.statusCode}`))
          let buffer = ''
          const timer = setTimeout(() => {
            request.destroy()
            reject(new Error(`stream timed out with ${seen.length} events`))
          }, timeoutMs)
          response.on('data', (chunk: Buffer) => {
            buffer += chunk.toString()
            if (buffer.includes(': connected')) markReady()
            let end: number
            while ((end = buffer.indexOf('\n\n')) >= 0) {
              const frame = buffer.slice(0, end)
              buffer = buffer.slice(end + 2)
              const id = /^id: (\d+)$/m.exec(frame)?.[1]
              if (id) seen.push(Number(id))
            }
            if (done(seen)) {
              clearTimeout(timer)
              request.destroy()
              resolve(seen)
            }
          })
        })
        request.on('error', () => {})
      })
      return { ready, ids }
    }

    it('streams every event of a wallet on one instance while other instances write them, and resumes on a third', async () => {
      const [watched, peer] = await Promise.all([createUser(on(0)), createUser(on(1))])
      const sse = await asset('sse')
      await fund(watched, sse, 1000)
      await fund(peer, sse, 1000)
      const key = await on(0).inject({ method: 'POST', url: '/wallet/sessions', headers: watched.auth, payload: { name: 'stream' } })
      const db = instances[0].database.db
      const start = Math.max(0, ...(await allEvents(db)).filter((event) => event.wallet_id === watched.walletId).map((event) => event.id))
      const total = 60
      const live = readStream(instances[0].port, key.json().token, start, (ids) => ids.length >= total)
      await live.ready
      // Transfers in both directions, written by the other two instances only.
      await pool(total, 8, async (n) => {
        const [from, to] = n % 2 === 0 ? [watched, peer] : [peer, watched]
        const response = await instances[1 + (n % 2)].app.inject({
          method: 'POST',
          url: '/wallet/transactions',
          headers: from.auth,
          payload: { recipient: to.username, assets: { sse: 1 } },
        })
        assert.equal(response.statusCode, 201, response.body)
      })
      const stored = (await allEvents(db))
        .filter((event) => event.wallet_id === watched.walletId && event.id > start)
        .map((event) => event.id)
      assert.equal(stored.length, total)
      const streamed = await live.ids
      assert.deepEqual(streamed, stored, 'the stream missed, repeated or reordered events')
      // A client that saw only the first half resumes on the third instance and gets the rest.
      const half = stored[total / 2 - 1]
      const resumed = await readStream(instances[2].port, watched.token, half, (ids) => ids.length >= total / 2).ids
      assert.deepEqual(resumed, stored.slice(total / 2))
    })
  })
})
