import assert from 'node:assert/strict'
import { once } from 'node:events'
import path from 'node:path'
import { after, before, describe, it } from 'node:test'
import { Worker } from 'node:worker_threads'
import type { LightMyRequestResponse } from 'fastify'
import { inTransaction } from '../../src/db/dialect.ts'
import { insertAsset } from '../../src/ledger/assets.repository.ts'
import { verifyLedger } from '../../src/ledger/verify.ts'
import { buildTestApp, openTestDatabase, STORAGE, type TestApp } from '../helpers/app.ts'
import { createUser, type TestUser } from '../helpers/factories.ts'

/**
 * Many transfers at once over the same rows. PostgreSQL is where lost updates, overdrafts and
 * deadlocks could happen; SQLite serializes writers, so there it is a cheap sanity check.
 */
describe(`concurrent transfers (${STORAGE})`, () => {
  let t: TestApp
  let assetIds: Record<string, number>

  before(async () => {
    t = await buildTestApp()
    assetIds = {}
    for (const name of ['gold', 'silver']) {
      const response = await t.app.inject({ method: 'POST', url: '/assets', headers: t.admin, payload: { name, value: 1 } })
      assetIds[name] = response.json().id
    }
  })
  after(async () => {
    await t.close()
  })

  async function issue(user: TestUser, name: string, quantity: number): Promise<void> {
    const response = await t.app.inject({
      method: 'POST',
      url: `/wallets/${user.walletId}/assets`,
      headers: t.admin,
      payload: { id: assetIds[name], quantity },
    })
    assert.equal(response.statusCode, 201, response.body)
  }

  async function balances(user: TestUser): Promise<Record<string, number>> {
    const response = await t.app.inject({ method: 'GET', url: '/wallet/assets', headers: user.auth })
    return Object.fromEntries(
      (response.json() as { asset: { name: string }; quantity: number }[]).map((holding) => [holding.asset.name, holding.quantity]),
    )
  }

  function send(from: TestUser, to: TestUser, assets: Record<string, number>) {
    return t.app.inject({ method: 'POST', url: '/wallet/transactions', headers: from.auth, payload: { recipient: to.username, assets } })
  }

  /** Every response is a 201 or an I002 refusal: never a 500, a deadlock or a serialization error. */
  function assertOnlySuccessOrOverdraft(responses: LightMyRequestResponse[]): LightMyRequestResponse[] {
    for (const response of responses) {
      assert.ok(
        response.statusCode === 201 || (response.statusCode === 400 && response.json().code === 'I002'),
        `${response.statusCode} ${response.body}`,
      )
    }
    return responses.filter((response) => response.statusCode === 201)
  }

  it('lets 60 parallel transfers that together overdraw a wallet succeed exactly as far as the funds go', async () => {
    const spender = await createUser(t.app)
    const recipients = [await createUser(t.app), await createUser(t.app), await createUser(t.app)]
    await issue(spender, 'gold', 1000)
    const responses = await Promise.all(Array.from({ length: 60 }, (_, i) => send(spender, recipients[i % 3], { gold: 25 })))
    const successes = assertOnlySuccessOrOverdraft(responses)
    const left = (await balances(spender)).gold ?? 0
    assert.equal(successes.length * 25, 1000 - left, 'what left the wallet is exactly what the successes sent')
    assert.equal(successes.length, 40, 'no request was refused while funds remained')
    assert.equal(left, 0)
    let received = 0
    for (const recipient of recipients) received += (await balances(recipient)).gold ?? 0
    assert.equal(received, successes.length * 25, 'what arrived is exactly what left')
    const history = await t.app.inject({ method: 'GET', url: '/wallet/transactions?direction=sent&limit=100', headers: spender.auth })
    assert.equal(history.json().length, successes.length, 'one recorded transaction per success')
    assert.deepEqual(new Set(successes.map((response) => response.json().id)).size, successes.length)
  })

  it('moves all or nothing when parallel multi-asset transfers run one asset dry', async () => {
    const spender = await createUser(t.app)
    const recipient = await createUser(t.app)
    await issue(spender, 'gold', 2000)
    await issue(spender, 'silver', 300)
    // Silver runs out after 30 transfers, with gold to spare: no transfer may move gold alone.
    const responses = await Promise.all(
      Array.from({ length: 60 }, (_, i) => send(spender, recipient, i % 2 === 0 ? { gold: 25, silver: 10 } : { silver: 10, gold: 25 })),
    )
    const successes = assertOnlySuccessOrOverdraft(responses)
    assert.equal(successes.length, 30)
    assert.deepEqual(await balances(spender), { gold: 2000 - 30 * 25 })
    assert.deepEqual(await balances(recipient), { gold: 30 * 25, silver: 300 })
  })

  it('keeps totals when two wallets pay each other in parallel bursts, without deadlock errors', async () => {
    const a = await createUser(t.app)
    const b = await createUser(t.app)
    await issue(a, 'gold', 500)
    await issue(a, 'silver', 500)
    await issue(b, 'gold', 500)
    await issue(b, 'silver', 500)
    const expected = { a: { gold: 500, silver: 500 }, b: { gold: 500, silver: 500 } }
    for (let round = 0; round < 5; round++) {
      const planned: { from: 'a' | 'b'; gold: number; silver: number }[] = []
      const requests: Promise<LightMyRequestResponse>[] = []
      for (let i = 0; i < 40; i++) {
        const from = i % 2 === 0 ? 'a' : 'b'
        const gold = 1 + ((i * 7 + round) % 40)
        const silver = 1 + ((i * 11 + round * 3) % 30)
        planned.push({ from, gold, silver })
        // Alternate the key order so that the body order never decides the lock order.
        const assets = i % 4 < 2 ? { gold, silver } : { silver, gold }
        requests.push(from === 'a' ? send(a, b, assets) : send(b, a, assets))
      }
      const responses = await Promise.all(requests)
      assertOnlySuccessOrOverdraft(responses)
      responses.forEach((response, i) => {
        if (response.statusCode !== 201) return
        const { from, gold, silver } = planned[i]
        const to = from === 'a' ? 'b' : 'a'
        expected[from].gold -= gold
        expected[from].silver -= silver
        expected[to].gold += gold
        expected[to].silver += silver
      })
      const [balanceA, balanceB] = [await balances(a), await balances(b)]
      assert.equal((balanceA.gold ?? 0) + (balanceB.gold ?? 0), 1000, `gold total after round ${round}`)
      assert.equal((balanceA.silver ?? 0) + (balanceB.silver ?? 0), 1000, `silver total after round ${round}`)
      assert.deepEqual({ gold: balanceA.gold ?? 0, silver: balanceA.silver ?? 0 }, expected.a, `a after round ${round}`)
      assert.deepEqual({ gold: balanceB.gold ?? 0, silver: balanceB.silver ?? 0 }, expected.b, `b after round ${round}`)
    }
    const report = await verifyLedger(t.database.db)
    assert.deepEqual(report.problems, [])
  })

  it('keeps a chain of wallets consistent when each pays the next at once', async () => {
    const ring: TestUser[] = []
    for (let i = 0; i < 4; i++) ring.push(await createUser(t.app))
    for (const user of ring) await issue(user, 'gold', 100)
    const requests: Promise<LightMyRequestResponse>[] = []
    for (let burst = 0; burst < 10; burst++) {
      ring.forEach((user, i) => requests.push(send(user, ring[(i + 1) % ring.length], { gold: 3 + burst })))
    }
    assertOnlySuccessOrOverdraft(await Promise.all(requests))
    let total = 0
    for (const user of ring) total += (await balances(user)).gold ?? 0
    assert.equal(total, 400)
  })
})

