import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import type { FastifyBaseLogger } from 'fastify'
import client from 'prom-client'
import { inTransaction } from '../../src/db/dialect.ts'
import { DeliveryWorker } from '../../src/events/delivery.worker.ts'
import { pickFairly, shareSlots, type DueDelivery } from '../../src/events/claims.ts'
import { OriginCircuits, OriginLimits, webhookOrigin, type CircuitState } from '../../src/events/origins.ts'
import { createOutbox } from '../../src/events/outbox.ts'
import { prepareWebhookSecrets } from '../../src/events/webhook-secrets.ts'
import { createWebhooksService } from '../../src/events/webhooks.service.ts'
import { moveAssets } from '../../src/ledger/moves.ts'
import { buildTestApp, type TestApp } from '../helpers/app.ts'
import { createAsset, createUser, fundedUser, issue, setWebhook, transfer, type TestUser } from '../helpers/factories.ts'
import { startReceiver, waitUntil, type Receiver } from '../helpers/receiver.ts'

const outbox = createOutbox()

/**
 * Webhook delivery at scale: deliveries queued per receiving origin and shared fairly,
 * per-origin and global limits, the circuit breaker, the backlog's visibility, and removal. No
 * assertion depends on how fast the machine is: the waits are for counts, the clock of the circuits
 * is mocked, and a "nothing more happened" check can only be weaker on a slow machine, never wrong.
 */

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
const at = (iso: number) => new Date(Date.UTC(2026, 0, 1) + iso * 1000).toISOString()

describe("pickFairly: one origin's slots shared among its wallets", () => {
  const backlog = (walletId: number, count: number, from: number, firstId: number): DueDelivery[] =>
    Array.from({ length: count }, (_, i) => ({ id: firstId + i, wallet_id: walletId, next_attempt_at: at(from + i) }))

  it('gives a wallet with one event a slot beside a wallet with a long, older backlog', () => {
    const due = [...backlog(1, 50, 0, 1), ...backlog(2, 1, 100, 1000)]
    const picked = pickFairly(due, new Map(), 4)
    assert.deepEqual(
      picked.map((delivery) => delivery.id),
      [1, 1000, 2, 3],
    )
  })

  it("counts the attempts each wallet has in flight, and takes each wallet's oldest first", () => {
    const due = [...backlog(7, 3, 10, 70), ...backlog(8, 3, 0, 80)]
    const picked = pickFairly(due, new Map([[8, 2]]), 4)
    assert.deepEqual(
      picked.map((delivery) => delivery.id),
      [70, 71, 80, 72],
    )
  })

  it('takes everything when there are more slots than deliveries, and nothing without slots', () => {
    const due = [...backlog(1, 2, 0, 1), ...backlog(2, 2, 0, 10)]
    assert.equal(pickFairly(due, new Map(), 10).length, 4)
    assert.equal(pickFairly(due, new Map(), 0).length, 0)
  })

  it('keys origins by scheme, host and port', () => {
    assert.equal(webhookOrigin('https://Hooks.Example.com:443/a/b?c=d'), 'https://hooks.example.com')
    assert.equal(webhookOrigin('http://127.0.0.1:8080/x'), 'http://127.0.0.1:8080')
    assert.notEqual(webhookOrigin('http://127.0.0.1:8080/x'), webhookOrigin('http://127.0.0.1:8081/x'))
  })
})

