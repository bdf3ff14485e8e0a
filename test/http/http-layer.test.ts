import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { buildTestApp, expectError, type TestApp } from '../helpers/app.ts'
import { createUser, type TestUser } from '../helpers/factories.ts'
import { VERSION } from '../../src/version.ts'

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/
const ALLOWED = 'https://app.example.com'

/** Logs in with a cookie (no return_token) and returns the `name=value` pair to send back. */
async function cookieLogin(t: TestApp, user: TestUser): Promise<string> {
  const login = await t.app.inject({ method: 'POST', url: `/users/${user.username}/sessions`, payload: { password: user.password } })
  assert.equal(login.statusCode, 201, login.body)
  const cookie = login.cookies.find((entry) => entry.name === t.config.sessionCookieName)
  assert.ok(cookie, 'login sets the session cookie')
  return `${cookie.name}=${cookie.value}`
}

describe('HTTP layer', () => {
  let t: TestApp
  let alice: TestUser
  let aliceCookie: string

  before(async () => {
    t = await buildTestApp({ CORS_ORIGINS: `${ALLOWED},http://localhost:5173` })
    alice = await createUser(t.app)
    aliceCookie = await cookieLogin(t, alice)
  })
  after(async () => {
    await t.close()
  })

  describe('request ids', () => {
    it('echoes a sane X-Request-Id on success and in error bodies', async () => {
      const ok = await t.app.inject({ method: 'GET', url: '/healthz', headers: { 'x-request-id': 'trace-abc.123:9' } })
      assert.equal(ok.headers['x-request-id'], 'trace-abc.123:9')
      const failed = await t.app.inject({ method: 'GET', url: '/user/session', headers: { 'x-request-id': 'trace-def' } })
      assert.equal(failed.headers['x-request-id'], 'trace-def')
      assert.equal(failed.json().request_id, 'trace-def')
    })

    it('generates an id when none is sent', async () => {
      const response = await t.app.inject({ method: 'GET', url: '/healthz' })
      assert.match(String(response.headers['x-request-id']), UUID)
    })

    it('replaces an insane X-Request-Id instead of echoing it', async () => {
      for (const given of ['has spaces in it', 'x'.repeat(300), '<script>', 'new\tline']) {
        const response = await t.app.inject({ method: 'GET', url: '/nowhere', headers: { 'x-request-id': given } })
        assert.match(String(response.headers['x-request-id']), UUID, `for ${JSON.stringify(given)}`)
        assert.equal(response.json().request_id, response.headers['x-request-id'])
      }
    })

    it('gives every request its own generated id', async () => {
      const [a, b] = await Promise.all([t.app.inject({ method: 'GET', url: '/healthz' }), t.app.inject({ method: 'GET', url: '/healthz' })])
      assert.notEqual(a.headers['x-request-id'], b.headers['x-request-id'])
    })
  })

  describe('malformed requests', () => {
    it('answers an unknown route with 404 G006', async () => {
      const response = await t.app.inject({ method: 'GET', url: '/no/such/route' })
      expectError(response, 404, 'G006')
      assert.equal(response.json().message, 'Route Not Found')
    })

    it('answers a known path with the wrong method with 404 G006', async () => {
      expectError(await t.app.inject({ method: 'PATCH', url: '/user/session', headers: alice.auth }), 404, 'G006')
    })

    it('refuses an oversized body with 400 G000, the status of the table, and the error layout', async () => {
      const payload = JSON.stringify({ username: 'big', password: 'x'.repeat(t.config.bodyLimitBytes) })
      const response = await t.app.inject({ method: 'POST', url: '/users', headers: { 'content-type': 'application/json' }, payload })
      assert.equal(response.statusCode, 400)
      const body = response.json()
      assert.equal(body.code, 'G000')
      assert.equal(body.request_id, response.headers['x-request-id'])
    })

    it('refuses invalid JSON with 400 G000', async () => {
      const response = await t.app.inject({
        method: 'POST',
        url: '/users',
        headers: { 'content-type': 'application/json' },
        payload: '{"username": "bob",',
      })
      expectError(response, 400, 'G000')
    })

    it('refuses a JSON body that is not an object with 400 G000', async () => {
      for (const payload of ['[]', '"text"', '42', 'null']) {
        const response = await t.app.inject({ method: 'POST', url: '/users', headers: { 'content-type': 'application/json' }, payload })
        expectError(response, 400, 'G000')
      }
    })

    it('refuses a body that is not JSON with 400 G000', async () => {
      const response = await t.app.inject({
        method: 'POST',
        url: '/users',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        payload: 'username=bob&password=12345678',
      })
      expectError(response, 400, 'G000')
    })

    it('ignores a __proto__ key instead of polluting objects', async () => {
      const payload = '{"username": "protouser", "password": "correct horse", "__proto__": {"admin": true}}'
      const response = await t.app.inject({ method: 'POST', url: '/users', headers: { 'content-type': 'application/json' }, payload })
      assert.equal(response.statusCode, 201, response.body)
      assert.equal(({} as Record<string, unknown>).admin, undefined)
    })

    it('reads escapes as JSON does, and ignores a __proto__ key written with escapes too', async () => {
      const payload = '{"username": "prot\\u006fuser2", "password": "correct horse", "\\u005f_proto__": {"admin": true}}'
      const response = await t.app.inject({ method: 'POST', url: '/users', headers: { 'content-type': 'application/json' }, payload })
      assert.equal(response.statusCode, 201, response.body)
      assert.equal(response.json().username, 'protouser2')
      assert.equal(({} as Record<string, unknown>).admin, undefined)
    })

    it('accepts a bodiless DELETE sent with Content-Type: application/json', async () => {
      const user = await createUser(t.app)
      const response = await t.app.inject({
        method: 'DELETE',
        url: '/user/session',
        headers: { ...user.auth, 'content-type': 'application/json' },
      })
      assert.equal(response.statusCode, 204, response.body)
      assert.equal(response.body, '')
      expectError(await t.app.inject({ method: 'GET', url: '/user/session', headers: user.auth }), 401, 'A001')
    })

    it('answers a non-numeric path id with 400 G001', async () => {
      expectError(await t.app.inject({ method: 'DELETE', url: '/user/sessions/abc', headers: alice.auth }), 400, 'G001')
      expectError(await t.app.inject({ method: 'DELETE', url: '/user/sessions/-1', headers: alice.auth }), 400, 'G001')
      expectError(await t.app.inject({ method: 'DELETE', url: '/user/sessions/1e3', headers: alice.auth }), 400, 'G001')
      expectError(await t.app.inject({ method: 'DELETE', url: '/user/sessions/99999999999999999', headers: alice.auth }), 400, 'G001')
    })

    it('answers a bad query value with 400 G002', async () => {
      expectError(await t.app.inject({ method: 'GET', url: '/wallet/transactions?limit=1000', headers: alice.auth }), 400, 'G002')
    })

    it('checks credentials before the request: a bad request without them is A000 / A003 / A004, not G000-G002', async () => {
      const json = { 'content-type': 'application/json' }
      const refused: [
        number,
        string,
        { method: 'GET' | 'POST' | 'PUT' | 'DELETE'; url: string; headers?: Record<string, string>; payload?: string },
      ][] = [
        [401, 'A000', { method: 'POST', url: '/wallet/transactions', headers: json, payload: '{"recipient":' }],
        [401, 'A000', { method: 'GET', url: '/wallet/transactions?limit=0' }],
        [401, 'A000', { method: 'DELETE', url: '/wallet/users/abc' }],
        [401, 'A000', { method: 'PUT', url: '/user/password', headers: json, payload: '{"password":"x"}' }],
        [403, 'A003', { method: 'POST', url: '/assets', headers: json, payload: '{}' }],
        [403, 'A003', { method: 'PUT', url: '/assets/abc/value', headers: { ...json, ...alice.auth }, payload: '{"value":-1}' }],
        [
          403,
          'A004',
          {
            method: 'POST',
            url: '/user/wallets',
            headers: { ...json, cookie: aliceCookie, origin: 'https://evil.example.com' },
            payload: '{"address":1}',
          },
        ],
      ]
      for (const [status, code, request] of refused) expectError(await t.app.inject(request), status, code)
    })
  })

  describe('operations routes', () => {
    it('reports the process up on /healthz without credentials', async () => {
      const response = await t.app.inject({ method: 'GET', url: '/healthz' })
      assert.equal(response.statusCode, 200)
      assert.deepEqual(response.json(), { status: 'ok', version: VERSION })
    })

    it('reports storage reachable on /readyz', async () => {
      const response = await t.app.inject({ method: 'GET', url: '/readyz' })
      assert.equal(response.statusCode, 200)
      assert.deepEqual(response.json(), { status: 'ready' })
    })

    it('serves Prometheus metrics that count requests by route and status', async () => {
      await t.app.inject({ method: 'GET', url: '/healthz' })
      const response = await t.app.inject({ method: 'GET', url: '/metrics', headers: t.admin })
      assert.equal(response.statusCode, 200)
      assert.match(String(response.headers['content-type']), /^text\/plain/)
      assert.match(response.body, /^# HELP /m)
      assert.match(response.body, /coffer_http_requests_total\{[^}]*route="\/healthz"[^}]*status="200"[^}]*\} \d+/)
      assert.match(response.body, /coffer_http_request_duration_seconds_bucket/)
    })

    it('counts and times every request of a route, across readings of /metrics', async () => {
      const read = async () => (await t.app.inject({ method: 'GET', url: '/metrics', headers: t.admin })).body.split('\n')
      const value = (lines: string[], prefix: string) => Number(lines.find((line) => line.startsWith(prefix))?.split(' ')[1] ?? 0)
      const counted = '/wallet/assets'
      const before = await read()
      for (let i = 0; i < 3; i++) await t.app.inject({ method: 'GET', url: counted })
      await t.app.inject({ method: 'GET', url: counted, headers: alice.auth })
      const between = await read()
      for (let i = 0; i < 2; i++) await t.app.inject({ method: 'GET', url: counted })
      const after = await read()
      const refused = `coffer_http_requests_total{method="GET",route="${counted}",status="401"}`
      const served = `coffer_http_requests_total{method="GET",route="${counted}",status="200"}`
      assert.equal(value(between, refused) - value(before, refused), 3)
      assert.equal(value(between, served) - value(before, served), 1)
      assert.equal(value(after, refused) - value(between, refused), 2, 'a reading leaves the counts as they are')
      const histogram = 'coffer_http_request_duration_seconds'
      const labels = `method="GET",route="${counted}"`
      const count = value(after, `${histogram}_count{${labels}}`)
      assert.equal(count - value(before, `${histogram}_count{${labels}}`), 6)
      assert.equal(value(after, `${histogram}_bucket{le="+Inf",${labels}}`), count)
      assert.ok(value(after, `${histogram}_sum{${labels}}`) > 0)
      const buckets = after
        .filter((line) => line.startsWith(`${histogram}_bucket{`) && line.includes(labels))
        .map((line) => Number(line.split(' ')[1]))
      assert.equal(buckets.length, 12, 'eleven bounds and +Inf')
      for (let i = 1; i < buckets.length; i++) assert.ok(buckets[i] >= buckets[i - 1], 'buckets are cumulative')
      assert.ok(after.includes(`# TYPE ${histogram} histogram`))
    })

    it('serves an OpenAPI 3.1 document describing the routes', async () => {
      const response = await t.app.inject({ method: 'GET', url: '/openapi.json' })
      assert.equal(response.statusCode, 200)
      const doc = response.json()
      assert.equal(doc.openapi, '3.1.0')
      assert.equal(typeof doc.info.title, 'string')
      assert.equal(typeof doc.info.version, 'string')
      const expected: [string, string][] = [
        ['/users', 'post'],
        ['/users/{username}/sessions', 'post'],
        ['/user/session', 'get'],
        ['/user/sessions', 'delete'],
        ['/user/sessions/{sessionid}', 'delete'],
        ['/user/wallets', 'post'],
        ['/wallet/assets', 'get'],
        ['/wallet/transactions', 'post'],
        ['/wallet/transactions', 'get'],
        ['/assets', 'post'],
        ['/wallets/{walletid}/assets', 'post'],
        ['/wallet/events', 'get'],
        ['/healthz', 'get'],
        ['/readyz', 'get'],
      ]
      for (const [path, method] of expected) assert.ok(doc.paths[path]?.[method], `${method.toUpperCase()} ${path} is documented`)
      for (const [path, item] of Object.entries(doc.paths as Record<string, Record<string, { responses?: object }>>)) {
        for (const [method, operation] of Object.entries(item)) {
          assert.ok(operation.responses && Object.keys(operation.responses).length > 0, `${method} ${path} documents its responses`)
        }
      }
      const send = doc.paths['/wallet/transactions'].post
      assert.ok(send.requestBody?.content?.['application/json']?.schema, 'the transfer body schema is documented')
      const params = (doc.paths['/wallet/transactions'].get.parameters ?? []) as { name: string; in: string }[]
      for (const name of ['limit', 'offset', 'before', 'after', 'asset', 'direction', 'since', 'until']) {
        assert.ok(
          params.some((param) => param.name === name && param.in === 'query'),
          `query parameter ${name} is documented`,
        )
      }
      const refs = JSON.stringify(doc).match(/"\$ref":"#\/([^"]+)"/g) ?? []
      for (const ref of refs) {
        const pointer = ref.slice(9, -1).split('/')
        let node: unknown = doc
        for (const part of pointer) node = (node as Record<string, unknown> | undefined)?.[part]
        assert.ok(node, `${ref} resolves`)
      }
      assert.equal(doc.paths['/openapi.json'], undefined, 'the document does not list itself')
      const stream = doc.paths['/wallet/events'].get.responses
      assert.deepEqual(Object.keys(stream['200'].content), ['text/event-stream'])
      for (const status of ['401', '500', '503'])
        assert.deepEqual(
          Object.keys(stream[status].content),
          ['application/json'],
          `the stream's refusals (${status}) are documented as JSON`,
        )
    })

    it('serves an HTML API reference on /docs', async () => {
      const response = await t.app.inject({ method: 'GET', url: '/docs' })
      assert.equal(response.statusCode, 200)
      assert.match(String(response.headers['content-type']), /text\/html/)
      assert.match(response.body, /<html/i)
    })
  })

  describe('CORS', () => {
    it('allows credentialed CORS for an exact configured origin', async () => {
      const response = await t.app.inject({ method: 'GET', url: '/wallet/assets', headers: { ...alice.auth, origin: ALLOWED } })
      assert.equal(response.statusCode, 200)
      assert.equal(response.headers['access-control-allow-origin'], ALLOWED)
      assert.equal(response.headers['access-control-allow-credentials'], 'true')
      assert.match(String(response.headers['access-control-expose-headers']), /X-Request-Id/i)
    })

    it('answers a preflight from a configured origin', async () => {
      const response = await t.app.inject({
        method: 'OPTIONS',
        url: '/wallet/transactions',
        headers: {
          origin: ALLOWED,
          'access-control-request-method': 'POST',
          'access-control-request-headers': 'content-type,idempotency-key',
        },
      })
      assert.equal(response.statusCode, 204)
      assert.equal(response.headers['access-control-allow-origin'], ALLOWED)
      assert.match(String(response.headers['access-control-allow-methods']), /POST/)
    })

    it('never allows an origin that is not configured exactly', async () => {
      const strangers = [
        'https://evil.example.com',
        'https://app.example.com.evil.com',
        'http://app.example.com',
        'https://app.example.com:8443',
        'null',
      ]
      for (const origin of strangers) {
        const simple = await t.app.inject({ method: 'GET', url: '/wallet/assets', headers: { ...alice.auth, origin } })
        assert.equal(simple.headers['access-control-allow-origin'], undefined, `GET from ${origin}`)
        const preflight = await t.app.inject({
          method: 'OPTIONS',
          url: '/wallet/transactions',
          headers: { origin, 'access-control-request-method': 'POST' },
        })
        assert.equal(preflight.headers['access-control-allow-origin'], undefined, `preflight from ${origin}`)
      }
    })

    it('never answers with a wildcard origin', async () => {
      const response = await t.app.inject({ method: 'GET', url: '/healthz', headers: { origin: ALLOWED } })
      assert.notEqual(response.headers['access-control-allow-origin'], '*')
    })

    it('allows no cross-origin reads at all when CORS_ORIGINS is empty', async () => {
      const bare = await buildTestApp()
      try {
        const response = await bare.app.inject({
          method: 'OPTIONS',
          url: '/wallet/assets',
          headers: { origin: ALLOWED, 'access-control-request-method': 'GET' },
        })
        assert.equal(response.headers['access-control-allow-origin'], undefined)
      } finally {
        await bare.close()
      }
    })
  })

  describe('CSRF guard for cookie sessions (A004)', () => {
    const createWallet = (headers: Record<string, string>) => t.app.inject({ method: 'POST', url: '/user/wallets', headers, payload: {} })

    it('refuses a cookie-authenticated write from a foreign Origin with 403 A004 and changes nothing', async () => {
      const beforeList = (await t.app.inject({ method: 'GET', url: '/user/wallets', headers: alice.auth })).json()
      const response = await createWallet({ cookie: aliceCookie, origin: 'https://evil.example.com' })
      expectError(response, 403, 'A004')
      const afterList = (await t.app.inject({ method: 'GET', url: '/user/wallets', headers: alice.auth })).json()
      assert.deepEqual(afterList, beforeList)
    })

    it('refuses a cookie-authenticated DELETE from a foreign Origin, so the session survives', async () => {
      const response = await t.app.inject({
        method: 'DELETE',
        url: '/user/session',
        headers: { cookie: aliceCookie, origin: 'https://evil.example.com' },
      })
      expectError(response, 403, 'A004')
      assert.equal((await t.app.inject({ method: 'GET', url: '/user/session', headers: { cookie: aliceCookie } })).statusCode, 200)
    })

    it('refuses a cookie-authenticated write without Origin when Sec-Fetch-Site is cross-site', async () => {
      expectError(await createWallet({ cookie: aliceCookie, 'sec-fetch-site': 'cross-site' }), 403, 'A004')
    })

    it('allows a cookie-authenticated write from the service’s own origin', async () => {
      const response = await createWallet({ cookie: aliceCookie, origin: 'http://localhost:80', 'sec-fetch-site': 'same-origin' })
      assert.equal(response.statusCode, 201, response.body)
    })

    it('allows a cookie-authenticated write from an origin in CORS_ORIGINS', async () => {
      const response = await createWallet({ cookie: aliceCookie, origin: 'http://localhost:5173', 'sec-fetch-site': 'same-site' })
      assert.equal(response.statusCode, 201, response.body)
    })

    it('allows a cookie-authenticated write without Origin from a same-site or direct request', async () => {
      assert.equal((await createWallet({ cookie: aliceCookie, 'sec-fetch-site': 'same-site' })).statusCode, 201)
      assert.equal((await createWallet({ cookie: aliceCookie, 'sec-fetch-site': 'none' })).statusCode, 201)
      assert.equal((await createWallet({ cookie: aliceCookie })).statusCode, 201)
    })

    it('lets the Origin decide when both headers are present', async () => {
      expectError(
        await createWallet({ cookie: aliceCookie, origin: 'https://evil.example.com', 'sec-fetch-site': 'same-origin' }),
        403,
        'A004',
      )
    })

    it('does not guard safe methods', async () => {
      const response = await t.app.inject({
        method: 'GET',
        url: '/user/session',
        headers: { cookie: aliceCookie, origin: 'https://evil.example.com', 'sec-fetch-site': 'cross-site' },
      })
      assert.equal(response.statusCode, 200)
    })

    it('exempts requests authenticated by the Authorization header', async () => {
      const response = await createWallet({ ...alice.auth, origin: 'https://evil.example.com', 'sec-fetch-site': 'cross-site' })
      assert.equal(response.statusCode, 201, response.body)
    })

    it('guards the wallet routes too', async () => {
      const response = await t.app.inject({
        method: 'POST',
        url: '/wallet/transactions',
        headers: { cookie: aliceCookie, 'sec-fetch-site': 'cross-site' },
        payload: { recipient: 'nobody', assets: { gold: 1 } },
      })
      expectError(response, 403, 'A004')
    })
  })
})