describe(
  'another process writing the SQLite file (the CLI beside a running server)',
  { skip: STORAGE !== 'sqlite' && 'SQLite only' },
  () => {
    it('waits for the other process to release the write lock, then writes: no error, no second attempt', async () => {
      const { database, dataDir } = await openTestDatabase()
      // The other process: a thread with its own connection, holding the write lock for 300 ms.
      const other = new Worker(
        `const { parentPort, workerData } = require('node:worker_threads')
      const db = new (require('better-sqlite3'))(workerData.file)
      db.exec('begin immediate')
      db.prepare("insert into assets (name, name_key, value, created_at) values ('fromcli', 'fromcli', 1, '2026-11-22T00:00:00.000Z')").run()
      parentPort.postMessage('locked')
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 300)
      db.exec('commit')
      db.close()`,
        { eval: true, workerData: { file: path.join(dataDir, 'coffer.sqlite') } },
      )
      try {
        await once(other, 'message')
        let attempts = 0
        await inTransaction(database, async (trx) => {
          attempts += 1
          // A read first, as the ledger's writes do: a transaction begun deferred would now be
          // refused at its first write (SQLITE_BUSY), without waiting.
          await trx.selectFrom('assets').select('id').execute()
          await insertAsset(trx, 'fromserver', 1)
        })
        assert.equal(attempts, 1)
        const names = (await database.db.selectFrom('assets').select('name').execute()).map((row) => row.name).sort()
        assert.deepEqual(names, ['fromcli', 'fromserver'])
      } finally {
        await other.terminate()
        await database.close()
      }
    })
  },
)
