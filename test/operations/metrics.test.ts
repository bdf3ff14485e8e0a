import assert from 'node:assert/strict'
import fs from 'node:fs'
import { after, before, describe, it } from 'node:test'
import { STORAGE, buildTestApp, type TestApp } from '../helpers/app.ts'
import { createUser, type TestUser } from '../helpers/factories.ts'
import { startReceiver, waitUntil, type Receiver } from '../helpers/receiver.ts'

/** The value of one sample in the Prometheus text of /metrics, or undefined when absent. */
function sample(text: string, name: string, labels = ''): number | undefined {
  const line = text.split('\n').find((row) => row.startsWith(`${name}${labels} `) || (labels === '' && row.startsWith(`${name} `)))
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1))
}

describe(`operator metrics on ${STORAGE}`, () => {
  let t: TestApp
  let receiver: Receiver
  let alice: TestUser
  let bob: TestUser

  before(async () => {
    t = await buildTestApp({ WEBHOOK_RETRY_SCHEDULE: '3600' })
    receiver = await startReceiver(() => ({ status: 503 }))
    alice = await createUser(t.app)
    bob = await createUser(t.app)
    await t.app.inject({ method: 'PUT', url: '/wallet/webhook', headers: bob.auth, payload: { webhook: `${receiver.url}/down` } })
    const asset = await t.app.inject({ method: 'POST', url: '/assets', headers: t.admin, payload: { name: 'metric', value: 1 } })
    await t.app.inject({
      method: 'POST',
      url: `/wallets/${alice.walletId}/assets`,
      headers: t.admin,
      payload: { id: asset.json().id, quantity: 10 },
    })
  })
  after(async () => {
    await receiver.close()
    await t.close()
  })

  const metrics = async () => (await t.app.inject({ method: 'GET', url: '/metrics', headers: t.admin })).body

  it('counts transfers committed, replayed and refused by code, and the batches they commit in', async () => {
    const send = (quantity: number, key?: string) =>
      t.app.inject({
        method: 'POST',
        url: '/wallet/transactions',
        headers: { ...alice.auth, ...(key ? { 'idempotency-key': key } : {}) },
        payload: { recipient: bob.username, assets: { metric: quantity } },
      })
    assert.equal((await send(1, 'metrics-once')).statusCode, 201)
    assert.equal((await send(1, 'metrics-once')).statusCode, 201)
    assert.equal((await send(2)).statusCode, 201)
    assert.equal((await send(1000)).json().code, 'I002')
    assert.equal(
      (
        await t.app.inject({
          method: 'POST',
          url: '/wallet/transactions',
          headers: alice.auth,
          payload: { recipient: 'nobodyatall', assets: { metric: 1 } },
        })
      ).json().code,
      'U003',
    )
    const text = await metrics()
    assert.equal(sample(text, 'coffer_transfers_total', '{outcome="committed",code=""}'), 2)
    assert.equal(sample(text, 'coffer_transfers_total', '{outcome="replayed",code=""}'), 1)
    assert.equal(sample(text, 'coffer_transfers_total', '{outcome="refused",code="I002"}'), 1)
    assert.equal(sample(text, 'coffer_transfers_total', '{outcome="refused",code="U003"}'), 1)
    // Every committed transfer went through a batch (issuance does not).
    assert.ok((sample(text, 'coffer_transfer_batch_size_count') ?? 0) >= 2, text.match(/coffer_transfer_batch_size_count.*/)?.[0])
    assert.ok((sample(text, 'coffer_transfer_batch_size_sum') ?? 0) >= 2)
  })

  it('leaves dry runs out of the transfers it counts', async () => {
    // Every answer counted, whatever its outcome.
    const count = async () =>
      (await metrics())
        .split('\n')
        .filter((row) => row.startsWith('coffer_transfers_total{'))
        .reduce((sum, row) => sum + Number(row.slice(row.lastIndexOf(' ') + 1)), 0)
    const before = await count()
    const dry = await t.app.inject({
      method: 'POST',
      url: '/wallet/transactions?dry_run=true',
      headers: alice.auth,
      payload: { recipient: bob.username, assets: { metric: 1 } },
    })
    assert.equal(dry.statusCode, 200, dry.body)
    assert.equal(await count(), before)
  })

  it('shows what wallets owe on credit, by asset, and how many owe', async () => {
    const tab = await t.app.inject({ method: 'POST', url: '/assets', headers: t.admin, payload: { name: 'tabmetric', value: 1 } })
    const owing = [await createUser(t.app), await createUser(t.app)]
    // Not bob, whose webhook deliveries the backlog test counts.
    const lender = await createUser(t.app)
    for (const user of owing) {
      const credit = await t.app.inject({
        method: 'PUT',
        url: `/wallets/${user.walletId}/credit`,
        headers: t.admin,
        payload: { asset_id: tab.json().id, limit: 100 },
      })
      assert.equal(credit.statusCode, 200, credit.body)
    }
    const before = sample(await metrics(), 'coffer_wallets_owing') ?? 0
    assert.equal(sample(await metrics(), 'coffer_owed', '{asset="tabmetric"}'), undefined)
    for (const [user, quantity] of [
      [owing[0], 30],
      [owing[1], 12],
    ] as const) {
      const sent = await t.app.inject({
        method: 'POST',
        url: '/wallet/transactions',
        headers: user.auth,
        payload: { recipient: lender.username, assets: { tabmetric: quantity } },
      })
      assert.equal(sent.statusCode, 201, sent.body)
    }
    const text = await metrics()
    assert.equal(sample(text, 'coffer_owed', '{asset="tabmetric"}'), 42)
    assert.equal(sample(text, 'coffer_wallets_owing'), before + 2)
    // Paid back: nobody owes it any more, and its series is gone.
    const repaid = await t.app.inject({
      method: 'POST',
      url: '/wallet/transactions',
      headers: lender.auth,
      payload: { recipient: owing[0].username, assets: { tabmetric: 30 } },
    })
    assert.equal(repaid.statusCode, 201, repaid.body)
    const after = await metrics()
    assert.equal(sample(after, 'coffer_owed', '{asset="tabmetric"}'), 12)
    assert.equal(sample(after, 'coffer_wallets_owing'), before + 1)
  })

  it('shows the webhook backlog and the age of its oldest delivery', async () => {
    // Bob's receiver answers 503: his deliveries wait an hour for their retry.
    await receiver.waitFor(2, 10_000)
    await waitUntil(async () => sample(await metrics(), 'coffer_webhook_backlog') === 2, 10_000, 'a backlog of 2')
    const age = sample(await metrics(), 'coffer_webhook_oldest_pending_seconds') ?? -1
    assert.ok(age > 0 && age < 60, `oldest pending ${age} s`)
  })

  it('shows the event-stream clients and, on PostgreSQL, the pool in use', async () => {
    const text = await metrics()
    assert.ok((sample(text, 'coffer_event_streams') ?? -1) >= 0, 'coffer_event_streams is exported')
    if (STORAGE === 'postgres') {
      assert.equal(sample(text, 'coffer_db_pool_connections', '{state="max"}'), 20)
      assert.ok((sample(text, 'coffer_db_pool_connections', '{state="idle"}') ?? -1) >= 0)
      assert.ok((sample(text, 'coffer_db_pool_waiting') ?? -1) >= 0, 'coffer_db_pool_waiting is exported')
    } else {
      assert.equal(sample(text, 'coffer_db_pool_waiting'), undefined)
    }
  })

  it('exports every metric the Grafana dashboard in docs/ plots', async () => {
    const dashboard = fs.readFileSync('docs/grafana-dashboard.json', 'utf8')
    const plotted = new Set([...dashboard.matchAll(/\b(coffer_[a-z_]+)/g)].map((match) => match[1].replace(/_(bucket|sum|count)$/, '')))
    const text = await metrics()
    for (const name of plotted) {
      if (name.startsWith('coffer_db_pool') && STORAGE === 'sqlite') continue
      assert.match(text, new RegExp(`^# HELP ${name} `, 'm'), `${name} is plotted but not exported`)
    }
    assert.ok(plotted.size >= 9)
  })
})
