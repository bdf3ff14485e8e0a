import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import type { FastifyInstance } from 'fastify'
import pg from 'pg'
import { buildPeerApp, buildSameStoreApp, buildTestApp, expectError, STORAGE, type TestApp } from '../helpers/app.ts'
import { createAsset, createUser, createWalletKey, issue, transfer, type TestUser } from '../helpers/factories.ts'
import { allEvents } from '../helpers/events.ts'
import { startReceiver, waitUntil, type Receiver } from '../helpers/receiver.ts'
import { drawTransactionIds } from '../../src/db/ids.ts'
import { INTERRUPTED } from '../../src/events/delivery.sender.ts'
import { readEventsAfter } from '../../src/events/events.repository.ts'

interface Frame {
  id?: string
  event?: string
  data: string
}

interface Stream {
  status: number
  headers: Headers
  frames: Frame[]
  comments: string[]
  ended: () => boolean
  /** Resolves with the frames once at least `count` arrived. */
  waitFor(count: number, timeoutMs?: number): Promise<Frame[]>
  close(): void
}

/** A minimal EventSource over fetch, so the test can send headers and watch the raw stream. */
async function openStream(base: string, headers: Record<string, string>, path = '/wallet/events'): Promise<Stream> {
  const controller = new AbortController()
  const response = await fetch(`${base}${path}`, { headers, signal: controller.signal })
  const frames: Frame[] = []
  const comments: string[] = []
  let ended = false
  let buffer = ''
  const reader = response.body?.getReader()
  const decoder = new TextDecoder()
  void (async () => {
    try {
      for (;;) {
        const chunk = await reader?.read()
        if (!chunk || chunk.done) break
        buffer += decoder.decode(chunk.value, { stream: true })
        for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n')) {
          const block = buffer.slice(0, end)
          buffer = buffer.slice(end + 2)
          const frame: Frame = { data: '' }
          const data: string[] = []
          for (const line of block.split('\n')) {
            if (line.startsWith(':')) comments.push(line.slice(1).trim())
            else if (line.startsWith('id: ')) frame.id = line.slice(4)
            else if (line.startsWith('event: ')) frame.event = line.slice(7)
            else if (line.startsWith('data: ')) data.push(line.slice(6))
          }
          if (data.length > 0) frames.push({ ...frame, data: data.join('\n') })
        }
      }
    } catch {
      // aborted by close()
    }
    ended = true
  })()
  return {
    status: response.status,
    headers: response.headers,
    frames,
    comments,
    ended: () => ended,
    waitFor: (count, timeoutMs = 5_000) => waitUntil(() => (frames.length >= count ? frames : undefined), timeoutMs, `${count} SSE events`),
    close: () => controller.abort(),
  }
}

async function listen(app: FastifyInstance): Promise<string> {
  return app.listen({ port: 0, host: '127.0.0.1' })
}

/** Another session of `user` (another device), through `app`: its id and Bearer headers. */
async function signInAgain(app: FastifyInstance, user: TestUser): Promise<{ id: number; auth: Record<string, string> }> {
  const login = await app.inject({
    method: 'POST',
    url: `/users/${user.username}/sessions`,
    payload: { password: user.password, return_token: true },
  })
  assert.equal(login.statusCode, 201, login.body)
  const { id, token } = login.json()
  return { id: id as number, auth: { authorization: `Bearer ${token}` } }
}

/** The asset every stream test moves, and `quantity` of it in each user's wallet. */
async function setUpGold(t: TestApp, ...users: TestUser[]) {
  const gold = await createAsset(t, { name: 'gold' })
  for (const user of users) await issue(t, user.walletId, gold.id, 1_000)
}

