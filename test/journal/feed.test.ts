import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { buildTestApp, expectError, type TestApp } from '../helpers/app.ts'
import { createAsset, fundedUser, transfer, type TestUser } from '../helpers/factories.ts'

interface FeedEntry {
  id: number
  position: number
  hash: string
  kind: string
}

async function feed(t: TestApp, query: string): Promise<{ entries: FeedEntry[]; next: number }> {
  const response = await t.app.inject({ method: 'GET', url: `/admin/journal?${query}`, headers: t.admin })
  assert.equal(response.statusCode, 200, response.body)
  return response.json()
}

/** Follows the feed until `count` entries arrived (long-polling). */
async function follow(t: TestApp, count: number): Promise<FeedEntry[]> {
  const seen: FeedEntry[] = []
  let next = 0
  while (seen.length < count) {
    const page = await feed(t, `after=${next}&limit=1000&wait=5`)
    seen.push(...page.entries)
    next = page.next
  }
  return seen
}

describe('the journal feed', () => {
  let t: TestApp
  let alice: TestUser
  let bob: TestUser
  before(async () => {
    t = await buildTestApp({ CHECKPOINT_INTERVAL_MS: '100' })
    const gold = await createAsset(t, { name: 'gold' })
    alice = await fundedUser(t, [[gold, 1000]])
    bob = await fundedUser(t, [[gold, 10]])
  })
  after(() => t.close())

  it('gives every transaction a position from 1 without gaps and a chained hash, in commit order', async () => {
    for (let i = 0; i < 5; i++) await transfer(t, alice, bob.username, { gold: 1 })
    const entries = await follow(t, 7)
    assert.deepEqual(
      entries.map((entry) => entry.position),
      [1, 2, 3, 4, 5, 6, 7],
    )
    assert.ok(entries.every((entry) => /^[0-9a-f]{64}$/.test(entry.hash)))
    assert.deepEqual(
      entries.map((entry) => entry.kind),
      ['issuance', 'issuance', 'transfer', 'transfer', 'transfer', 'transfer', 'transfer'],
    )
    const history = await t.app.inject({ method: 'GET', url: '/wallet/transactions?limit=100', headers: bob.auth })
    const positions = (history.json() as FeedEntry[]).map((transaction) => transaction.position).sort((a, b) => a - b)
    assert.deepEqual(positions, [2, 3, 4, 5, 6, 7])
  })

  it('answers after, limit and next; waits with wait and answers empty when nothing comes', async () => {
    const page = await feed(t, 'after=2&limit=2')
    assert.deepEqual(
      page.entries.map((entry) => entry.position),
      [3, 4],
    )
    assert.equal(page.next, 4)
    const empty = await feed(t, 'after=1000&wait=1')
    assert.deepEqual(empty, { entries: [], next: 1000 })
  })

  it('refuses a wrong after, limit or wait with G002', async () => {
    for (const query of ['after=-1', 'limit=0', 'limit=1001', 'wait=31', 'after=abc', 'wait=1.5']) {
      expectError(await t.app.inject({ method: 'GET', url: `/admin/journal?${query}`, headers: t.admin }), 400, 'G002')
    }
  })
})
