import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import fc from 'fast-check'
import { readWalletEvents } from '../../src/events/events.repository.ts'
import type { Asset } from '../../src/ledger/ledger.types.ts'
import type { Monitor } from '../../src/monitors/monitors.service.ts'
import { buildPeerApp, buildTestAppWithAsset, expectError, STORAGE, type TestApp } from '../helpers/app.ts'
import { createMonitor, createUser, fundedUser, issue, transfer, type TestUser } from '../helpers/factories.ts'

/** Balance monitors through the HTTP API, on either storage. */
describe(`monitors (${STORAGE})`, () => {
  let t: TestApp
  let gold: Asset

  before(async () => ({ t, asset: gold } = await buildTestAppWithAsset('gold')))
  after(async () => t.close())

  const watch = (user: TestUser, body: Record<string, unknown>) => createMonitor(t, user, body)

  async function balanceEvents(user: TestUser): Promise<{ type: string; data: { monitor: Monitor; holding: { quantity: number } } }[]> {
    const events = await readWalletEvents(t.database.db, user.walletId, 0, Number.MAX_SAFE_INTEGER, 10_000)
    return events.filter((event) => event.type.startsWith('balance.')).map((event) => JSON.parse(event.payload))
  }

  it('tells once when gold drops below 100 and once when it comes back, written with the moves', async () => {
    const alice = await fundedUser(t, [[gold, 150]])
    const bob = await createUser(t.app)
    const monitor = await watch(alice, { asset: gold.name, below: 100 })
    assert.deepEqual(
      { ...monitor, id: 0, created_at: '' },
      { id: 0, asset: gold.name, below: 100, above: null, state: 'normal', created_at: '' },
    )
    await transfer(t, alice, bob.username, { [gold.name]: 40 }) // 110: still normal
    await transfer(t, alice, bob.username, { [gold.name]: 20 }) // 90: crossed
    await transfer(t, alice, bob.username, { [gold.name]: 10 }) // 80: still crossed, no second event
    await issue(t, alice.walletId, gold.id, 30) // 110: restored
    const events = await balanceEvents(alice)
    assert.deepEqual(
      events.map((event) => [event.type, event.data.holding.quantity, event.data.monitor.state]),
      [
        ['balance.crossed', 90, 'crossed'],
        ['balance.restored', 110, 'normal'],
      ],
    )
    assert.equal(events[0].data.monitor.id, monitor.id)
    const listed = await t.app.inject({ method: 'GET', url: '/wallet/monitors', headers: alice.auth })
    assert.equal(listed.json()[0].state, 'normal')
  })

  it('counts what holds reserve, watches above, and starts crossed without an event when things stand so', async () => {
    const alice = await fundedUser(t, [[gold, 50]])
    const bob = await createUser(t.app)
    const low = await watch(alice, { asset: gold.name, below: 100 })
    assert.equal(low.state, 'crossed')
    const high = await watch(alice, { asset: gold.name, above: 40 })
    assert.equal(high.state, 'crossed')
    const hold = await t.app.inject({
      method: 'POST',
      url: '/wallet/holds',
      headers: alice.auth,
      payload: { recipient: bob.username, assets: { [gold.name]: 20 } },
    })
    assert.equal(hold.statusCode, 201, hold.body)
    // 30 left to spend: no longer above 40.
    const events = await balanceEvents(alice)
    assert.deepEqual(
      events.map((event) => [event.type, event.data.monitor.id]),
      [['balance.restored', high.id]],
    )
  })

  it('refuses what is not exactly one threshold, an unknown asset, a 21st monitor; deletes with M000 for unknown ones', async () => {
    const alice = await fundedUser(t, [[gold, 1]])
    const refusals: [Record<string, unknown>, number, string][] = [
      [{ asset: gold.name }, 400, 'G000'],
      [{ asset: gold.name, below: 1, above: 2 }, 400, 'G000'],
      [{ asset: gold.name, below: -1 }, 400, 'G000'],
      [{ asset: gold.name, below: 1.5 }, 400, 'G000'],
      [{ asset: 'nosuchasset', below: 1 }, 400, 'I001'],
    ]
    for (const [body, status, code] of refusals)
      expectError(await t.app.inject({ method: 'POST', url: '/wallet/monitors', headers: alice.auth, payload: body }), status, code)
    const made: Monitor[] = []
    for (let i = 0; i < 20; i++) made.push(await watch(alice, { asset: gold.name, above: i }))
    expectError(
      await t.app.inject({ method: 'POST', url: '/wallet/monitors', headers: alice.auth, payload: { asset: gold.name, above: 99 } }),
      409,
      'M001',
    )
    const removed = await t.app.inject({ method: 'DELETE', url: `/wallet/monitors/${made[0].id}`, headers: alice.auth })
    assert.equal(removed.statusCode, 204)
    expectError(await t.app.inject({ method: 'DELETE', url: `/wallet/monitors/${made[0].id}`, headers: alice.auth }), 404, 'M000')
    const listed = await t.app.inject({ method: 'GET', url: '/wallet/monitors', headers: alice.auth })
    assert.equal(listed.json().length, 19)
  })

  it(
    'sends exactly one event per crossing under concurrent transfers from two instances (property)',
    { skip: STORAGE !== 'postgres' },
    async () => {
      const peer = await buildPeerApp(t)
      try {
        await fc.assert(
          fc.asyncProperty(
            fc.array(fc.tuple(fc.boolean(), fc.integer({ min: 1, max: 30 })), { minLength: 10, maxLength: 40 }),
            fc.integer({ min: 20, max: 80 }),
            async (steps, threshold) => {
              const watched = await fundedUser(t, [[gold, 60]])
              const other = await fundedUser(t, [[gold, 10_000]])
              await watch(watched, { asset: gold.name, below: threshold })
              // Sends out of and into the watched wallet, all at once, through both instances.
              await Promise.all(
                steps.map(([out, quantity], i) => {
                  const app = i % 2 === 0 ? t.app : peer.app
                  const [from, to] = out ? [watched, other] : [other, watched]
                  return app.inject({
                    method: 'POST',
                    url: '/wallet/transactions',
                    headers: from.auth,
                    payload: { recipient: to.username, assets: { [gold.name]: quantity } },
                  })
                }),
              )
              // Replay the committed transfers in commit order: the crossings a careful observer counts.
              const history = await t.database.db
                .selectFrom('running_balances')
                .select(['quantity', 'transaction_id'])
                .where('wallet_id', '=', watched.walletId)
                .where('asset_id', '=', gold.id)
                .orderBy('transaction_id')
                .execute()
              const expected: string[] = []
              let crossed = 60 < threshold
              for (const row of history) {
                const now = Number(row.quantity) < threshold
                if (now !== crossed) expected.push(now ? 'balance.crossed' : 'balance.restored')
                crossed = now
              }
              const events = await balanceEvents(watched)
              assert.deepEqual(
                events.map((event) => event.type),
                expected,
              )
              const listed = await t.app.inject({ method: 'GET', url: '/wallet/monitors', headers: watched.auth })
              assert.equal(listed.json()[0].state, crossed ? 'crossed' : 'normal')
            },
          ),
          { numRuns: 15 },
        )
      } finally {
        await peer.close()
      }
    },
  )
})