describe('GET /wallet/events', () => {
  let t: TestApp
  let base: string
  let alice: TestUser
  let bob: TestUser
  let carol: TestUser
  const streams: Stream[] = []
  const open = async (headers: Record<string, string>, path?: string) => {
    const stream = await openStream(base, headers, path)
    streams.push(stream)
    return stream
  }
  before(async () => {
    t = await buildTestApp()
    base = await listen(t.app)
    alice = await createUser(t.app)
    bob = await createUser(t.app)
    carol = await createUser(t.app)
    await setUpGold(t, alice)
  })
  after(async () => {
    for (const stream of streams) stream.close()
    await t.close()
  })

  it('streams each side its own event as the transfer commits', async () => {
    const aliceStream = await open(alice.auth)
    const bobStream = await open(bob.auth)
    const carolStream = await open(carol.auth)
    assert.equal(bobStream.status, 200)
    assert.match(bobStream.headers.get('content-type') ?? '', /^text\/event-stream/)
    assert.ok(bobStream.headers.get('x-request-id'))
    await waitUntil(() => bobStream.comments.includes('connected') && aliceStream.comments.includes('connected'))

    const transaction = await transfer(t, alice, bob.username, { gold: 5 })
    const [received] = await bobStream.waitFor(1)
    assert.equal(received.event, 'transaction.received')
    assert.match(received.id ?? '', /^[1-9][0-9]*$/)
    const payload = JSON.parse(received.data)
    assert.equal(payload.type, 'transaction.received')
    assert.match(payload.id, /^evt_/)
    assert.equal(payload.created_at, transaction.created_at)
    assert.deepEqual(payload.data, transaction)

    const [sent] = await aliceStream.waitFor(1)
    assert.equal(sent.event, 'transaction.sent')
    assert.deepEqual(JSON.parse(sent.data).data, transaction)
    assert.notEqual(sent.id, received.id)

    await new Promise((resolve) => setTimeout(resolve, 300))
    assert.equal(carolStream.frames.length, 0)
    assert.equal(bobStream.frames.length, 1)
  })

  it('resumes after Last-Event-ID with what the client missed, in order, then goes live', async () => {
    const key = await t.app.inject({ method: 'POST', url: '/wallet/sessions', headers: bob.auth, payload: { name: 'feed' } })
    assert.equal(key.statusCode, 201, key.body)
    const keyAuth = { authorization: `Bearer ${key.json().token}` }
    const first = await open(keyAuth)
    await waitUntil(() => first.comments.includes('connected'))
    await transfer(t, alice, bob.username, { gold: 1 })
    const [seen] = await first.waitFor(1)
    first.close()
    await waitUntil(() => first.ended())

    const missed = [await transfer(t, alice, bob.username, { gold: 2 }), await transfer(t, alice, bob.username, { gold: 3 })]
    const resumed = await open({ ...keyAuth, 'last-event-id': seen.id as string })
    const backlog = await resumed.waitFor(2)
    assert.deepEqual(
      backlog.map((frame) => JSON.parse(frame.data).data),
      missed,
    )
    assert.ok(Number(backlog[0].id) > Number(seen.id) && Number(backlog[1].id) > Number(backlog[0].id))
    const live = await transfer(t, alice, bob.username, { gold: 4 })
    const frames = await resumed.waitFor(3)
    assert.deepEqual(JSON.parse(frames[2].data).data, live)
    assert.equal(frames.length, 3)

    // The query parameter does the same for clients that cannot set headers.
    const viaQuery = await open(keyAuth, `/wallet/events?last_event_id=${seen.id}`)
    assert.deepEqual(
      (await viaQuery.waitFor(3)).map((frame) => frame.id),
      frames.map((frame) => frame.id),
    )
  })

  it('replays the whole history from Last-Event-ID 0', async () => {
    const stream = await open({ ...bob.auth, 'last-event-id': '0' })
    const frames = await stream.waitFor(5)
    assert.equal(frames.length, 5)
    assert.ok(frames.every((frame) => frame.event === 'transaction.received'))
  })

  it('refuses missing credentials, admin keys and a malformed Last-Event-ID', async () => {
    expectError(await t.app.inject({ method: 'GET', url: '/wallet/events' }), 401, 'A000')
    expectError(await t.app.inject({ method: 'GET', url: '/wallet/events', headers: t.admin }), 401, 'A001')
    expectError(await t.app.inject({ method: 'GET', url: '/wallet/events', headers: { ...bob.auth, 'last-event-id': 'abc' } }), 400, 'G000')
  })

  it('refuses a session idle past SESSION_IDLE_DAYS, and ends its open stream', async () => {
    const idle = await createUser(t.app)
    const session = (await t.app.inject({ method: 'GET', url: '/user/session', headers: idle.auth })).json()
    const stream = await open(idle.auth)
    await waitUntil(() => stream.comments.includes('connected'))
    const longAgo = new Date(Date.now() - (t.config.sessionIdleDays + 1) * 86_400_000).toISOString()
    await t.database.db.updateTable('user_sessions').set({ last_used_at: longAgo }).where('id', '=', session.id).execute()
    expectError(await t.app.inject({ method: 'GET', url: '/wallet/events', headers: idle.auth }), 401, 'A001')
    // Nothing was announced: the stream's periodic check of its credential ends it.
    await waitUntil(() => stream.ended(), 5_000, "the idle session's stream to end")
  })

  it('ends the streams of sessions and keys ended through another instance on the same database', async () => {
    const other = await buildSameStoreApp(t)
    try {
      const otherBase = await listen(other.app)
      const erin = await createUser(t.app)
      const phone = (await signInAgain(other.app, erin)).auth
      const key = await createWalletKey(t, erin.auth)
      const [phoneStream, keyStream, bobStream] = [
        await openStream(otherBase, phone),
        await openStream(otherBase, key.auth),
        await openStream(otherBase, bob.auth),
      ]
      streams.push(phoneStream, keyStream, bobStream)
      await waitUntil(() => [phoneStream, keyStream, bobStream].every((stream) => stream.comments.includes('connected')))
      // Each would otherwise run until its client left: nothing reaches the other instance but the database.
      assert.equal((await t.app.inject({ method: 'DELETE', url: `/wallet/sessions/${key.id}`, headers: erin.auth })).statusCode, 204)
      await waitUntil(() => keyStream.ended(), 5_000, "the revoked key's stream to end")
      assert.equal((await t.app.inject({ method: 'DELETE', url: '/user/sessions', headers: erin.auth })).statusCode, 204)
      await waitUntil(() => phoneStream.ended(), 5_000, "the signed-out phone's stream to end")
      assert.equal(bobStream.ended(), false, "another user's stream goes on")
      await transfer(t, alice, bob.username, { gold: 1 })
      await waitUntil(() => bobStream.frames.length > 0)
    } finally {
      await other.close()
    }
  })

  it('ends the streams of sessions ended here at once: one session, the others on a password change, all of them', async () => {
    const dana = await createUser(t.app)
    const [laptop, phone, tablet] = [await signInAgain(t.app, dana), await signInAgain(t.app, dana), await signInAgain(t.app, dana)]
    const [laptopStream, phoneStream, tabletStream, danaStream, bobStream] = [
      await open(laptop.auth),
      await open(phone.auth),
      await open(tablet.auth),
      await open(dana.auth),
      await open(bob.auth),
    ]
    const connected = [laptopStream, phoneStream, tabletStream, danaStream, bobStream]
    await waitUntil(() => connected.every((stream) => stream.comments.includes('connected')))
    // Each stream would otherwise run until its next keep-alive check, 15 s after it opened.
    const ends = (stream: Stream, what: string) => waitUntil(() => stream.ended(), 5_000, `${what}'s stream to end`)

    assert.equal((await t.app.inject({ method: 'DELETE', url: `/user/sessions/${tablet.id}`, headers: laptop.auth })).statusCode, 204)
    await ends(tabletStream, 'the ended session')
    const password = await t.app.inject({
      method: 'PUT',
      url: '/user/password',
      headers: laptop.auth,
      payload: { password: 'a new horse' },
    })
    assert.equal(password.statusCode, 200, password.body)
    await Promise.all([ends(phoneStream, 'the phone'), ends(danaStream, 'the first session')])
    assert.equal(laptopStream.ended(), false, 'the session that changed the password keeps its stream')

    assert.equal((await t.app.inject({ method: 'DELETE', url: '/user/sessions', headers: laptop.auth })).statusCode, 204)
    await ends(laptopStream, 'the last session')
    expectError(await t.app.inject({ method: 'GET', url: '/wallet/events', headers: laptop.auth }), 401, 'A001')
    assert.equal(bobStream.ended(), false, "another user's stream goes on")
    // And it still delivers.
    await transfer(t, alice, bob.username, { gold: 1 })
    await waitUntil(() => bobStream.frames.length > 0)
  })

  it('counts a stream its client leaves as a request, like any other', async () => {
    const served = async () => {
      const metrics = (await t.app.inject({ method: 'GET', url: '/metrics', headers: t.admin })).body
      const line = metrics
        .split('\n')
        .find((entry) => entry.startsWith('coffer_http_requests_total{method="GET",route="/wallet/events",status="200"}'))
      return line ? Number(line.split(' ').pop()) : 0
    }
    const before = await served()
    const stream = await open(carol.auth)
    await waitUntil(() => stream.comments.includes('connected'))
    stream.close()
    await waitUntil(
      async () => ((await served()) === before + 1 ? true : undefined),
      10_000,
      `the stream to be counted (${before} before, ${await served()} now)`,
    )
  })

  it('answers HEAD, which would hold a stream open with nothing to send, with 404 G006', async () => {
    const response = await t.app.inject({ method: 'HEAD', url: '/wallet/events', headers: bob.auth })
    assert.equal(response.statusCode, 404)
  })

  it('ends open streams when the service shuts down', async () => {
    const other = await buildTestApp()
    const otherBase = await listen(other.app)
    const user = await createUser(other.app)
    const stream = await openStream(otherBase, user.auth)
    await waitUntil(() => stream.comments.includes('connected'))
    const started = Date.now()
    await other.close()
    assert.ok(Date.now() - started < 3_000, `close took ${Date.now() - started} ms`)
    await waitUntil(() => stream.ended(), 10_000, 'the stream to end')
  })
})