describe('OriginCircuits (mocked clock)', () => {
  function circuits(options: { failureThreshold?: number; openMs?: number; maxOpenMs?: number } = {}) {
    let now = 1_000_000
    const changes: { origin: string; from: CircuitState; to: CircuitState; openForMs?: number }[] = []
    const breakers = new OriginCircuits({
      failureThreshold: 3,
      openMs: 1_000,
      maxOpenMs: 4_000,
      ...options,
      now: () => now,
      onChange: (change) => changes.push(change),
    })
    return { breakers, changes, advance: (ms: number) => (now += ms) }
  }

  it('opens after the failures in a row, lets one probe through after the pause, and closes on an answer', () => {
    const { breakers, changes, advance } = circuits()
    const origin = 'https://slow.example'
    breakers.finished(origin, false)
    breakers.finished(origin, false)
    assert.equal(breakers.allowance(origin), Number.POSITIVE_INFINITY)
    breakers.finished(origin, false)
    assert.equal(breakers.state(origin), 'open')
    assert.equal(breakers.allowance(origin), 0)
    advance(999)
    assert.equal(breakers.allowance(origin), 0)
    advance(1)
    assert.equal(breakers.state(origin), 'half-open')
    assert.equal(breakers.allowance(origin), 1)
    breakers.started(origin)
    assert.equal(breakers.allowance(origin), 0, 'one probe at a time')
    breakers.finished(origin, true)
    assert.equal(breakers.state(origin), 'closed')
    assert.equal(breakers.allowance(origin), Number.POSITIVE_INFINITY)
    assert.deepEqual(
      changes.map((change) => `${change.from}→${change.to}`),
      ['closed→open', 'open→half-open', 'half-open→closed'],
    )
    assert.equal(changes[0].openForMs, 1_000)
  })

  it('opens again for twice as long when the probe fails, up to the maximum, and starts over once closed', () => {
    const { breakers, changes, advance } = circuits()
    const origin = 'https://down.example'
    for (let i = 0; i < 3; i++) breakers.finished(origin, false)
    for (const pauseMs of [1_000, 2_000, 4_000, 4_000]) {
      advance(pauseMs - 1)
      assert.equal(breakers.state(origin), 'open', `still open ${pauseMs - 1} ms in`)
      advance(1)
      assert.equal(breakers.allowance(origin), 1)
      breakers.started(origin)
      breakers.finished(origin, false)
    }
    assert.deepEqual(
      changes.filter((change) => change.to === 'open').map((change) => change.openForMs),
      [1_000, 2_000, 4_000, 4_000, 4_000],
    )
    advance(4_000)
    breakers.started(origin)
    breakers.finished(origin, true)
    for (let i = 0; i < 3; i++) breakers.finished(origin, false)
    assert.equal(changes.at(-1)?.openForMs, 1_000, 'a new outage starts with the first pause again')
  })

  it('keeps origins apart, and an answer from an attempt started before the circuit opened closes it', () => {
    const { breakers } = circuits()
    for (let i = 0; i < 3; i++) breakers.finished('https://a.example', false)
    assert.equal(breakers.state('https://a.example'), 'open')
    assert.equal(breakers.state('https://b.example'), 'closed')
    assert.deepEqual(breakers.notClosed(), [['https://a.example', 'open']])
    // Failures of attempts already in flight when it opened change nothing.
    breakers.finished('https://a.example', false)
    assert.equal(breakers.state('https://a.example'), 'open')
    breakers.finished('https://a.example', true)
    assert.equal(breakers.state('https://a.example'), 'closed')
  })
})

/** Commits `count` transfers of one unit from `payer` to each of `payees` in one database transaction, so the worker finds their deliveries all at once. */
async function transferAtOnce(t: TestApp, payer: TestUser, payees: TestUser[], assetId: number, count: number): Promise<void> {
  await inTransaction(t.database.db, async (trx) => {
    for (let i = 0; i < count; i++) {
      for (const payee of payees) {
        await moveAssets(
          trx,
          {
            from: payer.walletId,
            to: payee.walletId,
            lines: [{ asset: { id: assetId, name: 'gold', value: 1 }, quantity: 1 }],
            memo: '',
            kind: 'transfer',
          },
          outbox,
        )
      }
    }
  })
}

