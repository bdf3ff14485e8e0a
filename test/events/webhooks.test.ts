import assert from 'node:assert/strict'
import dns from 'node:dns'
import { after, before, describe, it } from 'node:test'
import { Webhook } from 'standardwebhooks'
import type { Trx } from '../../src/db/database.ts'
import { holdRow, nowIso } from '../../src/db/dialect.ts'
import { recordAttempts } from '../../src/events/deliveries.repository.ts'
import { upsertWebhook } from '../../src/events/webhooks.repository.ts'
import { createOutbox } from '../../src/events/outbox.ts'
import { takeWalletTurns } from '../../src/ledger/ledger.service.ts'
import { moveAssets } from '../../src/ledger/moves.ts'
import { newWebhookSecret } from '../../src/events/signature.ts'
import { buildTestApp, expectError, whileOpen, type TestApp } from '../helpers/app.ts'
import { createAsset, createUser, issue, setWebhook, transfer, type TestUser } from '../helpers/factories.ts'
import { startReceiver, waitUntil, type Answer, type Receiver } from '../helpers/receiver.ts'

const outbox = createOutbox()

/**
 * Fast retries for the suite: three retries a tenth of a second apart, 300 ms timeout. Every
 * receiver here is one origin, so its circuit opens after the failures some tests cause on
 * purpose: it pauses for a tenth of a second (not 5 s), so later tests never wait for it.
 */
const FAST = { WEBHOOK_RETRY_SCHEDULE: '0.1,0.1,0.1', WEBHOOK_TIMEOUT_MS: '300', WEBHOOK_CIRCUIT_OPEN_MS: '100' }

async function deliveries(t: TestApp, user: TestUser, query = '') {
  const response = await t.app.inject({ method: 'GET', url: `/wallet/webhook/deliveries${query}`, headers: user.auth })
  assert.equal(response.statusCode, 200, response.body)
  return response.json()
}

async function settled(t: TestApp, user: TestUser, count: number, timeoutMs = 5_000) {
  return waitUntil(
    async () => {
      const list = await deliveries(t, user)
      return list.length >= count && list.every((delivery: { status: string }) => delivery.status !== 'pending') ? list : undefined
    },
    timeoutMs,
    `${count} settled deliveries`,
  )
}

