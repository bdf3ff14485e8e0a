import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { readWalletEvents } from '../../src/events/events.repository.ts'
import type { Asset, Transaction } from '../../src/ledger/ledger.types.ts'
import type { Schedule } from '../../src/schedules/schedules.service.ts'
import { buildPeerApp, buildSameStoreApp, buildTestAppWithAsset, expectError, STORAGE, type TestApp } from '../helpers/app.ts'
import { createSchedule, createUser, fundedUser, type TestUser } from '../helpers/factories.ts'

const DAY = 86_400_000

/** Scheduled and recurring transfers through the HTTP API, on either storage. */
describe(`schedules (${STORAGE})`, () => {
  let t: TestApp
  let gold: Asset

  before(async () => ({ t, asset: gold } = await buildTestAppWithAsset('gold')))
  after(async () => t.close())

  const schedule = (from: TestUser, body: Record<string, unknown>) => createSchedule(t, from, body)

  async function read(user: TestUser, id: number, app = t.app): Promise<Schedule> {
    const response = await app.inject({ method: 'GET', url: `/wallet/schedules/${id}`, headers: user.auth })
    assert.equal(response.statusCode, 200, response.body)
    return response.json()
  }

  /** Waits for the runner until the schedule has run `runs` times (or gives up after a while, failing). */
  async function untilRuns(user: TestUser, id: number, runs: number, app = t.app): Promise<Schedule> {
    for (let attempt = 0; attempt < 300; attempt++) {
      const current = await read(user, id, app)
      if (
        current.runs >= runs &&
        (current.status !== 'active' || current.next_run_at === null || Date.parse(current.next_run_at) > Date.now())
      )
        return current
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
    throw new Error(`schedule ${id} did not reach ${runs} runs`)
  }

  async function runsOf(user: TestUser, id: number): Promise<Transaction[]> {
    const response = await t.app.inject({ method: 'GET', url: `/wallet/transactions?schedule_id=${id}&limit=100`, headers: user.auth })
    assert.equal(response.statusCode, 200, response.body)
    return response.json()
  }

  /** Moves a schedule's calendar back by `days`, as if the service had been down while it fell due. */
  async function backdate(id: number, days: number): Promise<void> {
    const row = await t.database.db
      .selectFrom('schedules')
      .select(['start_at', 'next_run_at'])
      .where('id', '=', id)
      .executeTakeFirstOrThrow()
    const shift = (iso: string | null) => (iso === null ? null : new Date(Date.parse(iso) - days * DAY).toISOString())
    await t.database.db
      .updateTable('schedules')
      .set({ start_at: shift(row.start_at) as string, next_run_at: shift(row.next_run_at) })
      .where('id', '=', id)
      .execute()
  }

  const soon = () => new Date(Date.now() + 200).toISOString()
  const later = (ms: number) => new Date(Date.now() + ms).toISOString()

  it('runs a one-off once as an ordinary transfer carrying schedule_id, then is finished', async () => {
    const alice = await fundedUser(t, [[gold, 100]])
    const bob = await createUser(t.app)
    const created = await schedule(alice, { recipient: bob.username, assets: { [gold.name]: 7 }, memo: 'allowance', start_at: soon() })
    assert.equal(created.status, 'active')
    assert.equal(created.every, null)
    assert.equal(created.count, null)
    assert.equal(created.time_zone, 'UTC')
    assert.equal(created.last_run, null)
    const done = await untilRuns(alice, created.id, 1)
    assert.equal(done.status, 'finished')
    assert.equal(done.runs, 1)
    assert.equal(done.failures, 0)
    assert.equal(done.next_run_at, null)
    const [run, ...others] = await runsOf(alice, created.id)
    assert.equal(others.length, 0)
    assert.equal(run.schedule_id, created.id)
    assert.equal(run.kind, 'transfer')
    assert.equal(run.memo, 'allowance')
    assert.equal(run.receiving_wallet_id, bob.walletId)
    assert.equal(done.last_run?.transaction_id, run.id)
    // The recipient sees it in their history too, with its schedule.
    const received = (await runsOf(bob, created.id))[0]
    assert.equal(received.id, run.id)
    const events = await readWalletEvents(t.database.db, alice.walletId, 0, Number.MAX_SAFE_INTEGER, 100)
    assert.deepEqual(
      events.map((event) => event.type),
      ['transaction.received', 'transaction.sent', 'schedule.ran', 'schedule.finished'],
    )
    const ran = JSON.parse(events[2].payload)
    assert.equal(ran.data.transaction.id, run.id)
    assert.equal(ran.data.schedule.id, created.id)
  })

  it('catches up occurrences missed while the service was down, in order, each once', async () => {
    const alice = await fundedUser(t, [[gold, 100]])
    const bob = await createUser(t.app)
    const created = await schedule(alice, { recipient: bob.username, assets: { [gold.name]: 1 }, start_at: later(60_000), every: 'P1D' })
    await backdate(created.id, 3)
    // Occurrences 0, 1 and 2 fell due three, two and one days ago; occurrence 3 is due in a minute.
    const caught = await untilRuns(alice, created.id, 3)
    assert.equal(caught.runs, 3)
    assert.equal(caught.status, 'active')
    assert.equal(Date.parse(caught.next_run_at as string), Date.parse(created.start_at))
    const runs = (await runsOf(alice, created.id)).reverse()
    assert.equal(runs.length, 3)
    const occurrences = await t.database.db
      .selectFrom('schedule_runs')
      .select(['occurrence', 'transaction_id'])
      .where('schedule_id', '=', created.id)
      .orderBy('occurrence')
      .execute()
    assert.deepEqual(
      occurrences.map((row) => [Number(row.occurrence), Number(row.transaction_id)]),
      runs.map((run, n) => [n, run.id]),
    )
  })

  it('records a refusal in last_run and failures, and pauses after three in a row', async () => {
    const alice = await fundedUser(t, [[gold, 1]])
    const bob = await createUser(t.app)
    const created = await schedule(alice, { recipient: bob.username, assets: { [gold.name]: 5 }, start_at: later(60_000), every: 'P1W' })
    await backdate(created.id, 28)
    const paused = await untilRuns(alice, created.id, 3)
    assert.equal(paused.status, 'paused')
    assert.equal(paused.runs, 3)
    assert.equal(paused.failures, 3)
    assert.equal(paused.next_run_at, null)
    assert.equal(paused.last_run?.transaction_id, null)
    assert.equal(paused.last_run?.error?.code, 'I002')
    assert.equal(paused.last_run?.error?.message, 'Insufficient Quantity')
    assert.equal((await runsOf(alice, created.id)).length, 0)
    const types = (await readWalletEvents(t.database.db, alice.walletId, 0, Number.MAX_SAFE_INTEGER, 100)).map((event) => event.type)
    assert.deepEqual(
      types.filter((type) => type.startsWith('schedule.')),
      ['schedule.failed', 'schedule.failed', 'schedule.failed', 'schedule.paused'],
    )
    // Resumed, it runs from the next occurrence from now on: the missed fourth one does not run.
    const resumed = await t.app.inject({ method: 'POST', url: `/wallet/schedules/${created.id}/resume`, headers: alice.auth })
    assert.equal(resumed.statusCode, 200, resumed.body)
    assert.equal(resumed.json().status, 'active')
    assert.ok(Date.parse(resumed.json().next_run_at) >= Date.now() - 1000)
    assert.equal(resumed.json().runs, 3)
  })

  it('lists its runs, the latest first, each with the transfer it made or the refusal, paged', async () => {
    const alice = await fundedUser(t, [[gold, 2]])
    const bob = await createUser(t.app)
    const created = await schedule(alice, { recipient: bob.username, assets: { [gold.name]: 1 }, start_at: later(60_000), every: 'P1D' })
    await backdate(created.id, 4)
    // Occurrences 0 and 1 pay the two gold; 2 and 3 are refused, two in a row: it stays active.
    const done = await untilRuns(alice, created.id, 4)
    assert.equal(done.status, 'active')
    const paid = (await runsOf(alice, created.id)).reverse()
    const first = await t.app.inject({ method: 'GET', url: `/wallet/schedules/${created.id}/runs?limit=3`, headers: alice.auth })
    assert.equal(first.statusCode, 200, first.body)
    assert.equal(first.headers.link, `</wallet/schedules/${created.id}/runs?before=1&limit=3>; rel="next"`)
    const second = await t.app.inject({ method: 'GET', url: `/wallet/schedules/${created.id}/runs?before=1&limit=3`, headers: alice.auth })
    assert.equal(second.statusCode, 200, second.body)
    assert.equal(second.headers.link, undefined)
    const runs: { occurrence: number; due_at: string; ran_at: string; transaction_id: number | null; error: { code: string } | null }[] = [
      ...first.json(),
      ...second.json(),
    ]
    assert.deepEqual(
      runs.map((run) => [run.occurrence, run.transaction_id, run.error?.code ?? null]),
      [
        [3, null, 'I002'],
        [2, null, 'I002'],
        [1, paid[1].id, null],
        [0, paid[0].id, null],
      ],
    )
    for (const run of runs) assert.ok(Date.parse(run.ran_at) >= Date.parse(run.due_at))
    // Another wallet's schedule is not found.
    const other = await t.app.inject({ method: 'GET', url: `/wallet/schedules/${created.id}/runs`, headers: bob.auth })
    expectError(other, 404, 'R000')
  })

  it('pauses, resumes and cancels; R001 once ended, R000 for another wallet', async () => {
    const alice = await fundedUser(t, [[gold, 10]])
    const bob = await createUser(t.app)
    const created = await schedule(alice, {
      recipient: bob.username,
      assets: { [gold.name]: 1 },
      start_at: later(3_600_000),
      every: 'P1M',
      time_zone: 'Europe/Paris',
    })
    const action = (user: TestUser, verb: 'pause' | 'resume') =>
      t.app.inject({ method: 'POST', url: `/wallet/schedules/${created.id}/${verb}`, headers: user.auth })
    expectError(await action(bob, 'pause'), 404, 'R000')
    expectError(await t.app.inject({ method: 'GET', url: `/wallet/schedules/${created.id}`, headers: bob.auth }), 404, 'R000')
    const paused = await action(alice, 'pause')
    assert.equal(paused.json().status, 'paused')
    assert.equal(paused.json().next_run_at, null)
    assert.equal((await action(alice, 'pause')).json().status, 'paused')
    const resumed = await action(alice, 'resume')
    assert.equal(resumed.json().status, 'active')
    assert.equal(resumed.json().next_run_at, created.next_run_at)
    assert.equal((await action(alice, 'resume')).json().status, 'active')
    const upcoming = await t.app.inject({ method: 'GET', url: `/wallet/schedules/${created.id}/upcoming?count=3`, headers: alice.auth })
    assert.equal(upcoming.json().runs.length, 3)
    const cancelled = await t.app.inject({ method: 'DELETE', url: `/wallet/schedules/${created.id}`, headers: alice.auth })
    assert.equal(cancelled.statusCode, 200, cancelled.body)
    assert.equal(cancelled.json().status, 'cancelled')
    expectError(await action(alice, 'pause'), 409, 'R001')
    expectError(await action(alice, 'resume'), 409, 'R001')
    expectError(await t.app.inject({ method: 'DELETE', url: `/wallet/schedules/${created.id}`, headers: alice.auth }), 409, 'R001')
    const list = await t.app.inject({ method: 'GET', url: '/wallet/schedules?status=cancelled', headers: alice.auth })
    assert.deepEqual(
      list.json().map((s: Schedule) => s.id),
      [created.id],
    )
  })

  it('refuses bad calendars with G000 and the transfer as a transfer would, creating nothing', async () => {
    const alice = await fundedUser(t, [[gold, 10]])
    const bob = await createUser(t.app)
    const base = { recipient: bob.username, assets: { [gold.name]: 1 } }
    const refusals: [Record<string, unknown>, number, string][] = [
      [{ ...base, start_at: new Date(Date.now() - 3_600_000).toISOString() }, 400, 'G000'],
      [{ ...base, start_at: new Date(Date.now() + 11 * 366 * DAY).toISOString() }, 400, 'G000'],
      [{ ...base, start_at: later(60_000), every: 'PT1H' }, 400, 'G000'],
      [{ ...base, start_at: later(60_000), every: 'P1M2D' }, 400, 'G000'],
      [{ ...base, start_at: later(60_000), every: 'P2Y' }, 400, 'G000'],
      [{ ...base, start_at: later(60_000), every: 'P1D', count: 3, end_at: later(10 * DAY) }, 400, 'G000'],
      [{ ...base, start_at: later(60_000), time_zone: 'Mars/Olympus' }, 400, 'G000'],
      [{ ...base, start_at: later(60_000), count: 0 }, 400, 'G000'],
      [{ ...base, start_at: 'tomorrow' }, 400, 'G000'],
      [{ ...base, recipient: 'nosuchuser', start_at: later(60_000) }, 404, 'U003'],
      [{ ...base, recipient: alice.username, start_at: later(60_000) }, 400, 'W013'],
      [{ ...base, assets: { nosuchasset: 1 }, start_at: later(60_000) }, 400, 'I001'],
    ]
    for (const [body, status, code] of refusals) {
      expectError(await t.app.inject({ method: 'POST', url: '/wallet/schedules', headers: alice.auth, payload: body }), status, code)
    }
    const list = await t.app.inject({ method: 'GET', url: '/wallet/schedules', headers: alice.auth })
    assert.deepEqual(list.json(), [])
  })

  it('is cancelled with the wallet it pays from', async () => {
    const owner = await createUser(t.app)
    const created = await t.app.inject({ method: 'POST', url: '/user/wallets', headers: owner.auth, payload: {} })
    assert.equal(created.statusCode, 201, created.body)
    const switched = await t.app.inject({
      method: 'PUT',
      url: '/user/session/wallet',
      headers: owner.auth,
      payload: { wallet_id: created.json().id },
    })
    assert.equal(switched.statusCode, 200, switched.body)
    const bob = await createUser(t.app)
    const pending = await schedule(owner, { recipient: bob.username, assets: { [gold.name]: 1 }, start_at: later(3_600_000) })
    const deleted = await t.app.inject({ method: 'DELETE', url: '/wallet', headers: owner.auth })
    assert.equal(deleted.statusCode, 204, deleted.body)
    const row = await t.database.db.selectFrom('schedules').select('status').where('id', '=', pending.id).executeTakeFirstOrThrow()
    assert.equal(row.status, 'cancelled')
  })

  it('catches up after a restart: another instance on the same store runs what fell due while none ran', async () => {
    const alice = await fundedUser(t, [[gold, 100]])
    const bob = await createUser(t.app)
    const created = await schedule(alice, {
      recipient: bob.username,
      assets: { [gold.name]: 2 },
      start_at: later(60_000),
      every: 'P1D',
      count: 4,
    })
    await backdate(created.id, 10)
    const peer = await buildSameStoreApp(t)
    try {
      const done = await untilRuns(alice, created.id, 4, peer.app)
      assert.equal(done.status, 'finished')
      assert.equal(done.runs, 4)
      assert.equal((await runsOf(alice, created.id)).length, 4)
    } finally {
      await peer.close()
    }
  })

  it(
    'runs each occurrence once with two instances on one PostgreSQL database racing for them',
    { skip: STORAGE !== 'postgres' },
    async () => {
      // One after the other, each closed in `finally` even if the next fails to start.
      const peers: Awaited<ReturnType<typeof buildPeerApp>>[] = []
      try {
        for (let i = 0; i < 2; i++) peers.push(await buildPeerApp(t))
        const bob = await createUser(t.app)
        const payers = await Promise.all(Array.from({ length: 8 }, () => fundedUser(t, [[gold, 1000]])))
        const created: [TestUser, Schedule][] = []
        for (const payer of payers) {
          const made = await schedule(payer, {
            recipient: bob.username,
            assets: { [gold.name]: 1 },
            start_at: later(60_000),
            every: 'P1D',
            count: 6,
          })
          created.push([payer, made])
        }
        // All of them fall due at once, six occurrences each, for three instances' runners.
        for (const [, made] of created) await backdate(made.id, 10)
        for (const [payer, made] of created) {
          const done = await untilRuns(payer, made.id, 6)
          assert.equal(done.status, 'finished')
          assert.equal(done.runs, 6)
          assert.equal(done.failures, 0)
          assert.equal((await runsOf(payer, made.id)).length, 6)
          const holdings = await t.app.inject({ method: 'GET', url: '/wallet/assets', headers: payer.auth })
          assert.equal(holdings.json()[0].quantity, 994)
        }
      } finally {
        for (const peer of peers) await peer.close()
      }
    },
  )
})