describe("OriginLimits: each origin's in-flight limit adapts to its answers (mocked clock)", () => {
  function limits(floor = 4, cap = 128) {
    let now = 1_000_000
    const adaptive = new OriginLimits({ floor, cap, now: () => now })
    return { adaptive, advance: (ms: number) => (now += ms), now: () => now }
  }
  const fast = 'https://fast.example'
  const other = 'https://other.example'
  /** One round trip: `count` attempts started now, answered after `latencyMs`. */
  function roundTrip(l: ReturnType<typeof limits>, origin: string, count: number, outcome: { answered: boolean; latencyMs: number }) {
    l.advance(1)
    const startedAt = l.now()
    l.advance(outcome.latencyMs)
    for (let i = 0; i < count; i++) l.adaptive.finished(origin, { startedAt, ...outcome })
  }

  it('starts at the floor and, while the origin has more due than it lets out, grows by one per answer up to the cap', () => {
    const l = limits()
    assert.equal(l.adaptive.limit(fast), 4)
    l.adaptive.claimed(new Set([fast]))
    roundTrip(l, fast, 4, { answered: true, latencyMs: 50 })
    assert.equal(l.adaptive.limit(fast), 8, 'about doubled in one round trip')
    for (let trip = 0; trip < 10; trip++) roundTrip(l, fast, l.adaptive.limit(fast), { answered: true, latencyMs: 50 })
    assert.equal(l.adaptive.limit(fast), 128, 'never above the cap')
    assert.equal(l.adaptive.limit(other), 4, 'origins apart')
  })

  it('does not grow while the origin takes less than its limit', () => {
    const l = limits()
    l.adaptive.claimed(new Set())
    roundTrip(l, fast, 4, { answered: true, latencyMs: 50 })
    assert.equal(l.adaptive.limit(fast), 4)
  })

  it('halves on failures, once per round trip, down to the floor; an answer in good time grows it again', () => {
    const l = limits()
    l.adaptive.claimed(new Set([fast]))
    for (let trip = 0; trip < 3; trip++) roundTrip(l, fast, l.adaptive.limit(fast), { answered: true, latencyMs: 50 })
    assert.equal(l.adaptive.limit(fast), 32)
    // 32 attempts sent together all fail: one cut, not 32.
    roundTrip(l, fast, 32, { answered: false, latencyMs: 10_000 })
    assert.equal(l.adaptive.limit(fast), 16)
    // Attempts sent after that cut cut again.
    roundTrip(l, fast, 16, { answered: false, latencyMs: 10_000 })
    assert.equal(l.adaptive.limit(fast), 8)
    for (let trip = 0; trip < 5; trip++) roundTrip(l, fast, 8, { answered: false, latencyMs: 10_000 })
    assert.equal(l.adaptive.limit(fast), 4, 'never below the floor')
    roundTrip(l, fast, 1, { answered: true, latencyMs: 50 })
    assert.equal(l.adaptive.limit(fast), 5)
  })

  it('takes a tenth off when answers slow down under the load, and grows while they keep their pace', () => {
    const l = limits()
    l.adaptive.claimed(new Set([fast]))
    for (let trip = 0; trip < 4; trip++) roundTrip(l, fast, l.adaptive.limit(fast), { answered: true, latencyMs: 50 })
    assert.equal(l.adaptive.limit(fast), 64)
    // Within twice the baseline (50 ms) plus 20 ms: still in good time.
    roundTrip(l, fast, 10, { answered: true, latencyMs: 110 })
    assert.equal(l.adaptive.limit(fast), 74)
    // Slower than that: the receiver is slowing under the load; one cut per round trip, no growth.
    roundTrip(l, fast, 74, { answered: true, latencyMs: 400 })
    assert.equal(l.adaptive.limit(fast), 66)
    roundTrip(l, fast, 66, { answered: true, latencyMs: 400 })
    assert.equal(l.adaptive.limit(fast), 59)
    // A receiver that became slower for good: after one to two 30 s windows, 400 ms is its pace.
    l.advance(60_000)
    roundTrip(l, fast, 1, { answered: true, latencyMs: 400 })
    roundTrip(l, fast, 10, { answered: true, latencyMs: 400 })
    assert.equal(l.adaptive.limit(fast), 70)
  })

  it('takes the answer time of attempts sent at the floor as the new baseline, so a receiver slower for good is not held at the floor', () => {
    const l = limits()
    l.adaptive.claimed(new Set([fast]))
    roundTrip(l, fast, 4, { answered: true, latencyMs: 10 })
    assert.equal(l.adaptive.limit(fast), 8)
    // From 10 ms to 50 ms (above twice 10 ms plus 20): cut once per round trip down to the floor.
    const cuts: number[] = []
    while (l.adaptive.limit(fast) > 4 && cuts.length < 10) {
      roundTrip(l, fast, l.adaptive.limit(fast), { answered: true, latencyMs: 50 })
      cuts.push(l.adaptive.limit(fast))
    }
    assert.deepEqual(cuts, [7, 6, 5, 4])
    roundTrip(l, fast, 4, { answered: true, latencyMs: 50 })
    assert.equal(l.adaptive.limit(fast), 8, 'at the floor, the answers of attempts sent there set the baseline, and the limit grows again')
    for (let trip = 0; trip < 5; trip++) roundTrip(l, fast, l.adaptive.limit(fast), { answered: true, latencyMs: 50 })
    assert.equal(l.adaptive.limit(fast), 128, 'grown back to the cap within seconds, not after one or two 30 s windows')
    // Slower again under the load it now takes: cut as before.
    roundTrip(l, fast, 128, { answered: true, latencyMs: 400 })
    assert.equal(l.adaptive.limit(fast), 115)
  })

  it('keeps a cap lower than the floor, and forgets an origin back at the floor with nothing held back', () => {
    const l = limits(4, 3)
    assert.equal(l.adaptive.limit(fast), 3)
    l.adaptive.claimed(new Set([fast]))
    roundTrip(l, fast, 3, { answered: true, latencyMs: 50 })
    assert.equal(l.adaptive.limit(fast), 3)
    const m = limits()
    m.adaptive.claimed(new Set([fast, other]))
    roundTrip(m, fast, 2, { answered: true, latencyMs: 50 })
    m.adaptive.claimed(new Set())
    assert.deepEqual(m.adaptive.entries(), [[fast, 6]])
  })
})

describe("shareSlots: the instance's slots shared among origins", () => {
  it('gives each origin what it asks up to an equal share, and shares what some leave among the rest', () => {
    assert.deepEqual(shareSlots([128, 128], 256), [128, 128])
    assert.deepEqual(shareSlots([200, 128], 256), [128, 128])
    assert.deepEqual(shareSlots([200, 20], 256), [200, 20])
    assert.deepEqual(shareSlots([500, 10, 500], 256), [123, 10, 123])
    assert.deepEqual(shareSlots([0, 5], 256), [0, 5])
  })

  it('gives the slots that do not divide evenly to the first origins, one each', () => {
    assert.deepEqual(shareSlots([10, 10, 10], 5), [2, 2, 1])
    assert.deepEqual(shareSlots([10, 10, 10], 2), [1, 1, 0])
    assert.deepEqual(shareSlots([], 5), [])
  })
})

async function metricsText(t: TestApp): Promise<string> {
  return (await t.app.inject({ method: 'GET', url: '/metrics', headers: t.admin })).body
}