describe('the feed of every wallet', () => {
  let t: TestApp
  let alice: TestUser
  let bob: TestUser
  before(async () => {
    t = await buildTestApp()
    alice = await createUser(t.app)
    bob = await createUser(t.app)
    await setUpGold(t, alice)
  })
  after(() => t.close())

  it("reads the unused id of a stored event's pair as a gap, so that the feed passes it at once", async () => {
    // An event of one wallet, as a schedule's run or a monitor's crossing writes it: 2 × a slot, the slot's + 1 never used.
    const [slot] = await drawTransactionIds(t.database.db, 1)
    await t.database.db
      .insertInto('events')
      .values({
        id: 2 * slot,
        event_id: 'evt_pair',
        wallet_id: bob.walletId,
        type: 'balance.crossed',
        transaction_id: null,
        created_at: new Date().toISOString(),
        body: '{}',
      })
      .execute()
    const later = await transfer(t, alice, bob.username, { gold: 1 })
    const { rows } = await readEventsAfter(t.database.db, 2 * slot - 1, 10)
    assert.deepEqual(
      rows.map((row) => [row.id, row.gap ?? false]),
      [
        [2 * slot, false],
        [2 * slot + 1, true],
        [2 * later.id, false],
        [2 * later.id + 1, false],
      ],
    )
  })
})