describe('PUT /wallet/webhook', () => {
  let t: TestApp
  let alice: TestUser
  before(async () => {
    t = await buildTestApp()
    alice = await createUser(t.app)
  })
  after(async () => {
    await t.close()
  })

  it('sets a webhook and shows its whsec_ secret only once', async () => {
    const put = await t.app.inject({
      method: 'PUT',
      url: '/wallet/webhook',
      headers: alice.auth,
      payload: { webhook: 'https://example.com/hooks/coffer' },
    })
    assert.equal(put.statusCode, 200, put.body)
    const { webhook, secret } = put.json()
    assert.equal(webhook, 'https://example.com/hooks/coffer')
    assert.match(secret, /^whsec_[A-Za-z0-9+/]+=*$/)
    assert.ok(Buffer.from(secret.slice(6), 'base64').length >= 24)
    const got = await t.app.inject({ method: 'GET', url: '/wallet/webhook', headers: alice.auth })
    assert.equal(got.statusCode, 200)
    assert.equal(got.json().webhook, 'https://example.com/hooks/coffer')
    assert.match(got.json().created_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
    assert.equal(got.json().secret, undefined)
    assert.doesNotMatch(got.body, /whsec_/)
    const wallets = await t.app.inject({ method: 'GET', url: '/user/wallets', headers: alice.auth })
    assert.equal(wallets.json()[0].webhook, 'https://example.com/hooks/coffer')
  })

  it('replaces the webhook with a new secret, and DELETE removes it', async () => {
    const first = await setWebhook(t, alice, 'https://example.com/one')
    const second = await setWebhook(t, alice, 'https://example.com/two')
    assert.notEqual(first, second)
    assert.equal(
      (await t.app.inject({ method: 'GET', url: '/wallet/webhook', headers: alice.auth })).json().webhook,
      'https://example.com/two',
    )
    const removed = await t.app.inject({ method: 'DELETE', url: '/wallet/webhook', headers: alice.auth })
    assert.equal(removed.statusCode, 204)
    assert.equal(removed.body, '')
    assert.deepEqual((await t.app.inject({ method: 'GET', url: '/wallet/webhook', headers: alice.auth })).json(), { webhook: null })
    const again = await t.app.inject({ method: 'DELETE', url: '/wallet/webhook', headers: alice.auth })
    assert.equal(again.statusCode, 204)
  })

  it('refuses URLs that are not absolute http(s) URLs of at most 512 characters with 400 W010', async () => {
    for (const webhook of [
      '',
      'not a url',
      '/relative/path',
      'ftp://example.com/x',
      'javascript:alert(1)',
      'file:///etc/passwd',
      `https://example.com/${'a'.repeat(500)}`,
      'https://user:pw@example.com/',
    ]) {
      const response = await t.app.inject({ method: 'PUT', url: '/wallet/webhook', headers: alice.auth, payload: { webhook } })
      expectError(response, 400, 'W010')
    }
    const longest = `https://example.com/${'a'.repeat(512 - 'https://example.com/'.length)}`
    assert.equal(longest.length, 512)
    assert.equal(
      (await t.app.inject({ method: 'PUT', url: '/wallet/webhook', headers: alice.auth, payload: { webhook: longest } })).statusCode,
      200,
    )
  })

  it('refuses a body without a webhook string with 400 G000', async () => {
    for (const payload of [{}, { webhook: 5 }, { webhook: null }, ['https://example.com']]) {
      expectError(await t.app.inject({ method: 'PUT', url: '/wallet/webhook', headers: alice.auth, payload }), 400, 'G000')
    }
  })

  it('needs a user session: no credentials A000, a wallet key A001', async () => {
    expectError(await t.app.inject({ method: 'GET', url: '/wallet/webhook' }), 401, 'A000')
    const key = await t.app.inject({ method: 'POST', url: '/wallet/sessions', headers: alice.auth, payload: { name: 'bot' } })
    assert.equal(key.statusCode, 201, key.body)
    const keyAuth = { authorization: `Bearer ${key.json().token}` }
    for (const [method, url] of [
      ['GET', '/wallet/webhook'],
      ['PUT', '/wallet/webhook'],
      ['DELETE', '/wallet/webhook'],
      ['GET', '/wallet/webhook/deliveries'],
      ['POST', '/wallet/webhook/deliveries/1/retry'],
    ] as const) {
      expectError(
        await t.app.inject({ method, url, headers: keyAuth, payload: method === 'PUT' ? { webhook: 'https://example.com' } : undefined }),
        401,
        'A001',
      )
    }
  })

  it('documents every events route in the OpenAPI reference', async () => {
    const paths = (await t.app.inject({ method: 'GET', url: '/openapi.json' })).json().paths
    for (const path of ['/wallet/webhook', '/wallet/webhook/deliveries', '/wallet/webhook/deliveries/{id}/retry', '/wallet/events']) {
      assert.ok(paths[path], `${path} is missing`)
    }
  })

  it('validates the delivery log query and ids', async () => {
    expectError(await t.app.inject({ method: 'GET', url: '/wallet/webhook/deliveries?limit=1000', headers: alice.auth }), 400, 'G002')
    expectError(await t.app.inject({ method: 'GET', url: '/wallet/webhook/deliveries?status=lost', headers: alice.auth }), 400, 'G002')
    expectError(await t.app.inject({ method: 'POST', url: '/wallet/webhook/deliveries/abc/retry', headers: alice.auth }), 400, 'G001')
    expectError(await t.app.inject({ method: 'POST', url: '/wallet/webhook/deliveries/999999/retry', headers: alice.auth }), 404, 'G006')
  })
})

describe('webhook delivery', () => {
  let t: TestApp
  let receiver: Receiver
  let alice: TestUser
  let bob: TestUser
  let assetId: number
  before(async () => {
    t = await buildTestApp(FAST)
    receiver = await startReceiver()
    assetId = (await createAsset(t, { name: 'gold' })).id
  })
  after(async () => {
    await t.close()
    await receiver.close()
  })

  it('signs each event (Standard Webhooks) and both sides receive their own', async () => {
    alice = await createUser(t.app)
    bob = await createUser(t.app)
    const aliceSecret = await setWebhook(t, alice, `${receiver.url}/alice`)
    const bobSecret = await setWebhook(t, bob, `${receiver.url}/bob`)
    const issued = await issue(t, alice.walletId, assetId, 100)
    const transaction = await transfer(t, alice, bob.username, { gold: 7 })
    // One request per event: a delivery retried after a slow first attempt may arrive twice.
    const requests = await receiver.waitForEvents(3)
    const byPath = (path: string) => requests.filter((request) => request.path === path)
    assert.equal(byPath('/alice').length, 2)
    assert.equal(byPath('/bob').length, 1)

    const verify = (secret: string, request: (typeof requests)[number]) =>
      new Webhook(secret).verify(request.body, request.headers as Record<string, string>) as {
        type: string
        id: string
        created_at: string
        data: unknown
      }
    const received = byPath('/bob')[0]
    const event = verify(bobSecret, received)
    assert.equal(event.type, 'transaction.received')
    assert.deepEqual(event.data, transaction)
    assert.equal(event.created_at, transaction.created_at)
    assert.match(event.id, /^evt_/)
    assert.equal(received.headers['webhook-id'], event.id)
    assert.equal(received.headers['content-type'], 'application/json')
    assert.throws(() => verify(aliceSecret, received), /signature/i)

    const aliceEvents = byPath('/alice').map((request) => verify(aliceSecret, request))
    assert.deepEqual(aliceEvents.map((e) => e.type).sort(), ['transaction.received', 'transaction.sent'])
    assert.deepEqual(aliceEvents.find((e) => e.type === 'transaction.received')?.data, issued)
    assert.deepEqual(aliceEvents.find((e) => e.type === 'transaction.sent')?.data, transaction)

    const log = await settled(t, bob, 1)
    assert.equal(log.length, 1)
    assert.equal(log[0].event_id, event.id)
    assert.equal(log[0].type, 'transaction.received')
    assert.equal(log[0].status, 'delivered')
    assert.equal(log[0].next_attempt_at, null)
    // One attempt; on a machine so busy that the answer took over the suite's 300 ms, more (at
    // least once): every attempt is logged, the last one is the 200.
    assert.equal(log[0].attempts, log[0].attempt_log.length)
    const last = log[0].attempt_log.at(-1)
    assert.equal(last.status_code, 200)
    assert.equal(last.error, null)
    assert.ok(last.latency_ms >= 0)
    for (const earlier of log[0].attempt_log.slice(0, -1)) assert.match(earlier.error, /no answer within 300 ms/)
  })

  it('queues a delivery for a transfer that commits after a webhook was set while it ran', async () => {
    const [payer, payee] = [await createUser(t.app), await createUser(t.app)]
    await issue(t, payer.walletId, assetId, 10)
    // As PUT /wallet/webhook does it: hold the wallet, take its turn, store the webhook; committed
    // after 300 ms.
    const setting = async (trx: Trx) => {
      await holdRow(trx, 'wallets', payee.walletId)
      await takeWalletTurns(trx, [payee.walletId])
      await upsertWebhook(trx, { walletId: payee.walletId, url: `${receiver.url}/payee`, secret: newWebhookSecret(), createdAt: nowIso() })
    }
    const transaction = await whileOpen(t.database.db, setting, () => transfer(t, payer, payee.username, { gold: 1 }))
    // The transfer waited for the webhook (it commits after it), so its event is delivered there.
    const [delivery] = await settled(t, payee, 1)
    assert.equal(delivery.status, 'delivered')
    // At least once: a retry after a slow answer may deliver it again.
    assert.ok(receiver.requests.some((request) => request.path === '/payee' && JSON.parse(request.body).data.id === transaction.id))
  })

  it('sets a webhook only once a transfer of its wallet in progress has committed', async () => {
    const [payer, payee] = [await createUser(t.app), await createUser(t.app)]
    await issue(t, payer.walletId, assetId, 10)
    const moved: { id?: number } = {}
    // A transfer to the payee in progress: its rows written, not committed for 300 ms.
    const transfer = async (trx: Trx) => {
      moved.id = (
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
      ).id
    }
    const transferFirst = await whileOpen(t.database.db, transfer, async () => {
      const response = await t.app.inject({
        method: 'PUT',
        url: '/wallet/webhook',
        headers: payee.auth,
        payload: { webhook: `${receiver.url}/late` },
      })
      assert.equal(response.statusCode, 200, response.body)
      return (
        (await t.database.db
          .selectFrom('transactions')
          .select('id')
          .where('id', '=', moved.id ?? 0)
          .executeTakeFirst()) !== undefined
      )
    })
    // Otherwise the transfer would commit after the webhook, without a delivery to it.
    assert.ok(transferFirst, 'the webhook was set before a transfer of its wallet in progress committed')
  })

  it('lists deliveries newest first, with limit and offset', async () => {
    const log = await settled(t, alice, 2)
    assert.equal(log.length, 2)
    assert.ok(log[0].id > log[1].id)
    assert.equal(log[0].type, 'transaction.sent')
    const page = await deliveries(t, alice, '?limit=1&offset=1')
    assert.equal(page.length, 1)
    assert.equal(page[0].id, log[1].id)
    assert.equal((await deliveries(t, alice, '?status=failed')).length, 0)
    const metrics = await t.app.inject({ method: 'GET', url: '/metrics', headers: t.admin })
    assert.match(metrics.body, /coffer_webhook_attempts_total\{outcome="delivered"\} [1-9]/)
  })

  /** Answers requests to `path` with `answer(n)` for the n-th of them, everything else with 200. */
  function only(path: string, answer: (index: number) => Answer) {
    let count = 0
    receiver.behave((request) => (request.path === path ? answer(count++) : { status: 200 }))
  }
  /**
   * Answers requests to `path` with `answer(event, attempt)`: `event` counts the events (by
   * `webhook-id`) in the order their first request came, `attempt` that event's requests before
   * this one. Everything else gets a 200.
   */
  function perEvent(path: string, answer: (event: number, attempt: number) => Answer) {
    const seen = new Map<unknown, { event: number; attempts: number }>()
    receiver.behave((request) => {
      if (request.path !== path) return { status: 200 }
      const known = seen.get(request.headers['webhook-id']) ?? { event: seen.size, attempts: 0 }
      seen.set(request.headers['webhook-id'], known)
      return answer(known.event, known.attempts++)
    })
  }
  const at = (path: string) => receiver.requests.filter((request) => request.path === path)
  const waitAt = (path: string, count: number, timeoutMs = 5_000) =>
    waitUntil(() => (at(path).length >= count ? at(path) : undefined), timeoutMs, `${count} requests to ${path}`)
  const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

  it('retries after a 500 and a timeout, with the same webhook-id, until the receiver says 2xx', async () => {
    receiver.requests.length = 0
    only('/alice', (index) => (index === 0 ? { status: 500 } : index === 1 ? { hang: true } : { status: 204 }))
    const transaction = await transfer(t, bob, alice.username, { gold: 1 })
    const requests = await waitAt('/alice', 3)
    assert.equal(new Set(requests.map((request) => request.headers['webhook-id'])).size, 1)
    // The retries waited for the schedule (0.1 s with ±20 % jitter).
    assert.ok(requests[1].at - requests[0].at >= 70, `retry came after ${requests[1].at - requests[0].at} ms`)
    const [latest] = await settled(t, alice, 3)
    assert.equal(latest.status, 'delivered')
    // 500, no answer, 204; on a machine so busy that a 204 took over 300 ms to be read, that attempt
    // timed out too and was retried (at least once): more timeouts between, never anything else.
    const log = latest.attempt_log as { status_code: number | null; error: string | null; latency_ms: number }[]
    assert.equal(latest.attempts, log.length)
    assert.ok(log.length >= 3, JSON.stringify(log))
    assert.equal(log[0].status_code, 500)
    assert.equal(log.at(-1)?.status_code, 204)
    for (const timedOut of log.slice(1, -1)) {
      assert.equal(timedOut.status_code, null)
      assert.match(timedOut.error ?? '', /no answer within 300 ms/)
      assert.ok(timedOut.latency_ms >= 250)
    }
    assert.deepEqual(JSON.parse(requests[2].body).data, transaction)
  })

  it('gives up after the schedule: status failed, no next attempt', async () => {
    receiver.requests.length = 0
    only('/alice', () => ({ status: 503 }))
    await transfer(t, bob, alice.username, { gold: 1 })
    await waitAt('/alice', 4)
    const [latest] = await settled(t, alice, 4)
    assert.equal(latest.status, 'failed')
    assert.equal(latest.attempts, 4)
    assert.equal(latest.next_attempt_at, null)
    assert.equal(latest.last_status_code, 503)
    await pause(400)
    assert.equal(at('/alice').length, 4)
  })

  it('redelivers from the log on request, with the same event id', async () => {
    const [failed] = await deliveries(t, alice, '?status=failed')
    receiver.requests.length = 0
    only('/alice', () => ({ status: 200 }))
    const retry = await t.app.inject({ method: 'POST', url: `/wallet/webhook/deliveries/${failed.id}/retry`, headers: alice.auth })
    assert.equal(retry.statusCode, 202, retry.body)
    assert.equal(retry.json().id, failed.id)
    assert.equal(retry.json().status, 'pending')
    const [request] = await waitAt('/alice', 1)
    assert.equal(request.headers['webhook-id'], failed.event_id)
    const done = await waitUntil(async () =>
      (await deliveries(t, alice)).find((d: { id: number; status: string }) => d.id === failed.id && d.status === 'delivered'),
    )
    assert.equal(done.attempts, 5)
    assert.equal(done.attempt_log.at(-1).status_code, 200)
    // Another wallet can neither see nor retry it.
    expectError(
      await t.app.inject({ method: 'POST', url: `/wallet/webhook/deliveries/${failed.id}/retry`, headers: bob.auth }),
      404,
      'G006',
    )
    assert.ok((await deliveries(t, bob)).every((d: { id: number }) => d.id !== failed.id))
  })

  it('does not follow redirects: a 3xx is a failed attempt', async () => {
    receiver.requests.length = 0
    only('/alice', () => ({ status: 302, headers: { location: '/moved' } }))
    await transfer(t, bob, alice.username, { gold: 1 })
    await waitAt('/alice', 4)
    const [latest] = await settled(t, alice, 1)
    assert.equal(latest.status, 'failed')
    assert.ok(latest.attempt_log.every((attempt: { status_code: number }) => attempt.status_code === 302))
    assert.match(latest.attempt_log[0].error, /redirect/)
    assert.equal(at('/moved').length, 0)
  })

  it('survives a huge answer, a reset connection and a receiver that hangs, without slowing transfers', async () => {
    await issue(t, bob.walletId, assetId, 20)
    receiver.requests.length = 0
    // By event, so that what each delivery meets does not depend on the order its attempts arrive
    // in: the first event's attempts get a huge answer; of the six events after it, the first
    // attempt meets a reset connection (the first event) or a receiver that never answers (the
    // others), and any later attempt a 200, so that no delivery runs out of attempts, however
    // slowly this machine lets the test look at the log.
    perEvent('/alice', (event, attempt) =>
      event === 0 ? { hugeBody: 20 * 1024 * 1024 } : attempt > 0 ? { status: 200 } : event === 1 ? { reset: true } : { hang: true },
    )
    await transfer(t, bob, alice.username, { gold: 1 })
    await waitAt('/alice', 1, 30_000)
    const [huge] = await settled(t, alice, 1, 30_000)
    assert.equal(huge.status, 'delivered')
    // One attempt; on a machine so busy that the answer took over 300 ms, more, each a timeout but the last.
    assert.equal(huge.attempt_log.at(-1).status_code, 200)
    for (const earlier of huge.attempt_log.slice(0, -1)) assert.match(earlier.error, /no answer within 300 ms/)

    // When each transfer was answered.
    const answered = new Map<number, number>()
    for (let i = 0; i < 6; i++) {
      const transaction = await transfer(t, bob, alice.username, { gold: 1 })
      answered.set(transaction.id, Date.now())
    }
    await waitAt('/alice', 3, 30_000)
    // Generous waits: on a loaded machine a round of attempts can take seconds to come round.
    const reset = await waitUntil(async () => {
      const all = await deliveries(t, alice, '?limit=100')
      return all
        .flatMap((d: { attempt_log: { error: string | null }[] }) => d.attempt_log)
        .find((a: { error: string | null }) => a.error !== null && /reset/.test(a.error))
    }, 30_000)
    assert.equal(reset.status_code, null)
    const timedOut = await waitUntil(async () => {
      const all = await deliveries(t, alice, '?limit=6')
      return all
        .flatMap((d: { attempt_log: { error: string | null }[] }) => d.attempt_log)
        .find((a: { error: string | null }) => a.error !== null && /no answer/.test(a.error))
    }, 30_000)
    assert.equal(timedOut.status_code, null)
    await settled(t, alice, 6, 30_000)
    const latest = await deliveries(t, alice, '?limit=6')
    assert.ok(
      latest.every((delivery: { status: string }) => delivery.status === 'delivered'),
      JSON.stringify(latest.map((d: { status: string }) => d.status)),
    )
    // Transfers go on at full speed: each was answered before the attempt that hung on its event
    // had ended (an attempt starts after the transfer commits and hangs for the 300 ms timeout).
    // Ordered by the clock of this one process, never a time limit.
    const eventOf = new Map(at('/alice').map((request) => [JSON.parse(request.body).data.id as number, request.headers['webhook-id']]))
    let hung = 0
    for (const [transactionId, answeredAt] of answered) {
      const delivery = latest.find((d: { event_id: string }) => d.event_id === eventOf.get(transactionId))
      const first = delivery.attempt_log[0] as { attempted_at: string; latency_ms: number; error: string | null }
      if (!/no answer/.test(first.error ?? '')) continue
      hung += 1
      assert.ok(
        answeredAt < Date.parse(first.attempted_at) + first.latency_ms,
        `transfer ${transactionId} was answered after the attempt that hung on its event ended`,
      )
    }
    assert.equal(hung, 5)
  })

  it('410 Gone removes the webhook and stops deliveries to it', async () => {
    const carol = await createUser(t.app)
    await setWebhook(t, carol, `${receiver.url}/carol`)
    receiver.requests.length = 0
    only('/carol', () => ({ status: 410 }))
    await transfer(t, alice, carol.username, { gold: 1 })
    await waitAt('/carol', 1)
    const [gone] = await settled(t, carol, 1)
    assert.equal(gone.status, 'failed')
    assert.equal(gone.last_status_code, 410)
    // One attempt; on a machine so busy that the answer took over 300 ms, more, each a timeout but
    // the last, which met the 410 and was the end of it.
    assert.equal(gone.attempts, gone.attempt_log.length)
    assert.equal(gone.attempt_log.at(-1).status_code, 410)
    for (const earlier of gone.attempt_log.slice(0, -1)) assert.match(earlier.error, /no answer within 300 ms/)
    assert.deepEqual((await t.app.inject({ method: 'GET', url: '/wallet/webhook', headers: carol.auth })).json(), { webhook: null })
    const sentBefore = at('/carol').length
    only('/carol', () => ({ status: 200 }))
    await transfer(t, alice, carol.username, { gold: 1 })
    await pause(400)
    assert.equal(at('/carol').length, sentBefore)
    assert.equal(new Set(at('/carol').map((request) => request.headers['webhook-id'])).size, 1)
    assert.equal((await deliveries(t, carol)).length, 1)
  })

  it('sends nothing after the webhook is removed, even what was waiting for a retry', async () => {
    const dave = await createUser(t.app)
    await setWebhook(t, dave, `${receiver.url}/dave`)
    receiver.requests.length = 0
    only('/dave', () => ({ status: 500 }))
    await transfer(t, alice, dave.username, { gold: 1 })
    await waitAt('/dave', 1)
    const removed = await t.app.inject({ method: 'DELETE', url: '/wallet/webhook', headers: dave.auth })
    assert.equal(removed.statusCode, 204)
    // What was sent before the removal: the first attempt, and on a machine slow to remove it, a
    // retry 0.1 s later too. Nothing after it.
    const sentBefore = at('/dave').length
    only('/dave', () => ({ status: 200 }))
    await transfer(t, alice, dave.username, { gold: 1 })
    await pause(600)
    assert.equal(at('/dave').length, sentBefore)
    assert.equal(new Set(at('/dave').map((request) => request.headers['webhook-id'])).size, 1)
    const log = await deliveries(t, dave)
    assert.equal(log.length, 1)
    assert.equal(log[0].status, 'cancelled')
    assert.equal(log[0].next_attempt_at, null)
    expectError(
      await t.app.inject({ method: 'POST', url: `/wallet/webhook/deliveries/${log[0].id}/retry`, headers: dave.auth }),
      404,
      'G006',
    )
  })

  it('sends waiting events to the new URL when the webhook is replaced', async () => {
    const erin = await createUser(t.app)
    await setWebhook(t, erin, `${receiver.url}/old`)
    receiver.requests.length = 0
    only('/old', () => ({ status: 500 }))
    await transfer(t, alice, erin.username, { gold: 1 })
    await waitAt('/old', 1)
    const secret = await setWebhook(t, erin, `${receiver.url}/new`)
    const [moved] = await waitAt('/new', 1)
    assert.equal(moved.headers['webhook-id'], at('/old')[0].headers['webhook-id'])
    assert.doesNotThrow(() => new Webhook(secret).verify(moved.body, moved.headers as Record<string, string>))
  })

  it('takes over a delivery whose lease expired (an instance died mid-attempt)', async () => {
    const frank = await createUser(t.app)
    await setWebhook(t, frank, `${receiver.url}/frank`)
    receiver.requests.length = 0
    await transfer(t, alice, frank.username, { gold: 1 })
    await waitAt('/frank', 1)
    const [delivery] = await settled(t, frank, 1)
    const leaseUntil = new Date(Date.now() + 800).toISOString()
    await t.database.db
      .updateTable('webhook_deliveries')
      .set({ status: 'pending', next_attempt_at: new Date().toISOString(), lease_until: leaseUntil })
      .where('id', '=', delivery.id)
      .execute()
    const requests = await waitAt('/frank', 2)
    assert.ok(
      requests[1].at >= Date.parse(leaseUntil) - 5,
      `taken over ${Date.parse(leaseUntil) - requests[1].at} ms before the lease ended`,
    )
    assert.equal(requests[1].headers['webhook-id'], requests[0].headers['webhook-id'])
  })

  it("writes a round's attempts in one set, each moved on only while it is pending under that attempt's lease", async () => {
    const grace = await createUser(t.app)
    await setWebhook(t, grace, `${receiver.url}/grace`)
    only('/grace', () => ({ status: 200 }))
    for (let i = 0; i < 4; i++) await transfer(t, alice, grace.username, { gold: 1 })
    const rows = (await settled(t, grace, 4)).sort((a: { id: number }, b: { id: number }) => a.id - b.id)
    const [ours, cancelled, another, released] = rows.map((row: { id: number }) => row.id)
    // Attempts so far: one each, or more on a machine so busy that an answer took over the timeout.
    const attemptsBefore = new Map(rows.map((row: { id: number; attempts: number }) => [row.id, row.attempts]))
    // Leases far ahead and nothing due, so the worker leaves these rows alone meanwhile.
    const ourLease = new Date(Date.now() + 60_000).toISOString()
    const theirLease = new Date(Date.now() + 61_000).toISOString()
    const later = new Date(Date.now() + 60_000).toISOString()
    const db = t.database.db
    const set = (id: number, status: string, lease: string) =>
      db.updateTable('webhook_deliveries').set({ status, lease_until: lease, next_attempt_at: later }).where('id', '=', id).execute()
    await set(ours, 'pending', ourLease)
    await set(cancelled, 'cancelled', ourLease)
    await set(another, 'pending', theirLease)
    await set(released, 'pending', ourLease)
    const attempt = (deliveryId: number, statusCode: number, next?: { status: 'delivered'; nextAttemptAt: null }) => ({
      deliveryId,
      leaseUntil: ourLease,
      url: `${receiver.url}/grace`,
      attemptedAt: nowIso(),
      statusCode,
      latencyMs: 7,
      error: null,
      next,
    })
    const delivered = { status: 'delivered' as const, nextAttemptAt: null }
    await recordAttempts(
      db,
      [attempt(ours, 201, delivered), attempt(cancelled, 202, delivered), attempt(another, 203, delivered), attempt(released, 204)],
      nowIso(),
    )
    const after = new Map(
      (
        await db
          .selectFrom('webhook_deliveries')
          .select(['id', 'status', 'attempts', 'lease_until', 'next_attempt_at', 'last_status_code'])
          .where('wallet_id', '=', grace.walletId)
          .execute()
      ).map((row) => [Number(row.id), row]),
    )
    const logged = await db
      .selectFrom('webhook_attempts')
      .select(['delivery_id', 'status_code', 'latency_ms'])
      .where('status_code', 'in', [201, 202, 203, 204])
      .execute()
    // Every attempt is counted and logged, whatever became of its delivery meanwhile.
    for (const [id, code] of [
      [ours, 201],
      [cancelled, 202],
      [another, 203],
      [released, 204],
    ]) {
      assert.equal(after.get(id)?.attempts, (attemptsBefore.get(id) as number) + 1, `delivery ${id}`)
      assert.equal(after.get(id)?.last_status_code, code)
      assert.deepEqual(
        logged.filter((row) => Number(row.delivery_id) === id).map((row) => [Number(row.status_code), Number(row.latency_ms)]),
        [[code, 7]],
      )
    }
    // Pending under our lease: moved on, lease dropped.
    assert.equal(after.get(ours)?.status, 'delivered')
    assert.equal(after.get(ours)?.lease_until, null)
    // Cancelled meanwhile: stays cancelled, our lease dropped.
    assert.equal(after.get(cancelled)?.status, 'cancelled')
    assert.equal(after.get(cancelled)?.lease_until, null)
    // Leased again by another instance: left as it is, its lease kept.
    assert.equal(after.get(another)?.status, 'pending')
    assert.equal(after.get(another)?.lease_until, theirLease)
    // Given back (shutdown): still pending and due as it was, lease dropped.
    assert.equal(after.get(released)?.status, 'pending')
    assert.equal(after.get(released)?.next_attempt_at, later)
    assert.equal(after.get(released)?.lease_until, null)
    await db
      .updateTable('webhook_deliveries')
      .set({ status: 'delivered', lease_until: null, next_attempt_at: null })
      .where('wallet_id', '=', grace.walletId)
      .execute()
  })
})

describe('webhook SSRF guard (WEBHOOK_ALLOW_PRIVATE=false)', () => {
  let t: TestApp
  let receiver: Receiver
  let alice: TestUser
  const realLookup = dns.lookup
  const realPromisesLookup = dns.promises.lookup
  // Names under .test never exist; the fake resolver answers for them like a hostile DNS server.
  const answers: Record<string, { setTime: string; connectTime: string }> = {
    'loopback.test': { setTime: '127.0.0.1', connectTime: '127.0.0.1' },
    'private.test': { setTime: '10.1.2.3', connectTime: '10.1.2.3' },
    'mixed.test': { setTime: '93.184.215.14', connectTime: '93.184.215.14' },
    'rebind.test': { setTime: '93.184.215.14', connectTime: '127.0.0.1' },
  }
  before(async () => {
    t = await buildTestApp({ ...FAST, WEBHOOK_ALLOW_PRIVATE: 'false' })
    receiver = await startReceiver()
    alice = await createUser(t.app)
    const family = (address: string) => (address.includes(':') ? 6 : 4)
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    ;(dns.promises as any).lookup = async (hostname: string, options: unknown) => {
      const answer = answers[hostname]
      if (hostname.endsWith('.invalid')) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' })
      if (!answer) return realPromisesLookup(hostname, options as dns.LookupAllOptions)
      const list = [{ address: answer.setTime, family: family(answer.setTime) }]
      if (hostname === 'mixed.test') list.push({ address: '::1', family: 6 })
      return list
    }
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    ;(dns as any).lookup = (hostname: string, options: any, callback: any) => {
      const answer = answers[hostname]
      if (!answer) return realLookup(hostname, options, callback)
      const address = answer.connectTime
      if (options?.all) return callback(null, [{ address, family: family(address) }])
      callback(null, address, family(address))
    }
  })
  after(async () => {
    dns.lookup = realLookup
    dns.promises.lookup = realPromisesLookup
    await t.close()
    await receiver.close()
  })

  it('refuses loopback, private, link-local, CGNAT, multicast and unspecified targets with 400 W010', async () => {
    const refused = [
      'http://127.0.0.1/hook',
      'http://127.1.2.3:8080/hook',
      'http://2130706433/hook',
      'http://0x7f.1/hook',
      'http://10.0.0.1/hook',
      'http://172.16.5.4/hook',
      'http://192.168.1.1/hook',
      'http://169.254.169.254/latest/meta-data',
      'http://100.64.0.1/hook',
      'http://0.0.0.0/hook',
      'http://224.0.0.1/hook',
      'http://255.255.255.255/hook',
      'http://[::1]/hook',
      'http://[::]/hook',
      'http://[::ffff:127.0.0.1]/hook',
      'http://[::ffff:a00:1]/hook',
      'http://[fe80::1]/hook',
      'http://[fd00::1]/hook',
      'http://[ff02::1]/hook',
      'http://localhost/hook',
      'http://LOCALHOST.:8080/hook',
      'http://api.localhost/hook',
      'http://loopback.test/hook',
      'http://private.test/hook',
      'http://mixed.test/hook',
      'http://nowhere.invalid/hook',
    ]
    for (const webhook of refused) {
      const response = await t.app.inject({ method: 'PUT', url: '/wallet/webhook', headers: alice.auth, payload: { webhook } })
      assert.equal(response.statusCode, 400, `${webhook} was accepted`)
      expectError(response, 400, 'W010')
    }
    assert.deepEqual((await t.app.inject({ method: 'GET', url: '/wallet/webhook', headers: alice.auth })).json(), { webhook: null })
  })

  it('accepts public addresses', async () => {
    for (const webhook of ['https://93.184.215.14/hook', 'http://[2606:4700:4700::1111]/hook', 'https://rebind.test/hook']) {
      const response = await t.app.inject({ method: 'PUT', url: '/wallet/webhook', headers: alice.auth, payload: { webhook } })
      assert.equal(response.statusCode, 200, `${webhook}: ${response.body}`)
    }
  })

  it('checks again at connect time: a name that now resolves to loopback is never called (DNS rebinding)', async () => {
    const port = new URL(receiver.url).port
    await setWebhook(t, alice, `http://rebind.test:${port}/hook`)
    const assetId = (await createAsset(t, { name: 'gold' })).id
    await issue(t, alice.walletId, assetId, 5)
    const [delivery] = await waitUntil(async () => {
      const log = await deliveries(t, alice)
      return log.length > 0 && log[0].attempts > 0 ? log : undefined
    })
    assert.equal(delivery.attempt_log[0].status_code, null)
    assert.match(delivery.attempt_log[0].error, /refused.*127\.0\.0\.1/)
    assert.equal(receiver.requests.length, 0)
  })

  it('refuses a private literal stored before the guard was turned on', async () => {
    const bob = await createUser(t.app)
    await t.database.db
      .insertInto('webhooks')
      .values({
        wallet_id: bob.walletId,
        url: `${receiver.url}/stored`,
        secret: 'whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA',
        created_at: new Date().toISOString(),
      })
      .execute()
    await transfer(t, alice, bob.username, { gold: 1 })
    const [delivery] = await waitUntil(async () => {
      const log = await deliveries(t, bob)
      return log.length > 0 && log[0].attempts > 0 ? log : undefined
    })
    assert.match(delivery.attempt_log[0].error, /refused/)
    assert.equal(receiver.requests.length, 0)
  })
})
