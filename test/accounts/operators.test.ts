import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import type { LightMyRequestResponse } from 'fastify'
import { ADMIN_KEY, awayFromTheMinute, buildTestApp, expectError, type TestApp } from '../helpers/app.ts'
import { createUser, type TestUser } from '../helpers/factories.ts'

/**
 * The operator side of the console: operator sessions by cookie (opened with the admin key, ended,
 * expired, rate limited, guarded against cross-site writes) and the operator's read routes, on the
 * storage under test.
 */

function cookieOf(response: LightMyRequestResponse): { value: string; header: string } {
  const header = [response.headers['set-cookie']].flat().find((line) => line?.startsWith('coffer_admin='))
  assert.ok(header, `no coffer_admin cookie in ${JSON.stringify(response.headers['set-cookie'])}`)
  return { value: header.split(';')[0].slice('coffer_admin='.length), header }
}

async function openSession(t: TestApp, key = ADMIN_KEY, ip = '198.51.100.1'): Promise<LightMyRequestResponse> {
  return t.app.inject({ method: 'POST', url: '/admin/sessions', payload: { key }, remoteAddress: ip })
}

describe('operator sessions', () => {
  let t: TestApp
  let user: TestUser
  before(async () => {
    t = await buildTestApp()
    user = await createUser(t.app)
  })
  after(() => t.close())

  it('POST /admin/sessions trades the admin key for an HttpOnly, SameSite=Strict cookie of 12 hours', async () => {
    const started = Date.now()
    const response = await openSession(t)
    assert.equal(response.statusCode, 201, response.body)
    const expires = Date.parse(response.json().expires_at)
    assert.ok(Math.abs(expires - started - 12 * 3_600_000) < 60_000, `expires_at ${response.json().expires_at}`)
    const { value, header } = cookieOf(response)
    assert.match(header, /; HttpOnly/i)
    assert.match(header, /; SameSite=Strict/i)
    assert.match(header, /; Path=\//i)
    assert.match(header, /; Max-Age=43200/i)
    assert.doesNotMatch(header, /Secure/i)
    assert.ok(!response.body.includes(value), 'the token is only in the cookie')
    assert.ok(!value.includes(ADMIN_KEY))
    // The stored row is a hash, not the token.
    const rows = await t.database.db.selectFrom('operator_sessions').selectAll().execute()
    assert.ok(rows.length >= 1 && rows.every((row) => row.token_hash !== value && /^[0-9a-f]{64}$/.test(row.token_hash)))
  })

  it('refuses a wrong key with 403 A003 and sets no cookie', async () => {
    const response = await openSession(t, 'cfa_not_the_key_at_all_0000000000000')
    expectError(response, 403, 'A003')
    assert.equal(response.headers['set-cookie'], undefined)
    expectError(await t.app.inject({ method: 'POST', url: '/admin/sessions', payload: {} }), 400, 'G000')
  })

  it('the cookie opens the admin routes, reads and writes, from the same origin', async () => {
    const { value } = cookieOf(await openSession(t))
    const cookies = { coffer_admin: value }
    assert.equal((await t.app.inject({ method: 'GET', url: '/admin/overview', cookies })).statusCode, 200)
    assert.equal((await t.app.inject({ method: 'GET', url: '/assets', cookies })).statusCode, 200)
    const created = await t.app.inject({
      method: 'POST',
      url: '/assets',
      cookies,
      headers: { origin: 'http://localhost:80' },
      payload: { name: 'cookiegold', value: 1 },
    })
    assert.equal(created.statusCode, 201, created.body)
    const issued = await t.app.inject({
      method: 'POST',
      url: `/wallets/${user.walletId}/assets`,
      cookies,
      headers: { 'sec-fetch-site': 'same-origin' },
      payload: { id: created.json().id, quantity: 5 },
    })
    assert.equal(issued.statusCode, 201, issued.body)
  })

  it('refuses cookie-authenticated writes from another site with 403 A004, and changes nothing', async () => {
    const { value } = cookieOf(await openSession(t))
    const cookies = { coffer_admin: value }
    const before = (await t.app.inject({ method: 'GET', url: '/assets', headers: t.admin })).body
    expectError(
      await t.app.inject({
        method: 'POST',
        url: '/assets',
        cookies,
        headers: { origin: 'https://evil.example' },
        payload: { name: 'evil', value: 1 },
      }),
      403,
      'A004',
    )
    expectError(
      await t.app.inject({
        method: 'POST',
        url: '/assets',
        cookies,
        headers: { 'sec-fetch-site': 'cross-site' },
        payload: { name: 'evil', value: 1 },
      }),
      403,
      'A004',
    )
    assert.equal((await t.app.inject({ method: 'GET', url: '/assets', headers: t.admin })).body, before)
    // Reads are not writes: a cross-site GET is answered (the browser keeps the answer from the page).
    assert.equal(
      (await t.app.inject({ method: 'GET', url: '/admin/overview', cookies, headers: { origin: 'https://evil.example' } })).statusCode,
      200,
    )
  })

  it('DELETE /admin/session ends it: 204, the cookie cleared, then A003', async () => {
    const { value } = cookieOf(await openSession(t))
    const cookies = { coffer_admin: value }
    const ended = await t.app.inject({ method: 'DELETE', url: '/admin/session', cookies })
    assert.equal(ended.statusCode, 204)
    assert.match(cookieOf(ended).header, /Expires=Thu, 01 Jan 1970/)
    expectError(await t.app.inject({ method: 'GET', url: '/admin/overview', cookies }), 403, 'A003')
    expectError(await t.app.inject({ method: 'DELETE', url: '/admin/session', cookies }), 403, 'A003')
  })

  it('an expired operator session is A003', async () => {
    const { value } = cookieOf(await openSession(t))
    await t.database.db
      .updateTable('operator_sessions')
      .set({ expires_at: new Date(Date.now() - 1000).toISOString() })
      .execute()
    expectError(await t.app.inject({ method: 'GET', url: '/admin/overview', cookies: { coffer_admin: value } }), 403, 'A003')
  })

  it('is never a user session, a wallet key or the admin key, and those are never it', async () => {
    const { value } = cookieOf(await openSession(t))
    // The operator token in a header: a malformed credential for every kind of route.
    expectError(await t.app.inject({ method: 'GET', url: '/admin/overview', headers: { authorization: `Bearer ${value}` } }), 403, 'A003')
    expectError(await t.app.inject({ method: 'GET', url: '/wallet/assets', headers: { authorization: `Bearer ${value}` } }), 401, 'A001')
    expectError(await t.app.inject({ method: 'GET', url: '/user/session', cookies: { coffer_admin: value } }), 401, 'A000')
    // A user token or the admin key itself in the operator cookie opens nothing.
    expectError(await t.app.inject({ method: 'GET', url: '/admin/overview', cookies: { coffer_admin: user.token } }), 403, 'A003')
    expectError(await t.app.inject({ method: 'GET', url: '/admin/overview', cookies: { coffer_admin: ADMIN_KEY } }), 403, 'A003')
    // A header wins over the cookie: a user token there is refused even with a live operator cookie.
    expectError(
      await t.app.inject({ method: 'GET', url: '/admin/overview', headers: user.auth, cookies: { coffer_admin: value } }),
      403,
      'A003',
    )
  })
})

describe('operator key attempts are rate limited like logins', () => {
  let t: TestApp
  before(async () => {
    t = await buildTestApp({ AUTH_RATE_LIMIT: '3' })
  })
  after(() => t.close())

  it('counts wrong and right keys per client address, then answers 429 G005 with Retry-After', async () => {
    // Every attempt in one window: on PostgreSQL windows turn with the clock's minute.
    await awayFromTheMinute(5_000)
    expectError(await openSession(t, 'wrong key number one, long enough', '203.0.113.9'), 403, 'A003')
    expectError(await openSession(t, 'wrong key number two, long enough', '203.0.113.9'), 403, 'A003')
    assert.equal((await openSession(t, ADMIN_KEY, '203.0.113.9')).statusCode, 201)
    const limited = await openSession(t, ADMIN_KEY, '203.0.113.9')
    expectError(limited, 429, 'G005')
    assert.ok(Number(limited.headers['retry-after']) >= 1)
    assert.equal(limited.headers['set-cookie'], undefined)
    // Another address is counted on its own.
    assert.equal((await openSession(t, ADMIN_KEY, '203.0.113.10')).statusCode, 201)
  })
})

describe('operator read routes', () => {
  let t: TestApp
  let alice: TestUser
  let bob: TestUser
  let carol: TestUser
  let gold: number
  let silver: number
  let shared: number
  let deleted: number
  const ids: number[] = []

  async function call(url: string, expected = 200): Promise<LightMyRequestResponse> {
    const response = await t.app.inject({ method: 'GET', url, headers: t.admin })
    assert.equal(response.statusCode, expected, `${url}: ${response.body}`)
    return response
  }

  before(async () => {
    t = await buildTestApp()
    alice = await createUser(t.app, `alice${process.pid}`)
    bob = await createUser(t.app, `bob${process.pid}`)
    carol = await createUser(t.app, `Carol${process.pid}`)
    const asset = async (name: string) =>
      (await t.app.inject({ method: 'POST', url: '/assets', headers: t.admin, payload: { name, value: 2 } })).json().id as number
    gold = await asset('gold')
    silver = await asset('silver')
    await asset('unused')
    const issue = async (walletId: number, id: number, quantity: number) => {
      const response = await t.app.inject({
        method: 'POST',
        url: `/wallets/${walletId}/assets`,
        headers: t.admin,
        payload: { id, quantity },
      })
      ids.push(response.json().id)
    }
    await issue(alice.walletId, gold, 100)
    await issue(bob.walletId, gold, 10)
    await issue(alice.walletId, silver, 7)
    const send = async (from: TestUser, to: string, assets: Record<string, number>) => {
      const response = await t.app.inject({
        method: 'POST',
        url: '/wallet/transactions',
        headers: from.auth,
        payload: { recipient: to, assets },
      })
      assert.equal(response.statusCode, 201, response.body)
      ids.push(response.json().id)
    }
    await send(alice, bob.username, { gold: 5 })
    await send(bob, carol.username, { gold: 15 })
    await send(alice, carol.username, { silver: 7, gold: 1 })
    // Alice's second wallet, shared with bob; and a wallet of hers, deleted.
    shared = (
      await t.app.inject({ method: 'POST', url: '/user/wallets', headers: alice.auth, payload: { address: `shared${'x'.repeat(3)}` } })
    ).json().id
    deleted = (await t.app.inject({ method: 'POST', url: '/user/wallets', headers: alice.auth, payload: { address: 'gonewallet' } })).json()
      .id
    for (const id of [shared, deleted])
      await t.app.inject({ method: 'PUT', url: '/user/session/wallet', headers: alice.auth, payload: { wallet_id: id } })
    await t.app.inject({ method: 'PUT', url: '/user/session/wallet', headers: alice.auth, payload: { wallet_id: shared } })
    await t.app.inject({ method: 'POST', url: '/wallet/users', headers: alice.auth, payload: { username: bob.username } })
    await t.app.inject({ method: 'PUT', url: '/user/session/wallet', headers: alice.auth, payload: { wallet_id: deleted } })
    assert.equal((await t.app.inject({ method: 'DELETE', url: '/wallet', headers: alice.auth })).statusCode, 204)
  })
  after(() => t.close())

  it('GET /admin/overview counts users, live wallets and transactions, and per asset what circulates and how many hold it', async () => {
    const overview = (await call('/admin/overview')).json()
    assert.equal(overview.users, 3)
    assert.equal(overview.wallets, 4, 'three primary wallets and the shared one; not mint, not the deleted one')
    assert.equal(overview.transactions, 6)
    const byName = Object.fromEntries(overview.assets.map((entry: { asset: { name: string } }) => [entry.asset.name, entry]))
    assert.deepEqual(Object.keys(byName), ['gold', 'silver', 'unused'])
    assert.deepEqual(
      byName.gold,
      { asset: { id: gold, name: 'gold', value: 2 }, circulating: 110, holders: 2, owed: 0, expiring_30d: 0 },
      'alice and carol; bob sent all of his',
    )
    assert.deepEqual(byName.silver, {
      asset: { id: silver, name: 'silver', value: 2 },
      circulating: 7,
      holders: 1,
      owed: 0,
      expiring_30d: 0,
    })
    assert.equal(byName.unused.circulating, 0)
    assert.equal(byName.unused.holders, 0)
    // A burn takes units out of circulation.
    await t.app.inject({ method: 'DELETE', url: `/wallets/${carol.walletId}/assets/${gold}?quantity=6`, headers: t.admin })
    const after = (await call('/admin/overview')).json()
    assert.equal(after.assets.find((entry: { asset: { id: number } }) => entry.asset.id === gold).circulating, 104)
    assert.equal(after.transactions, 7)
    ids.push((await call('/admin/transactions?limit=1')).json()[0].id)
  })

  it('GET /admin/wallets finds wallets by id, address prefix or owner username prefix, any case', async () => {
    const all = (await call('/admin/wallets')).json()
    assert.deepEqual(
      all.map((wallet: { id: number }) => wallet.id),
      [alice.walletId, bob.walletId, carol.walletId, shared, deleted],
      'every user wallet, by id, mint left out',
    )
    assert.deepEqual(all.at(-1), { id: deleted, address: 'gonewallet', user_id: alice.id, username: alice.username, deleted: true })
    assert.deepEqual(
      (await call(`/admin/wallets?q=${bob.walletId}`)).json().map((wallet: { id: number }) => wallet.id),
      [bob.walletId],
    )
    assert.deepEqual(
      (await call('/admin/wallets?q=GONE')).json().map((wallet: { id: number }) => wallet.id),
      [deleted],
    )
    // carol registered as "Carol…": found in lower case, by her username, not an address.
    assert.deepEqual(
      (await call('/admin/wallets?q=carol')).json().map((wallet: { username: string }) => wallet.username),
      [carol.username],
    )
    assert.deepEqual(
      (await call(`/admin/wallets?q=ALICE${process.pid}`)).json().map((wallet: { id: number }) => wallet.id),
      [alice.walletId, shared, deleted],
    )
    assert.deepEqual((await call('/admin/wallets?q=nobodyhere')).json(), [])
    assert.deepEqual((await call('/admin/wallets?q=%25')).json(), [], 'a LIKE wildcard is no wildcard')
    assert.deepEqual((await call('/admin/wallets?q=mint')).json(), [])
  })

  it('GET /admin/wallets pages with limit, offset and a Link to the next page', async () => {
    const first = await call('/admin/wallets?limit=2')
    assert.equal(first.json().length, 2)
    assert.equal(first.headers.link, '</admin/wallets?limit=2&offset=2>; rel="next"')
    const second = await call('/admin/wallets?limit=2&offset=2')
    assert.deepEqual(
      second.json().map((wallet: { id: number }) => wallet.id),
      [carol.walletId, shared],
    )
    const last = await call('/admin/wallets?limit=2&offset=4')
    assert.equal(last.json().length, 1)
    assert.equal(last.headers.link, undefined)
    const searched = await call(`/admin/wallets?q=alice${process.pid}&limit=1`)
    assert.equal(searched.headers.link, `</admin/wallets?q=alice${process.pid}&limit=1&offset=1>; rel="next"`)
    for (const bad of ['limit=0', 'limit=101', 'offset=-1', 'limit=x', `q=${'a'.repeat(65)}`])
      expectError(await call(`/admin/wallets?${bad}`, 400), 400, 'G002')
  })

  it('GET /admin/wallets/{id} shows the wallet, its owner, assigned users and holdings', async () => {
    const detail = (await call(`/admin/wallets/${shared}`)).json()
    assert.equal(detail.wallet.id, shared)
    assert.equal(detail.wallet.primary, false)
    assert.equal(detail.wallet.deleted, false)
    assert.deepEqual(detail.owner, { id: alice.id, username: alice.username })
    assert.deepEqual(detail.users, [{ id: bob.id, username: bob.username }])
    assert.deepEqual(detail.holdings, [])
    const primary = (await call(`/admin/wallets/${alice.walletId}`)).json()
    assert.equal(primary.wallet.primary, true)
    assert.deepEqual(
      primary.holdings.map((holding: { asset: { name: string }; quantity: number }) => [holding.asset.name, holding.quantity]),
      [['gold', 94]],
    )
    const gone = (await call(`/admin/wallets/${deleted}`)).json()
    assert.equal(gone.wallet.deleted, true)
    expectError(await call('/admin/wallets/1', 404), 404, 'W002')
    expectError(await call('/admin/wallets/999999', 404), 404, 'W002')
    expectError(await call('/admin/wallets/abc', 400), 400, 'G001')
  })

  it('GET /admin/transactions lists the whole journal newest first, with filters and paging', async () => {
    const journal = (await call('/admin/transactions?limit=100')).json()
    assert.deepEqual(
      journal.map((transaction: { id: number }) => transaction.id),
      [...ids].sort((a, b) => b - a),
    )
    const first = await call('/admin/transactions?limit=3')
    assert.deepEqual(
      first.json().map((transaction: { id: number }) => transaction.id),
      journal.slice(0, 3).map((transaction: { id: number }) => transaction.id),
    )
    const link = /^<(\/admin\/transactions\?[^>]+)>; rel="next"$/.exec(first.headers.link as string)
    assert.ok(link, `Link: ${first.headers.link}`)
    const second = (await call(link[1])).json()
    assert.deepEqual(
      second.map((transaction: { id: number }) => transaction.id),
      journal.slice(3, 6).map((transaction: { id: number }) => transaction.id),
    )
    const silverOnly = (await call('/admin/transactions?asset=SILVER')).json()
    assert.equal(silverOnly.length, 2)
    assert.deepEqual((await call('/admin/transactions?asset=nothing')).json(), [])
    const oldest = journal.at(-1)
    assert.deepEqual((await call(`/admin/transactions?after=${oldest.id}&limit=100`)).json().length, journal.length - 1)
    assert.deepEqual((await call(`/admin/transactions?before=${journal[0].id}&limit=100`)).json().length, journal.length - 1)
    assert.deepEqual(
      (await call(`/admin/transactions?until=${encodeURIComponent(oldest.created_at)}&limit=100`))
        .json()
        .map((transaction: { id: number }) => transaction.id)
        .includes(oldest.id),
      true,
    )
    assert.deepEqual((await call(`/admin/transactions?since=${encodeURIComponent('2999-01-01T00:00:00.000Z')}`)).json(), [])
    const bobs = (await call(`/admin/transactions?wallet=${bob.walletId}&limit=100`)).json()
    assert.ok(
      bobs.length === 3 &&
        bobs.every((transaction: { sending_wallet_id: number; receiving_wallet_id: number }) =>
          [transaction.sending_wallet_id, transaction.receiving_wallet_id].includes(bob.walletId),
        ),
    )
    // The deleted wallet's sweep stays in its history.
    assert.equal((await call(`/admin/transactions?wallet=${deleted}`)).json().length, 0, 'it held nothing, so nothing was swept')
    expectError(await call('/admin/transactions?direction=sent', 400), 400, 'G002')
    expectError(await call('/admin/transactions?limit=101', 400), 400, 'G002')
    expectError(await call('/admin/transactions?since=yesterday', 400), 400, 'G002')
  })

  it('GET /admin/verification runs the ledger check and reports it', async () => {
    const report = (await call('/admin/verification')).json()
    assert.equal(report.ok, true)
    assert.deepEqual(report.problems, [])
    assert.equal(report.transactions, ids.length)
    assert.ok(report.assets >= 2)
  })

  it('refuses anyone but the operator with A003', async () => {
    for (const url of [
      '/admin/overview',
      '/admin/wallets',
      `/admin/wallets/${alice.walletId}`,
      '/admin/transactions',
      '/admin/verification',
    ]) {
      expectError(await t.app.inject({ method: 'GET', url }), 403, 'A003')
      expectError(await t.app.inject({ method: 'GET', url, headers: alice.auth }), 403, 'A003')
    }
  })
})

describe('the console and the security headers', () => {
  let t: TestApp
  before(async () => {
    t = await buildTestApp()
  })
  after(() => t.close())

  const CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'"

  it('GET / redirects to /console/', async () => {
    const response = await t.app.inject({ method: 'GET', url: '/' })
    assert.equal(response.statusCode, 302)
    assert.equal(response.headers.location, '/console/')
  })

  it('GET /console/ serves the console page with the CSP, nosniff and same-origin referrers, without inline script', async () => {
    const response = await t.app.inject({ method: 'GET', url: '/console/' })
    assert.equal(response.statusCode, 200, 'the console is built by `npm run build:console` (npm test does it first)')
    assert.match(String(response.headers['content-type']), /^text\/html/)
    assert.equal(response.headers['content-security-policy'], CSP)
    assert.equal(response.headers['x-content-type-options'], 'nosniff')
    assert.equal(response.headers['referrer-policy'], 'same-origin')
    const scripts = [...response.body.matchAll(/<script\b([^>]*)>([\s\S]*?)<\/script>/g)]
    assert.ok(scripts.length > 0)
    for (const [, attributes, body] of scripts) {
      assert.match(attributes, /src="\/console\/assets\/[^"]+\.js"/)
      assert.equal(body.trim(), '', 'no inline script')
    }
    assert.doesNotMatch(response.body, /\son[a-z]+=/i, 'no inline event handlers')
    const bundle = /src="(\/console\/assets\/[^"]+\.js)"/.exec(response.body)?.[1] as string
    const script = await t.app.inject({ method: 'GET', url: bundle })
    assert.equal(script.statusCode, 200)
    assert.match(String(script.headers['content-type']), /javascript/)
    assert.equal(script.headers['content-security-policy'], CSP)
    assert.match(String(script.headers['cache-control']), /immutable/)
    assert.equal((await t.app.inject({ method: 'GET', url: '/console' })).headers.location, '/console/')
    expectError(await t.app.inject({ method: 'GET', url: '/console/no-such-file.js' }), 404, 'G006')
  })
})