/** The value of a series of /metrics: `labels` empty for one without labels, else a part of its label set. */
function sample(text: string, name: string, labels = ''): number | undefined {
  const line = text
    .split('\n')
    .find((row) => (labels === '' ? row.startsWith(`${name} `) : row.startsWith(`${name}{`) && row.includes(labels)))
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1))
}

describe('webhook delivery per origin', () => {
  let t: TestApp
  let hanging: Receiver
  let fast: Receiver
  let assetId: number
  let payer: TestUser
  before(async () => {
    // Attempts to the hanging origin would wait a minute: they hold their slots for the whole test.
    t = await buildTestApp({
      WEBHOOK_ORIGIN_CONCURRENCY: '3',
      WEBHOOK_CONCURRENCY: '5',
      WEBHOOK_TIMEOUT_MS: '60000',
      WEBHOOK_RETRY_SCHEDULE: '0.1',
    })
    hanging = await startReceiver(() => ({ hang: true }))
    fast = await startReceiver()
    assetId = (await createAsset(t, { name: 'gold' })).id
    payer = await createUser(t.app)
    await issue(t, payer.walletId, assetId, 1_000)
  })
  after(async () => {
    // The hanging receiver goes first: its attempts end (reset) instead of waiting for the shutdown's grace.
    await hanging.close()
    await fast.close()
    await t.close()
  })

  it("delivers a fast origin's events while a hanging origin holds its slots, which go to different wallets", async () => {
    const slow = await Promise.all(Array.from({ length: 4 }, () => createUser(t.app)))
    for (const [index, user] of slow.entries()) await setWebhook(t, user, `${hanging.url}/slow/${index}`)
    const quick = await createUser(t.app)
    await setWebhook(t, quick, `${fast.url}/quick`)
    await transferAtOnce(t, payer, slow, assetId, 3)
    await waitUntil(() => hanging.open() === 3, 10_000, 'the hanging origin to hold its 3 slots')
    for (let i = 0; i < 5; i++) await transfer(t, payer, quick.username, { gold: 1 })
    const arrived = await fast.waitForEvents(5, 10_000)
    assert.equal(arrived.length, 5)
    // The hanging origin still holds exactly its limit, never more, and nothing else went there.
    assert.equal(hanging.open(), 3)
    assert.equal(hanging.maxOpen(), 3)
    assert.equal(hanging.requests.length, 3)
    assert.equal(
      new Set(hanging.requests.map((request) => request.path)).size,
      3,
      'three wallets share the slots, not one wallet taking all',
    )

    // The backlog, per webhook and per origin.
    const backlogs = await Promise.all(
      slow.map(async (user) => (await t.app.inject({ method: 'GET', url: '/wallet/webhook', headers: user.auth })).json().backlog),
    )
    assert.equal(
      backlogs.reduce((sum, backlog) => sum + backlog.pending, 0),
      12,
    )
    for (const backlog of backlogs) {
      assert.equal(backlog.pending, 3)
      assert.ok(Date.parse(backlog.oldest_pending_at) <= Date.now())
      assert.ok(backlog.oldest_pending_age_seconds >= 0)
    }
    const log = await t.app.inject({ method: 'GET', url: '/wallet/webhook/deliveries', headers: slow[0].auth })
    assert.equal(log.headers['coffer-backlog-pending'], '3')
    assert.match(String(log.headers['coffer-backlog-oldest-age-seconds']), /^\d+\.\d{3}$/)
    assert.equal(log.json().length, 3, 'the log itself is unchanged: an array of deliveries')
    const quickInfo = await waitUntil(
      async () => {
        const info = (await t.app.inject({ method: 'GET', url: '/wallet/webhook', headers: quick.auth })).json()
        return info.backlog.pending === 0 ? info : undefined
      },
      10_000,
      'the fast backlog to drain',
    )
    assert.deepEqual(quickInfo.backlog, { pending: 0, oldest_pending_at: null, oldest_pending_age_seconds: 0 })

    const text = await metricsText(t)
    if (process.env.DEBUG_METRICS)
      console.log(
        text
          .split('\n')
          .filter((line) => line.includes('webhook'))
          .join('\n'),
      )
    // In all, never per origin or webhook: no label names a receiver or a wallet.
    assert.equal(sample(text, 'coffer_webhook_backlog'), 12)
    assert.equal(sample(text, 'coffer_webhook_backlogged_origins'), 1, 'the drained origin does not count')
    assert.equal(sample(text, 'coffer_webhook_largest_origin_backlog'), 12)
    assert.ok((sample(text, 'coffer_webhook_oldest_pending_seconds') ?? -1) >= 0)
    assert.equal(sample(text, 'coffer_webhook_in_flight'), 3)
    for (const hostPort of [new URL(hanging.url).host, new URL(fast.url).host])
      assert.ok(!text.includes(hostPort), `${hostPort} in /metrics`)
    assert.doesNotMatch(text, /\b(origin|wallet)="/)
  })
})

describe('leases counted per worker and origin (webhook_lease_counts)', () => {
  let t: TestApp
  let hanging: Receiver
  let fast: Receiver
  before(async () => {
    t = await buildTestApp({ WEBHOOK_ORIGIN_CONCURRENCY: '3', WEBHOOK_TIMEOUT_MS: '30000', WEBHOOK_RETRY_SCHEDULE: '0.1' })
    hanging = await startReceiver(() => ({ hang: true }))
    fast = await startReceiver()
  })
  after(async () => {
    await hanging.close()
    await fast.close()
    await t.close()
  })

  it("counts another worker's attempts until its count lapses, its own while they are in flight, and none once stopped", async () => {
    const db = t.database.db
    const assetId = (await createAsset(t, { name: 'gold' })).id
    const payer = await createUser(t.app)
    await issue(t, payer.walletId, assetId, 100)
    const held = await Promise.all(Array.from({ length: 3 }, () => createUser(t.app)))
    for (const [index, user] of held.entries()) await setWebhook(t, user, `${hanging.url}/held/${index}`)
    const quick = await createUser(t.app)
    await setWebhook(t, quick, `${fast.url}/quick`)
    const hangingOrigin = new URL(hanging.url).origin
    const fastOrigin = new URL(fast.url).origin
    // Another worker holds the hanging origin's whole limit, and died: its count lapses in 1.5 s.
    const lapse = Date.now() + 1_500
    await db
      .insertInto('webhook_lease_counts')
      .values({ instance: 'a worker that died', origin: hangingOrigin, leased: 3, lease_until: new Date(lapse).toISOString() })
      .execute()
    await transferAtOnce(t, payer, [...held, quick], assetId, 1)

    // The other origin is not held up; its count is gone once its attempt is written.
    await fast.waitForEvents(1, 10_000)
    const counts = () =>
      db
        .selectFrom('webhook_lease_counts')
        .select(['instance', 'origin', 'leased', 'lease_until'])
        .where('instance', '<>', 'a worker that died')
        .execute()
    await waitUntil(async () => (await counts()).every((row) => row.origin !== fastOrigin), 10_000, "the fast origin's count to go")
    // Nothing went to the hanging origin before the dead worker's count lapsed; then its limit.
    await waitUntil(() => hanging.open() === 3, 10_000, 'the hanging origin to hold its 3 slots')
    for (const request of hanging.requests)
      assert.ok(request.at >= lapse - 5, `sent ${lapse - request.at} ms before the other worker's count lapsed`)
    const ours = await counts()
    assert.deepEqual(
      ours.map((row) => [row.origin, Number(row.leased)]),
      [[hangingOrigin, 3]],
    )
    assert.ok(Date.parse(ours[0].lease_until) > Date.now() + 20_000, 'until the newest lease ends (the attempt timeout and a margin)')
    await pause(200)
    assert.equal(hanging.maxOpen(), 3)

    // A stopped worker leaves no count, and takes the lapsed ones with it.
    await hanging.close()
    await t.app.close()
    assert.deepEqual(await db.selectFrom('webhook_lease_counts').selectAll().execute(), [])
  })
})

describe('adaptive per-origin limits in the worker', () => {
  let t: TestApp
  let hanging: Receiver
  let answering: Receiver
  before(async () => {
    t = await buildTestApp({ WEBHOOK_ORIGIN_CONCURRENCY: '64', WEBHOOK_TIMEOUT_MS: '60000', WEBHOOK_RETRY_SCHEDULE: '0.1' })
    hanging = await startReceiver(() => ({ hang: true }))
    answering = await startReceiver(() => ({ status: 200, delayMs: 200 }))
  })
  after(async () => {
    await hanging.close()
    await answering.close()
    await t.close()
  })

  it('holds an origin that never answers at the floor, and lets one that answers in good time take more, within the cap', async () => {
    const assetId = (await createAsset(t, { name: 'gold' })).id
    const payer = await createUser(t.app)
    await issue(t, payer.walletId, assetId, 1_000)
    const stuck = await Promise.all(Array.from({ length: 8 }, () => createUser(t.app)))
    const served = await Promise.all(Array.from({ length: 8 }, () => createUser(t.app)))
    for (const [index, user] of stuck.entries()) await setWebhook(t, user, `${hanging.url}/stuck/${index}`)
    for (const [index, user] of served.entries()) await setWebhook(t, user, `${answering.url}/served/${index}`)
    await transferAtOnce(t, payer, [...stuck, ...served], assetId, 5)
    // 40 deliveries each. The answering origin starts at 4 in flight and grows with its answers.
    await answering.waitForEvents(40, 30_000)
    assert.ok(answering.maxOpen() > 4, `${answering.maxOpen()} requests at once to the origin that answers`)
    assert.ok(answering.maxOpen() <= 64)
    // The one that never answered never got more than the floor, whatever was queued for it.
    await pause(300)
    assert.equal(hanging.open(), 4)
    assert.equal(hanging.maxOpen(), 4)
    const text = await metricsText(t)
    assert.equal(sample(text, 'coffer_webhook_lowest_origin_limit'), 4)
  })
})

describe('a failing origin backs off alone (circuit breaker, mocked clock)', () => {
  let t: TestApp
  let failing: Receiver
  let healthy: Receiver
  let worker: DeliveryWorker | undefined
  before(async () => {
    t = await buildTestApp({
      WEBHOOK_RETRY_SCHEDULE: Array(10).fill('0.05').join(','),
      WEBHOOK_CIRCUIT_FAILURES: '3',
      WEBHOOK_CIRCUIT_OPEN_MS: '1000',
      WEBHOOK_TIMEOUT_MS: '2000',
    })
    failing = await startReceiver(() => ({ status: 503 }))
    healthy = await startReceiver()
  })
  after(async () => {
    await worker?.stop()
    await failing.close()
    await healthy.close()
    await t.close()
  })

  it('stops calling an origin after failures in a row, probes it once per pause, and resumes when it answers; other origins go on', async () => {
    const assetId = (await createAsset(t, { name: 'gold' })).id
    const payer = await createUser(t.app)
    await issue(t, payer.walletId, assetId, 100)
    const [down, up] = [await createUser(t.app), await createUser(t.app)]
    await setWebhook(t, down, `${failing.url}/down`)
    await setWebhook(t, up, `${healthy.url}/up`)
    // From here on a worker of our own, with a clock of our own, does the delivering.
    await t.app.close()
    let now = Date.now()
    const lines: { level: string; message: string; origin?: string }[] = []
    const record = (level: string) => (fields: object | string, message?: string) => {
      lines.push({
        level,
        message: typeof fields === 'string' ? fields : (message ?? ''),
        origin: typeof fields === 'object' ? (fields as { origin?: string }).origin : undefined,
      })
    }
    const log = {
      warn: record('warn'),
      info: record('info'),
      debug: record('debug'),
      error: record('error'),
    } as unknown as FastifyBaseLogger
    const registry = new client.Registry()
    const secretsKey = await prepareWebhookSecrets(t.database.db, t.config)
    worker = new DeliveryWorker({
      database: t.database,
      config: t.config,
      secretsKey,
      webhooks: createWebhooksService({ db: t.database.db, config: t.config, secretsKey }),
      log,
      registry,
      pollMs: 20,
      circuits: { now: () => now },
    })
    worker.start()
    const origin = new URL(failing.url).origin

    // One delivery, so that its attempts (first, then retries every 50 ms) come one after another.
    await transferAtOnce(t, payer, [down], assetId, 1)
    await failing.waitFor(3, 10_000)
    await waitUntil(
      () => lines.some((line) => line.level === 'warn' && /circuit opened/.test(line.message) && line.origin === origin),
      10_000,
      'the circuit to open',
    )
    // Its deliveries (one more queued now) are due again every 50 ms, but nothing goes out while
    // the circuit is open; the healthy origin gets its own meanwhile...
    await transferAtOnce(t, payer, [down], assetId, 2)
    await transferAtOnce(t, payer, [up], assetId, 3)
    await healthy.waitForEvents(3, 10_000)
    await pause(300)
    assert.equal(failing.requests.length, 3)
    assert.match(await registry.metrics(), /^coffer_webhook_circuits\{state="open"\} 1$/m)

    // ...until its pause is over: then one probe, which fails, and the circuit opens for twice as long.
    now += 1_000
    await failing.waitFor(4, 10_000)
    await pause(300)
    assert.equal(failing.requests.length, 4)
    now += 1_999
    await pause(200)
    assert.equal(failing.requests.length, 4, 'still open: the second pause is 2 s')

    // The origin recovers; the next probe closes the circuit and the rest follows.
    failing.behave(() => ({ status: 200 }))
    now += 1
    await waitUntil(
      () => lines.some((line) => line.level === 'info' && /circuit closed/.test(line.message) && line.origin === origin),
      10_000,
      'the circuit to close',
    )
    const deliveries = await waitUntil(
      async () => {
        const rows = await t.database.db
          .selectFrom('webhook_deliveries')
          .select(['status', 'attempts'])
          .where('wallet_id', '=', down.walletId)
          .execute()
        return rows.every((row) => row.status === 'delivered') ? rows : undefined
      },
      10_000,
      'the failing origin to get its deliveries once it answers',
    )
    // Every request was an attempt counted on its delivery: the pauses spent none of their retries.
    assert.equal(
      deliveries.reduce((sum, row) => sum + row.attempts, 0),
      failing.requests.length,
    )
    // 3 failures, a failed probe, a good probe, then the two that waited.
    assert.equal(failing.requests.length, 7)
  })
})

describe('removing webhooks under load', () => {
  let t: TestApp
  let receiver: Receiver
  let stuck: Receiver
  before(async () => {
    t = await buildTestApp({ WEBHOOK_ORIGIN_CONCURRENCY: '4', WEBHOOK_TIMEOUT_MS: '1000', WEBHOOK_RETRY_SCHEDULE: '0.1,0.1,0.1,0.1,0.1' })
    receiver = await startReceiver(() => ({ status: 200, delayMs: 20 }))
    // The webhooks to be removed point at an origin that never answers: their deliveries queue up.
    stuck = await startReceiver(() => ({ hang: true }))
  })
  after(async () => {
    await receiver.close()
    await stuck.close()
    await t.close()
  })

  it('delivers every event of the webhooks kept, and nothing after their removal to those removed', async () => {
    const assetId = (await createAsset(t, { name: 'gold' })).id
    const users = await Promise.all(Array.from({ length: 6 }, () => createUser(t.app)))
    const [kept, dropped] = [users.slice(0, 3), users.slice(3)]
    for (const [index, user] of kept.entries()) await setWebhook(t, user, `${receiver.url}/keep/${index}`)
    for (const [index, user] of dropped.entries()) await setWebhook(t, user, `${stuck.url}/drop/${index}`)
    for (const user of users) await issue(t, user.walletId, assetId, 100)
    const send = (n: number) => transfer(t, users[n % 6], users[(n + 1 + (n % 5)) % 6].username, { gold: 1 })
    let next = 0
    const removal = (async () => {
      // Removed while the stuck origin holds its 4 slots and more deliveries wait behind them.
      await waitUntil(() => next >= 20 && stuck.open() === 4, 60_000, '20 transfers and the stuck origin full')
      for (const user of dropped)
        assert.equal((await t.app.inject({ method: 'DELETE', url: '/wallet/webhook', headers: user.auth })).statusCode, 204)
    })()
    await Promise.all(
      Array.from({ length: 4 }, async () => {
        while (next < 60) await send(next++)
      }),
    )
    await removal

    const db = t.database.db
    const walletIds = (list: TestUser[]) => list.map((user) => user.walletId)
    // Every event of a kept webhook arrives (at least once).
    const keptEvents = await db.selectFrom('events').select('event_id').where('wallet_id', 'in', walletIds(kept)).execute()
    const received = () => new Set(receiver.requests.map((request) => String(request.headers['webhook-id'])))
    await waitUntil(
      () => keptEvents.every((event) => received().has(event.event_id)),
      60_000,
      `all ${keptEvents.length} events of the kept webhooks`,
    )

    // Nothing of a removed webhook is left pending, and every request it got is a logged attempt.
    await waitUntil(() => stuck.open() === 0, 10_000, 'the attempts on the wire to time out')
    let seen = ''
    const droppedDeliveries = await waitUntil(
      async () => {
        const rows = await db
          .selectFrom('webhook_deliveries')
          .select(['id', 'status', 'attempts', 'lease_until'])
          .where('wallet_id', 'in', walletIds(dropped))
          .execute()
        seen = `${stuck.requests.length} requests; ${JSON.stringify(rows)}`
        const attempts = rows.reduce((sum, row) => sum + row.attempts, 0)
        // A delivery cancelled by the removal may still be leased: an attempt loaded just before the
        // removal can still be on its way to the receiver. Only once no lease is left is every
        // attempt over, each one sent counted.
        const settled = rows.every((row) => row.status !== 'pending' && row.lease_until === null)
        return settled && attempts === stuck.requests.length ? rows : undefined
      },
      30_000,
      () => `the removed webhooks to have nothing pending or leased and every request logged (${seen})`,
    )
    assert.ok(
      droppedDeliveries.some((row) => row.status === 'cancelled'),
      'the deliveries waiting were cancelled',
    )
    const requestsToRemoved = stuck.requests.length

    // Events after the removal queue nothing and reach nobody, while the kept webhooks still get theirs.
    for (const user of dropped) await transfer(t, kept[0], user.username, { gold: 1 })
    await transfer(t, dropped[0], kept[1].username, { gold: 1 })
    const last = await db
      .selectFrom('events')
      .select('event_id')
      .where('wallet_id', 'in', walletIds(kept))
      .orderBy('id', 'desc')
      .limit(2)
      .execute()
    await waitUntil(() => last.every((event) => received().has(event.event_id)), 10_000, 'the newest events of the kept webhooks')
    assert.equal(stuck.requests.length, requestsToRemoved)
    const afterRemoval = await db.selectFrom('webhook_deliveries').select('id').where('wallet_id', 'in', walletIds(dropped)).execute()
    assert.equal(afterRemoval.length, droppedDeliveries.length, 'a delivery was queued for a removed webhook')
  })
})

/** From here on a worker of the test's own (the app's is closed), which polls only when told to (`wake`, as the retry route does). */
async function workerPollingWhenWoken(t: TestApp): Promise<DeliveryWorker> {
  await t.app.close()
  const log = { warn() {}, info() {}, debug() {}, error() {} } as unknown as FastifyBaseLogger
  const secretsKey = await prepareWebhookSecrets(t.database.db, t.config)
  return new DeliveryWorker({
    database: t.database,
    config: t.config,
    secretsKey,
    webhooks: createWebhooksService({ db: t.database.db, config: t.config, secretsKey }),
    log,
    registry: new client.Registry(),
    pollMs: 3_600_000,
  })
}

/**
 * For a describe block of the worker's rounds: a test app with `env` and a receiver, made before
 * its tests; the worker a test makes (`workerPollingWhenWoken`) is stopped after them, if it has
 * not stopped it itself.
 */
function roundsSetup(env: Record<string, string>): { t: TestApp; receiver: Receiver; worker?: DeliveryWorker } {
  const setup = {} as { t: TestApp; receiver: Receiver; worker?: DeliveryWorker }
  before(async () => {
    setup.t = await buildTestApp(env)
    setup.receiver = await startReceiver()
  })
  after(async () => {
    await setup.worker?.stop()
    await setup.receiver.close()
    await setup.t.close()
  })
  return setup
}

describe('rounds started by attempts that end', () => {
  // 16 slots: 2 attempts that end (an eighth) start a round by themselves.
  const setup = roundsSetup({ WEBHOOK_CONCURRENCY: '16' })

  it('writes a lone outcome at the next poll, starts a round once an eighth of the slots has ended, and writes what waits at shutdown', async () => {
    const { t, receiver } = setup
    const gold = await createAsset(t, { name: 'gold' })
    const assetId = gold.id
    const payer = await fundedUser(t, [[gold, 100]])
    const payee = await createUser(t.app)
    await setWebhook(t, payee, `${receiver.url}/rounds`)
    const worker = (setup.worker = await workerPollingWhenWoken(t))
    const db = t.database.db
    const statuses = async () =>
      (await db.selectFrom('webhook_deliveries').select('status').where('wallet_id', '=', payee.walletId).orderBy('id').execute()).map(
        (row) => row.status,
      )

    // One event: sent, answered, and its outcome waits for the next round.
    await transferAtOnce(t, payer, [payee], assetId, 1)
    worker.start()
    await receiver.waitForEvents(1, 10_000)
    await pause(300)
    assert.deepEqual(await statuses(), ['pending'], 'one ended attempt does not start a round by itself')
    // The next poll writes it (and claims the next event, whose outcome then waits in turn).
    await transferAtOnce(t, payer, [payee], assetId, 1)
    worker.wake()
    await receiver.waitForEvents(2, 10_000)
    await waitUntil(async () => (await statuses())[0] === 'delivered', 10_000, 'the first outcome to be written at the poll')
    await pause(300)
    assert.deepEqual(await statuses(), ['delivered', 'pending'])

    // Two more, claimed at a poll (which writes the one waiting): their two ended attempts start a round without a poll.
    await transferAtOnce(t, payer, [payee], assetId, 2)
    worker.wake()
    await receiver.waitForEvents(4, 10_000)
    await waitUntil(
      async () => (await statuses()).every((status) => status === 'delivered'),
      10_000,
      'two ended attempts to start a round by themselves',
    )

    // One more, whose outcome waits; the shutdown writes it, promptly.
    await transferAtOnce(t, payer, [payee], assetId, 1)
    worker.wake()
    await receiver.waitForEvents(5, 10_000)
    await pause(300)
    assert.deepEqual(await statuses(), ['delivered', 'delivered', 'delivered', 'delivered', 'pending'])
    const stopping = Date.now()
    await worker.stop()
    setup.worker = undefined
    assert.ok(Date.now() - stopping < 2_000, `the shutdown took ${Date.now() - stopping} ms`)
    assert.deepEqual(await statuses(), Array(5).fill('delivered'))
    assert.equal(receiver.requests.length, 5, 'each event sent once')
  })
})

describe('rounds started for an origin held to fewer slots than a batch of endings', () => {
  // 256 slots (a batch of endings is 32), and each origin held to 4 in flight.
  const setup = roundsSetup({ WEBHOOK_CONCURRENCY: '256', WEBHOOK_ORIGIN_CONCURRENCY: '4' })

  it('claims the next deliveries of an origin with more due as soon as half of its attempts in flight have ended, without a poll', async () => {
    const { t, receiver } = setup
    const gold = await createAsset(t, { name: 'gold' })
    const payer = await fundedUser(t, [[gold, 100]])
    const payee = await createUser(t.app)
    await setWebhook(t, payee, `${receiver.url}/held`)
    // Every round after the first is started by endings.
    const worker = (setup.worker = await workerPollingWhenWoken(t))
    await transferAtOnce(t, payer, [payee], gold.id, 12)
    worker.start()
    // 4 at a time, 12 in all: the endings of each 4 (fewer than 32) start the round that claims the next.
    await receiver.waitForEvents(12, 10_000)
    assert.ok(receiver.maxOpen() <= 4, `${receiver.maxOpen()} requests at once`)
    const statuses = async () =>
      (await t.database.db.selectFrom('webhook_deliveries').select('status').where('wallet_id', '=', payee.walletId).execute()).map(
        (row) => row.status,
      )
    await worker.stop()
    setup.worker = undefined
    assert.deepEqual(await statuses(), Array(12).fill('delivered'))
    assert.equal(receiver.requests.length, 12, 'each event sent once')
  })
})