describe('several instances on one PostgreSQL database', { skip: STORAGE !== 'postgres' && 'PostgreSQL only' }, () => {
  let t: TestApp
  let peer: Awaited<ReturnType<typeof buildPeerApp>>
  let receiver: Receiver
  let alice: TestUser
  let bob: TestUser
  before(async () => {
    // A fixed limit per origin (floor = cap): the shutdown test below needs both instances to hold
    // attempts to a receiver that hangs, which an adaptive limit would keep at its floor.
    t = await buildTestApp({
      WEBHOOK_RETRY_SCHEDULE: '0.1,0.1,0.1,0.1,0.1',
      WEBHOOK_TIMEOUT_MS: '600',
      WEBHOOK_ORIGIN_CONCURRENCY: '64',
      WEBHOOK_ORIGIN_MIN_CONCURRENCY: '64',
    })
    peer = await buildPeerApp(t, { webhookTimeoutMs: 1_500 })
    receiver = await startReceiver()
    alice = await createUser(t.app)
    bob = await createUser(peer.app)
    await setUpGold(t, alice, bob)
  })
  after(async () => {
    await peer.close()
    await t.close()
    await receiver.close()
  })

  /** The public id of every event of the store, by its sequence number (what a delivery's `event_id` holds). */
  async function publicIds(): Promise<Map<number, string>> {
    return new Map((await allEvents(t.database.db)).map((event) => [event.id, JSON.parse(event.payload).id as string]))
  }

  /** Every event id of the two wallets, from the outbox. */
  async function eventIds(): Promise<string[]> {
    const events = await allEvents(t.database.db)
    return events.filter((event) => [alice.walletId, bob.walletId].includes(event.wallet_id)).map((event) => JSON.parse(event.payload).id)
  }

  it('streams an event committed through one instance to a client of the other', async () => {
    const base = await listen(t.app)
    const stream = await openStream(base, alice.auth)
    try {
      await waitUntil(() => stream.comments.includes('connected'))
      const transaction = await transfer(peer, bob, alice.username, { gold: 2 })
      const [frame] = await stream.waitFor(1)
      assert.deepEqual(JSON.parse(frame.data).data, transaction)
    } finally {
      stream.close()
    }
  })

  it('never lets a stream skip an event that commits after a later one', async () => {
    const base = await listen(peer.app)
    const stream = await openStream(base, bob.auth)

    const client = new pg.Client({ connectionString: t.config.databaseUrl })
    await client.connect()
    try {
      await waitUntil(() => stream.comments.includes('connected'))
      // An event row as a hold's is written: its id from a slot of the transactions' ids, drawn in its transaction.
      const insertEvent = (eventId: string) =>
        client.query(
          `insert into events (id, event_id, wallet_id, type, created_at, body)
           values (2 * nextval('transactions_id_seq'), $1, $2, 'hold.created', $3, '{}') returning id`,
          [eventId, bob.walletId, new Date().toISOString()],
        )
      // A slow transaction takes the next event id but has not committed yet...
      await client.query('begin')
      await client.query('select pg_current_xact_id()')
      const slow = await insertEvent('evt_slow_commit')
      // ...while a transfer after it commits at once.
      const later = await transfer(t, alice, bob.username, { gold: 1 })
      await new Promise((resolve) => setTimeout(resolve, 500))
      assert.equal(stream.frames.length, 0, 'the later event went out before the earlier one was settled')
      await client.query('commit')
      const frames = await stream.waitFor(2)
      assert.equal(frames[0].id, String(slow.rows[0].id))
      assert.equal(JSON.parse(frames[0].data).id, 'evt_slow_commit')
      assert.deepEqual(JSON.parse(frames[1].data).data, later)

      // A transaction that rolls back leaves a gap, which is skipped once it is known to be empty.
      await client.query('begin')
      await client.query('select pg_current_xact_id()')
      await insertEvent('evt_rolled_back')
      const after = await transfer(t, alice, bob.username, { gold: 1 })
      await new Promise((resolve) => setTimeout(resolve, 300))
      assert.equal(stream.frames.length, 2)
      await client.query('rollback')
      const [, , next] = await stream.waitFor(3)
      assert.deepEqual(JSON.parse(next.data).data, after)
    } finally {
      stream.close()
      await client.end()
    }
  })

  it('shares the outbox: every event delivered, each taken by one instance, whichever instance committed it', async () => {
    const webhookIds = () => receiver.requests.map((request) => request.headers['webhook-id'] as string)
    const hook = async (user: TestUser, app: FastifyInstance) => {
      const response = await app.inject({
        method: 'PUT',
        url: '/wallet/webhook',
        headers: user.auth,
        payload: { webhook: `${receiver.url}/hook` },
      })
      assert.equal(response.statusCode, 200, response.body)
    }
    await hook(alice, t.app)
    await hook(bob, peer.app)
    for (let round = 0; round < 6; round++) {
      await Promise.all([
        transfer(t, alice, bob.username, { gold: 1 }),
        transfer(peer, bob, alice.username, { gold: 1 }),
        transfer(peer, alice, bob.username, { gold: 1 }),
        transfer(t, bob, alice.username, { gold: 1 }),
      ])
    }
    const expected = new Set(await eventIds())
    await waitUntil(() => new Set(webhookIds()).size >= 48, 10_000, 'every event')
    const db = t.database.db
    const deliveries = async () => {
      const ids = await publicIds()
      const rows = await db
        .selectFrom('webhook_deliveries')
        .select(['id', 'status', 'event_id'])
        .where('wallet_id', 'in', [alice.walletId, bob.walletId])
        .execute()
      return rows.map((row) => ({ ...row, event_id: ids.get(Number(row.event_id)) as string }))
    }
    // 24 transfers, two events each; the two earlier issuances happened before the webhooks were set.
    const delivered = await waitUntil(
      async () => {
        const rows = await deliveries()
        return rows.length === 48 && rows.every((row) => row.status === 'delivered') ? rows : undefined
      },
      10_000,
      'every delivery settled',
    )
    const ids = webhookIds()
    assert.equal(new Set(ids).size, 48)
    for (const id of ids) assert.ok(expected.has(id))
    // Delivery is at least once: an attempt not answered in time (a busy machine) is retried, and
    // the receiver may then see the event again. What must never happen is two instances taking
    // the same delivery: every request the receiver saw is a recorded attempt, and exactly one
    // attempt of each delivery was answered 2xx.
    const attempts = await db
      .selectFrom('webhook_attempts')
      .select(['delivery_id', 'status_code'])
      .where(
        'delivery_id',
        'in',
        delivered.map((row) => row.id),
      )
      .execute()
    for (const row of delivered) {
      const mine = attempts.filter((attempt) => attempt.delivery_id === row.id)
      const received = ids.filter((id) => id === row.event_id).length
      assert.ok(
        received >= 1 && received <= mine.length,
        `event ${row.event_id}: ${received} requests received, ${mine.length} attempts recorded`,
      )
      assert.equal(
        mine.filter((attempt) => attempt.status_code !== null && attempt.status_code < 300).length,
        1,
        `event ${row.event_id} answered 2xx once`,
      )
    }
  })

  it('loses nothing when an instance stops with deliveries in flight', async () => {
    receiver.requests.length = 0
    // Everything hangs at first, so both instances hold attempts when one of them stops.
    receiver.behave(() => ({ hang: true }))
    const before = new Set(await eventIds())
    for (let round = 0; round < 4; round++) {
      await Promise.all([transfer(t, alice, bob.username, { gold: 1 }), transfer(peer, bob, alice.username, { gold: 1 })])
    }
    const fresh = (await eventIds()).filter((id) => !before.has(id))
    assert.equal(fresh.length, 16)
    const ids = await publicIds()
    const freshIds = [...ids].filter(([, id]) => fresh.includes(id)).map(([number]) => number)
    // Each instance holds at most 4 attempts per wallet: 16 hanging requests means both are busy.
    await receiver.waitFor(16)
    // Whichever instance polls first may claim all 16; the other gets some once those time out
    // (600 ms) and are due again. Wait until the peer holds attempts, as its own /metrics shows.
    const peerInFlight = async () =>
      /^coffer_webhook_in_flight [1-9]/m.test((await peer.app.inject({ method: 'GET', url: '/metrics', headers: t.admin })).body)
    await waitUntil(peerInFlight, 10_000, 'the peer to hold attempts')
    receiver.behave(() => ({ status: 200 }))
    // The peer waits half its 1.5 s timeout, then gives its attempts back instead of finishing them.
    await peer.close()
    const rows = await waitUntil(
      async () => {
        const list = (
          await t.database.db
            .selectFrom('webhook_deliveries')
            .select(['event_id', 'status', 'attempts'])
            .where('event_id', 'in', freshIds)
            .execute()
        ).map((row) => ({ ...row, event_id: ids.get(Number(row.event_id)) as string }))
        return list.length === 16 && list.every((row) => row.status === 'delivered') ? list : undefined
      },
      10_000,
      'every delivery to be delivered after the instance stopped',
    )
    const seen = receiver.requests.map((request) => request.headers['webhook-id'] as string)
    for (const id of fresh) assert.ok(seen.includes(id), `${id} never reached the receiver`)
    // What the stopped instance cut off is in the attempt log (the receiver saw it), and was
    // redelivered at once rather than after a backoff.
    const attemptsOf = async (eventIds: number[], interruptedOnly: boolean) => {
      let query = t.database.db
        .selectFrom('webhook_attempts')
        .innerJoin('webhook_deliveries', 'webhook_deliveries.id', 'webhook_attempts.delivery_id')
        .select(['webhook_deliveries.event_id', 'webhook_attempts.status_code', 'webhook_attempts.error'])
        .where('webhook_deliveries.event_id', 'in', eventIds)
      if (interruptedOnly) query = query.where('webhook_attempts.error', '=', INTERRUPTED)
      return (await query.execute()).map((row) => ({ ...row, event_id: ids.get(Number(row.event_id)) as string }))
    }
    const interrupted = await attemptsOf(freshIds, true)
    assert.ok(interrupted.length > 0, 'no attempt was cut off by the stopping instance')
    const cut = new Set(interrupted.map((row) => row.event_id))
    const logs = await attemptsOf(
      freshIds.filter((number) => cut.has(ids.get(number) as string)),
      false,
    )
    for (const { event_id: id } of interrupted) {
      // Sent again after it was cut off, and every attempt counted. Twice, except on a machine so
      // busy that a 200 took longer than the timeout to be read: then that attempt timed out and
      // was retried (at least once), so more attempts, the others all timeouts.
      const log = logs.filter((attempt) => attempt.event_id === id)
      const sent = seen.filter((seenId) => seenId === id).length
      assert.ok(sent >= 2 && sent <= log.length, `${id} was sent ${sent} times, ${log.length} attempts recorded`)
      assert.equal(rows.find((row) => row.event_id === id)?.attempts, log.length, `${id} counts every attempt`)
      const others = log.filter((attempt) => attempt.error !== INTERRUPTED && !(attempt.status_code !== null && attempt.status_code < 300))
      for (const other of others) assert.match(other.error ?? '', /no answer within/, `${id}: ${JSON.stringify(log)}`)
      assert.equal(log.length - others.length, 2, `${id}: one attempt cut off, one answered 200: ${JSON.stringify(log)}`)
    }
    // Restart the peer for the after() hook.
    peer = await buildPeerApp(t)
  })
})
