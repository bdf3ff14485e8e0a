import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import Fastify, { type LightMyRequestResponse } from 'fastify'
import { loadConfig } from '../../src/config.ts'
import auth from '../../src/http/auth.ts'
import { buildPeerApp, buildTestApp, STORAGE, type TestApp } from '../helpers/app.ts'
import { createAsset, createUser, issue, type TestUser } from '../helpers/factories.ts'

/** Wallet keys with scopes and limits: what a key may do (K000), whom it may pay (K002), how much at once (K001). */

type Asset = { id: number; name: string }

describe('wallet key scopes and limits', () => {
  let t: TestApp
  let gold: Asset
  let silver: Asset

  before(async () => {
    t = await buildTestApp()
    gold = await createAsset(t, { name: 'gold' })
    silver = await createAsset(t, { name: 'silver' })
  })
  after(async () => {
    await t.close()
  })

  const call = (method: string, url: string, headers: Record<string, string>, payload?: object) =>
    t.app.inject({ method: method as 'GET', url, headers, ...(payload === undefined ? {} : { payload }) })

  function expectCode(response: LightMyRequestResponse, status: number, code: string): Record<string, string> {
    assert.equal(response.statusCode, status, response.body)
    const body = response.json()
    assert.equal(body.code, code, response.body)
    return body
  }

  async function funded(): Promise<TestUser> {
    const user = await createUser(t.app)
    await issue(t, user.walletId, gold.id, 1000)
    await issue(t, user.walletId, silver.id, 1000)
    return user
  }

  async function key(owner: TestUser, body: object): Promise<{ auth: Record<string, string>; object: Record<string, unknown> }> {
    const response = await call('POST', '/wallet/sessions', owner.auth, body)
    assert.equal(response.statusCode, 201, response.body)
    const object = response.json()
    return { auth: { authorization: `Bearer ${object.token}` }, object }
  }

  async function holdings(user: TestUser): Promise<Record<string, number>> {
    const response = await call('GET', '/wallet/assets', user.auth)
    return Object.fromEntries((response.json() as { asset: Asset; quantity: number }[]).map((row) => [row.asset.name, row.quantity]))
  }

  describe('the scope of each wallet-auth route', () => {
    it('is declared by every wallet-auth route, one scope each', () => {
      const declared = Object.fromEntries(t.app.walletRoutes.map((route) => [`${route.method} ${route.url}`, route.scope]))
      assert.deepEqual(declared, {
        'GET /wallet/assets': 'read',
        'GET /assets': 'read',
        'POST /wallet/transactions': 'send',
        'POST /wallet/transactions/:id/refund': 'send',
        'POST /wallet/transactions/batch': 'send',
        'GET /wallet/transactions': 'read',
        'POST /wallet/holds': 'hold',
        'GET /wallet/holds': 'read',
        'GET /wallet/holds/:id': 'read',
        'POST /wallet/holds/:id/capture': 'hold',
        'POST /wallet/holds/:id/void': 'hold',
        'GET /wallet/events': 'read',
        'GET /wallet/transactions/:id/proof': 'read',
        'POST /wallet/schedules': 'schedule',
        'GET /wallet/schedules': 'read',
        'GET /wallet/schedules/:id': 'read',
        'GET /wallet/schedules/:id/upcoming': 'read',
        'GET /wallet/schedules/:id/runs': 'read',
        'POST /wallet/schedules/:id/pause': 'schedule',
        'POST /wallet/schedules/:id/resume': 'schedule',
        'DELETE /wallet/schedules/:id': 'schedule',
        'POST /wallet/monitors': 'monitor',
        'GET /wallet/monitors': 'read',
        'DELETE /wallet/monitors/:id': 'monitor',
        'GET /journal/checkpoint': 'read',
        'GET /journal/consistency': 'read',
      })
    })

    it("needs read for the journal's reads open to every caller", async () => {
      const owner = await funded()
      const sender = await key(owner, { scopes: ['send'] })
      const reader = await key(owner, { scopes: ['read'] })
      for (const url of ['/journal/checkpoint', '/journal/consistency?from=1&to=1']) {
        expectCode(await call('GET', url, sender.auth), 403, 'K000')
        assert.notEqual((await call('GET', url, reader.auth)).json().code, 'K000')
      }
    })

    it('cannot be left out: a wallet-auth route without a scope is not registered', async () => {
      const app = Fastify()
      await app.register(auth, {
        config: loadConfig({ DATA_DIR: '/nonexistent', ADMIN_API_KEY: 'an admin key for this test only' }),
        adminKeyHash: '',
        limiter: { hit: () => undefined, check: () => undefined },
        credentials: { userSession: async () => undefined, walletKey: async () => undefined, operatorSession: async () => false },
      })
      assert.throws(() => app.get('/wallet/unscoped', { onRequest: app.requireWalletAccess }, async () => ({})), /needs a key scope/)
      await app.close()
    })
  })

  describe('creating a key', () => {
    it('gives a key without scopes read, send and hold, and shows scopes, limits and used', async () => {
      const owner = await funded()
      const plain = await key(owner, { name: 'plain' })
      assert.deepEqual([plain.object.scopes, plain.object.limits, plain.object.used], [['read', 'send', 'hold'], {}, {}])
      const limited = await key(owner, {
        scopes: ['send', 'read', 'send'],
        limits: { per_transfer: { GOLD: 5 }, recipients: [owner.walletId] },
      })
      assert.deepEqual(limited.object.scopes, ['read', 'send'])
      assert.deepEqual(limited.object.limits, { per_transfer: { gold: 5 }, recipients: [owner.walletId] })
      const listed = (await call('GET', '/wallet/sessions', owner.auth)).json() as Record<string, unknown>[]
      assert.deepEqual(
        listed.map((entry) => [entry.scopes, entry.limits, entry.used]),
        [
          [['read', 'send', 'hold'], {}, {}],
          [['read', 'send'], { per_transfer: { gold: 5 }, recipients: [owner.walletId] }, {}],
        ],
      )
    })

    it('refuses bad scopes and limits and creates no key', async () => {
      const owner = await funded()
      const other = await createUser(t.app)
      const cases: [object, number, string][] = [
        [{ scopes: ['read', 'admin'] }, 400, 'G000'],
        [{ scopes: [] }, 400, 'G000'],
        [{ scopes: 'read' }, 400, 'G000'],
        [{ limits: { per_transfer: { unobtainium: 5 } } }, 400, 'I001'],
        [{ limits: { per_transfer: { gold: 1.5 } } }, 400, 'G000'],
        [{ limits: { per_transfer: { gold: -1 } } }, 400, 'G000'],
        [{ limits: { per_transfer: { gold: '5' } } }, 400, 'G000'],
        [{ limits: { recipients: [] } }, 400, 'G000'],
        [{ limits: { recipients: Array.from({ length: 101 }, (_, index) => other.walletId + index) } }, 400, 'G000'],
        [{ limits: { recipients: ['abc'] } }, 400, 'G000'],
        [{ limits: { recipients: [987654321] } }, 404, 'W000'],
        [{ limits: { per_week: { gold: 5 } } }, 400, 'G000'],
        [{ limits: { per_day: { unobtainium: 5 } } }, 400, 'I001'],
        [{ limits: { per_day: { gold: -5 } } }, 400, 'G000'],
        [{ limits: { per_day: { gold: 2.5 } } }, 400, 'G000'],
      ]
      for (const [body, status, code] of cases) expectCode(await call('POST', '/wallet/sessions', owner.auth, body), status, code)
      assert.deepEqual((await call('GET', '/wallet/sessions', owner.auth)).json(), [])
    })
  })

  describe('scopes', () => {
    it('lets a read-only key read and refuses it every move with K000, moving nothing', async () => {
      const owner = await funded()
      const bob = await createUser(t.app)
      const reader = await key(owner, { scopes: ['read'] })
      assert.equal((await call('GET', '/wallet/assets', reader.auth)).statusCode, 200)
      assert.equal((await call('GET', '/wallet/transactions', reader.auth)).statusCode, 200)
      assert.equal((await call('GET', '/wallet/holds', reader.auth)).statusCode, 200)
      const send = { recipient: bob.username, assets: { gold: 1 } }
      expectCode(await call('POST', '/wallet/transactions', reader.auth, send), 403, 'K000')
      expectCode(await call('POST', '/wallet/transactions/batch', reader.auth, { transfers: [send] }), 403, 'K000')
      expectCode(await call('POST', '/wallet/holds', reader.auth, send), 403, 'K000')
      assert.deepEqual(await holdings(owner), { gold: 1000, silver: 1000 })
    })

    it('lets a send-only key send but not hold or read', async () => {
      const owner = await funded()
      const bob = await createUser(t.app)
      const sender = await key(owner, { scopes: ['send'] })
      const send = { recipient: bob.username, assets: { gold: 1 } }
      assert.equal((await call('POST', '/wallet/transactions', sender.auth, send)).statusCode, 201)
      expectCode(await call('POST', '/wallet/holds', sender.auth, send), 403, 'K000')
      expectCode(await call('GET', '/wallet/assets', sender.auth), 403, 'K000')
      // A user session is not a key: scopes do not apply to it.
      assert.equal((await call('POST', '/wallet/holds', owner.auth, send)).statusCode, 201)
    })
  })

  describe('recipients (K002)', () => {
    it('pays only the listed wallets, on transfers, batches, holds and refunds', async () => {
      const owner = await funded()
      const [allowed, stranger] = [await funded(), await createUser(t.app)]
      const bot = await key(owner, { limits: { recipients: [allowed.walletId] } })
      const to = (user: TestUser, quantity = 1) => ({ recipient: user.username, assets: { gold: quantity } })

      assert.equal((await call('POST', '/wallet/transactions', bot.auth, to(allowed))).statusCode, 201)
      const refused = expectCode(await call('POST', '/wallet/transactions', bot.auth, to(stranger)), 403, 'K002')
      assert.match(refused.detail, new RegExp(`wallet ${stranger.walletId}`))
      const batch = await call('POST', '/wallet/transactions/batch', bot.auth, { transfers: [to(allowed), to(stranger)] })
      assert.match(expectCode(batch, 403, 'K002').detail, /^transfers\[1\]: /)
      expectCode(await call('POST', '/wallet/holds', bot.auth, to(stranger)), 403, 'K002')
      assert.equal((await call('POST', '/wallet/holds', bot.auth, to(allowed))).statusCode, 201)

      // A refund pays the original sender: one outside the recipients is refused.
      await issue(t, stranger.walletId, gold.id, 10)
      const fromStranger = await call('POST', '/wallet/transactions', stranger.auth, { recipient: owner.username, assets: { gold: 10 } })
      const fromAllowed = await call('POST', '/wallet/transactions', allowed.auth, { recipient: owner.username, assets: { gold: 10 } })
      expectCode(await call('POST', `/wallet/transactions/${fromStranger.json().id}/refund`, bot.auth, {}), 403, 'K002')
      assert.equal((await call('POST', `/wallet/transactions/${fromAllowed.json().id}/refund`, bot.auth, {})).statusCode, 201)
      // One transfer and one refund reached `allowed`; the held unit stays with the owner.
      assert.deepEqual(await holdings(stranger), {})
      assert.deepEqual((await holdings(owner)).gold, 1000 - 1 + 10)
    })
  })

  describe('per_transfer (K001)', () => {
    it('caps one transfer, batch member, hold or refund, naming the cap; other assets are free', async () => {
      const owner = await funded()
      const bob = await funded()
      const bot = await key(owner, { limits: { per_transfer: { gold: 10 } } })
      const gold = (quantity: number) => ({ recipient: bob.username, assets: { gold: quantity } })

      assert.equal((await call('POST', '/wallet/transactions', bot.auth, gold(10))).statusCode, 201)
      const over = expectCode(await call('POST', '/wallet/transactions', bot.auth, gold(11)), 403, 'K001')
      assert.match(over.detail, /per_transfer/)
      assert.match(over.detail, /\b10\b/)
      assert.equal(
        (await call('POST', '/wallet/transactions', bot.auth, { recipient: bob.username, assets: { silver: 500 } })).statusCode,
        201,
      )
      expectCode(await call('POST', '/wallet/holds', bot.auth, gold(11)), 403, 'K001')

      const atomic = await call('POST', '/wallet/transactions/batch', bot.auth, { transfers: [gold(5), gold(11), gold(5)] })
      assert.match(expectCode(atomic, 403, 'K001').detail, /^transfers\[1\]: /)
      const each = await call('POST', '/wallet/transactions/batch', bot.auth, { atomic: false, transfers: [gold(5), gold(11), gold(5)] })
      assert.equal(each.statusCode, 200, each.body)
      const results = each.json().results as { ok?: boolean; error?: { code: string } }[]
      assert.deepEqual(
        results.map((result) => result.error?.code ?? 'ok'),
        ['ok', 'K001', 'ok'],
      )

      const received = await call('POST', '/wallet/transactions', bob.auth, { recipient: owner.username, assets: { gold: 20 } })
      const refund = `/wallet/transactions/${received.json().id}/refund`
      expectCode(await call('POST', refund, bot.auth, {}), 403, 'K001')
      assert.equal((await call('POST', refund, bot.auth, { assets: { gold: 10 } })).statusCode, 201)
      // Moved: 10, then 5 + 5 of the non-atomic batch; 20 received, 10 refunded.
      assert.equal((await holdings(owner)).gold, 1000 - 10 - 10 + 20 - 10)
    })
  })

  describe('schedules created through a key', () => {
    async function ranOnce(owner: TestUser, id: unknown): Promise<{ failures: number; last_run: { error: { code: string } | null } }> {
      for (let attempt = 0; attempt < 300; attempt++) {
        const schedule = (await call('GET', `/wallet/schedules/${id}`, owner.auth)).json()
        if (schedule.runs >= 1) return schedule
        await new Promise((resolve) => setTimeout(resolve, 100))
      }
      throw new Error(`schedule ${id} never ran`)
    }
    const at = (ms: number) => new Date(Date.now() + ms).toISOString()

    it("are charged to that key when they run: its recipients and caps apply, and a revoked key's schedules run no more", async () => {
      const owner = await funded()
      const bob = await createUser(t.app)
      const carol = await createUser(t.app)
      const bot = await key(owner, { scopes: ['read', 'schedule'], limits: { per_day: { gold: 10 }, recipients: [bob.walletId] } })
      const plan = (user: TestUser, quantity: number, startAt = at(200)) => ({
        recipient: user.username,
        assets: { gold: quantity },
        start_at: startAt,
      })
      expectCode(await call('POST', '/wallet/schedules', bot.auth, plan(carol, 1)), 403, 'K002')
      const first = await call('POST', '/wallet/schedules', bot.auth, plan(bob, 7))
      assert.equal(first.statusCode, 201, first.body)
      assert.equal((await ranOnce(owner, first.json().id)).last_run.error, null)
      const sessions = (await call('GET', '/wallet/sessions', owner.auth)).json() as { id: unknown; used: Record<string, number> }[]
      assert.deepEqual(sessions.find((entry) => entry.id === bot.object.id)?.used, { gold: 7 })
      // Past the key's daily cap: the run is refused and moves nothing.
      const second = await call('POST', '/wallet/schedules', bot.auth, plan(bob, 5))
      assert.equal(second.statusCode, 201, second.body)
      const refused = await ranOnce(owner, second.json().id)
      assert.deepEqual([refused.failures, refused.last_run.error?.code], [1, 'K001'])
      // A revoked key's schedule is refused when it falls due.
      const gone = await key(owner, { scopes: ['schedule'] })
      const third = await call('POST', '/wallet/schedules', gone.auth, plan(bob, 1, at(1500)))
      assert.equal(third.statusCode, 201, third.body)
      assert.equal((await call('DELETE', `/wallet/sessions/${gone.object.id}`, owner.auth)).statusCode, 204)
      assert.equal((await ranOnce(owner, third.json().id)).last_run.error?.code, 'A001')
      assert.equal((await holdings(bob)).gold, 7)
    })
  })

  describe('per_day (K001)', () => {
    const gold = (user: TestUser, quantity: number) => ({ recipient: user.username, assets: { gold: quantity } })
    const used = async (owner: TestUser, id: unknown) =>
      ((await call('GET', '/wallet/sessions', owner.auth)).json() as { id: unknown; used: Record<string, number> }[]).find(
        (entry) => entry.id === id,
      )?.used

    it('counts transfers, batch members, refunds and holds over a day, says what is left, and shows used', async () => {
      const owner = await funded()
      const bob = await funded()
      const bot = await key(owner, { limits: { per_day: { gold: 100 } } })
      assert.deepEqual(bot.object.used, { gold: 0 })
      assert.equal((await call('POST', '/wallet/transactions', bot.auth, gold(bob, 40))).statusCode, 201)
      // Other assets, and other keys of the wallet, are not counted.
      assert.equal(
        (await call('POST', '/wallet/transactions', bot.auth, { recipient: bob.username, assets: { silver: 500 } })).statusCode,
        201,
      )
      assert.equal((await call('POST', '/wallet/transactions', owner.auth, gold(bob, 300))).statusCode, 201)
      const over = expectCode(await call('POST', '/wallet/transactions', bot.auth, gold(bob, 61)), 403, 'K001')
      assert.match(over.detail, /per_day/)
      assert.match(over.detail, /60 left/)
      assert.deepEqual(await used(owner, bot.object.id), { gold: 40 })

      // An atomic batch counts as a whole; a non-atomic one member by member.
      const atomic = await call('POST', '/wallet/transactions/batch', bot.auth, { transfers: [gold(bob, 30), gold(bob, 31)] })
      assert.match(expectCode(atomic, 403, 'K001').detail, /^transfers\[1\]: per_day/)
      const each = await call('POST', '/wallet/transactions/batch', bot.auth, {
        atomic: false,
        transfers: [gold(bob, 30), gold(bob, 31), gold(bob, 20)],
      })
      assert.deepEqual(
        (each.json().results as { error?: { code: string } }[]).map((result) => result.error?.code ?? 'ok'),
        ['ok', 'K001', 'ok'],
      )
      assert.deepEqual(await used(owner, bot.object.id), { gold: 90 })

      // A refund through the key counts too.
      const received = await call('POST', '/wallet/transactions', bob.auth, gold(owner, 50))
      expectCode(await call('POST', `/wallet/transactions/${received.json().id}/refund`, bot.auth, { assets: { gold: 11 } }), 403, 'K001')
      assert.equal(
        (await call('POST', `/wallet/transactions/${received.json().id}/refund`, bot.auth, { assets: { gold: 10 } })).statusCode,
        201,
      )
      assert.deepEqual(await used(owner, bot.object.id), { gold: 100 })
      expectCode(await call('POST', '/wallet/transactions', bot.auth, gold(bob, 1)), 403, 'K001')
      // A refusal and an idempotent replay count nothing.
      assert.deepEqual(await used(owner, bot.object.id), { gold: 100 })
      assert.equal((await holdings(owner)).gold, 1000 - 40 - 300 - 30 - 20 + 50 - 10)
    })

    it('counts a hold while pending and what it captured; what a void or a partial capture releases stops counting', async () => {
      const owner = await funded()
      const bob = await funded()
      const bot = await key(owner, { limits: { per_day: { gold: 100 } } })
      const first = await call('POST', '/wallet/holds', bot.auth, gold(bob, 60))
      assert.equal(first.statusCode, 201, first.body)
      expectCode(await call('POST', '/wallet/holds', bot.auth, gold(bob, 41)), 403, 'K001')
      assert.deepEqual(await used(owner, bot.object.id), { gold: 60 })
      const capture = await call('POST', `/wallet/holds/${first.json().id}/capture`, bot.auth, { assets: { gold: 25 } })
      assert.equal(capture.statusCode, 201, capture.body)
      assert.deepEqual(await used(owner, bot.object.id), { gold: 25 })
      const second = await call('POST', '/wallet/holds', bot.auth, gold(bob, 75))
      assert.equal(second.statusCode, 201, second.body)
      expectCode(await call('POST', '/wallet/transactions', bot.auth, gold(bob, 1)), 403, 'K001')
      assert.equal((await call('POST', `/wallet/holds/${second.json().id}/void`, bot.auth)).statusCode, 200)
      assert.deepEqual(await used(owner, bot.object.id), { gold: 25 })
      assert.equal((await call('POST', '/wallet/transactions', bot.auth, gold(bob, 75))).statusCode, 201)
    })

    it('is a rolling day: what was moved more than 24 hours ago counts no more', async () => {
      const owner = await funded()
      const bob = await funded()
      const bot = await key(owner, { limits: { per_day: { gold: 100 } } })
      assert.equal((await call('POST', '/wallet/transactions', bot.auth, gold(bob, 70))).statusCode, 201)
      assert.equal((await call('POST', '/wallet/transactions', bot.auth, gold(bob, 30))).statusCode, 201)
      // The first use, moved back to 24 hours and a second ago; the second, to 23 hours ago.
      const { db } = t.database
      const uses = await db.selectFrom('key_uses').select(['id']).where('key_id', '=', Number(bot.object.id)).orderBy('id').execute()
      const ago = (ms: number) => new Date(Date.now() - ms).toISOString()
      await db
        .updateTable('key_uses')
        .set({ created_at: ago(24 * 3600_000 + 1000) })
        .where('id', '=', uses[0].id)
        .execute()
      await db
        .updateTable('key_uses')
        .set({ created_at: ago(23 * 3600_000) })
        .where('id', '=', uses[1].id)
        .execute()
      assert.deepEqual(await used(owner, bot.object.id), { gold: 30 })
      expectCode(await call('POST', '/wallet/transactions', bot.auth, gold(bob, 71)), 403, 'K001')
      assert.equal((await call('POST', '/wallet/transactions', bot.auth, gold(bob, 70))).statusCode, 201)
    })

    it('holds under parallel requests, through one instance and several, never moving more than the cap', async () => {
      const owner = await funded()
      const bob = await createUser(t.app)
      const bot = await key(owner, { limits: { per_day: { gold: 100 } } })
      const peers = STORAGE === 'postgres' ? [await buildPeerApp(t), await buildPeerApp(t)] : []
      try {
        const apps = [t.app, ...peers.map((peer) => peer.app)]
        const sizes = Array.from({ length: 50 }, (_, index) => 1 + ((index * 7) % 9))
        const responses = await Promise.all(
          sizes.map((quantity, index) =>
            apps[index % apps.length].inject({
              method: 'POST',
              url: index % 5 === 0 ? '/wallet/holds' : '/wallet/transactions',
              headers: bot.auth,
              payload: gold(bob, quantity),
            }),
          ),
        )
        let accepted = 0
        responses.forEach((response, index) => {
          if (response.statusCode === 201) accepted += sizes[index]
          else assert.equal(response.json().code, 'K001', response.body)
        })
        assert.ok(accepted <= 100, `${accepted} moved or held through a key capped at 100`)
        // Whatever was refused was refused for want of room: nothing smaller than what is left was turned away.
        const left = 100 - accepted
        responses.forEach((response, index) => {
          if (response.statusCode !== 201) assert.ok(sizes[index] > left, `${sizes[index]} refused with ${left} left`)
        })
        assert.deepEqual(await used(owner, bot.object.id), { gold: accepted })
      } finally {
        for (const peer of peers) await peer.close()
      }
    })
  })
})
