import assert from 'node:assert/strict'
import http from 'node:http'
import net from 'node:net'
import { after, before, describe, it } from 'node:test'
import { buildTestApp, expectError, type TestApp } from '../helpers/app.ts'
import { createUser, type TestUser } from '../helpers/factories.ts'
import { createToken } from '../../src/http/tokens.ts'

/**
 * Hostile input: oversized, deeply nested and non-UTF-8 bodies, huge maps, odd numbers
 * and ids, header and cookie injection, long tokens and slow clients. Each gets its contract
 * error or a timeout, never a 500, and the service keeps answering others meanwhile. Requests
 * that a real client would send over a socket go through a real listening port.
 */

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/
const BODY_LIMIT = 256 * 1024
// Long enough that a loaded machine answering late still tells a timed request from a timed silence.
const REQUEST_TIMEOUT_MS = 2000

interface WireResponse {
  status: number
  headers: http.IncomingHttpHeaders
  body: string
}

/** One request over a real socket, body sent as given (a Buffer goes out byte for byte). */
function send(
  port: number,
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: string | Buffer,
  chunked = false,
): Promise<WireResponse> {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : Buffer.isBuffer(body) ? body : Buffer.from(body)
    const request = http.request({
      host: '127.0.0.1',
      port,
      method,
      path,
      headers: { ...headers, ...(payload && !chunked ? { 'content-length': String(payload.length) } : {}) },
      agent: false,
    })
    request.on('response', (response) => {
      const chunks: Buffer[] = []
      response.on('data', (chunk: Buffer) => chunks.push(chunk))
      response.on('end', () =>
        resolve({ status: response.statusCode ?? 0, headers: response.headers, body: Buffer.concat(chunks).toString() }),
      )
      response.on('error', reject)
    })
    // The server may answer and close before the whole body is written.
    request.on('error', (error: NodeJS.ErrnoException) =>
      error.code === 'EPIPE' || error.code === 'ECONNRESET' ? undefined : reject(error),
    )
    if (payload && chunked) {
      for (let offset = 0; offset < payload.length; offset += 16 * 1024) request.write(payload.subarray(offset, offset + 16 * 1024))
      request.end()
    } else {
      request.end(payload)
    }
  })
}

/** Writes raw bytes to the port and collects whatever comes back until the server closes (or `waitMs`). */
function raw(port: number, bytes: string | Buffer, waitMs = 2000): Promise<string> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1')
    let received = ''
    const done = () => {
      socket.destroy()
      resolve(received)
    }
    const timer = setTimeout(done, waitMs)
    socket.on('data', (chunk) => (received += chunk.toString('latin1')))
    socket.on('close', () => {
      clearTimeout(timer)
      resolve(received)
    })
    socket.on('error', () => {})
    socket.write(bytes)
  })
}

/**
 * Asserts a raw answer from the socket has `status` and the contract's error layout with `code`,
 * and that its X-Request-Id names the same request as its body.
 */
function expectRawError(received: string, status: number, code: string): void {
  assert.match(received, new RegExp(`^HTTP/1\\.1 ${status} `), JSON.stringify(received.slice(0, 80)))
  const [head, body] = received.split('\r\n\r\n')
  const parsed = JSON.parse(body) as { code?: string; message?: string; request_id?: string }
  assert.equal(parsed.code, code, body)
  assert.equal(typeof parsed.message, 'string')
  assert.match(head, new RegExp(`\r\nx-request-id: ${parsed.request_id}\r\n`, 'i'))
}

function errorCode(response: WireResponse): string | undefined {
  try {
    return (JSON.parse(response.body) as { code?: string }).code
  } catch {
    return undefined
  }
}

describe('abuse', () => {
  let t: TestApp
  let port: number
  let alice: TestUser
  let bob: TestUser
  let goldId: number
  /** Units of gold that reached bob: only the requests meant to succeed move anything. */
  let delivered = 0

  before(async () => {
    t = await buildTestApp({ BODY_LIMIT_BYTES: String(BODY_LIMIT), REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS) })
    await t.app.listen({ port: 0, host: '127.0.0.1' })
    port = (t.app.server.address() as net.AddressInfo).port
    alice = await createUser(t.app)
    bob = await createUser(t.app)
    const gold = await t.app.inject({ method: 'POST', url: '/assets', headers: t.admin, payload: { name: 'gold', value: 1 } })
    goldId = gold.json().id
    const issued = await t.app.inject({
      method: 'POST',
      url: `/wallets/${alice.walletId}/assets`,
      headers: t.admin,
      payload: { id: goldId, quantity: 1000 },
    })
    assert.equal(issued.statusCode, 201, issued.body)
  })
  after(async () => {
    await t.close()
  })

  async function holdings(user: TestUser): Promise<number> {
    const response = await t.app.inject({ method: 'GET', url: '/wallet/assets', headers: user.auth })
    return (response.json() as { quantity: number }[])[0]?.quantity ?? 0
  }

  function sendRaw(user: TestUser, body: string | Buffer) {
    return t.app.inject({
      method: 'POST',
      url: '/wallet/transactions',
      headers: { ...user.auth, 'content-type': 'application/json' },
      payload: body,
    })
  }

  describe('bodies', () => {
    it('refuses a body over the size limit with 400 G000, declared or chunked, and moves nothing', async () => {
      const memo = 'x'.repeat(BODY_LIMIT)
      const body = JSON.stringify({ recipient: bob.username, memo, assets: { gold: 1 } })
      for (const chunked of [false, true]) {
        const response = await send(
          port,
          'POST',
          '/wallet/transactions',
          { ...alice.auth, 'content-type': 'application/json' },
          body,
          chunked,
        )
        assert.equal(response.status, 400, `chunked=${chunked}: ${response.body}`)
        assert.equal(errorCode(response), 'G000')
      }
      assert.equal(await holdings(bob), delivered)
    })

    it('refuses deeply nested JSON with 400 G000', async () => {
      for (const depth of [1000, 50_000]) {
        const nested = `${'['.repeat(depth)}${']'.repeat(depth)}`
        expectError(await sendRaw(alice, `{"recipient":"${bob.username}","memo":${nested},"assets":{"gold":1}}`), 400, 'G000')
        const objects = `${'{"a":'.repeat(depth / 10)}1${'}'.repeat(depth / 10)}`
        expectError(await sendRaw(alice, `{"recipient":"${bob.username}","assets":${objects}}`), 400, 'G000')
      }
    })

    it('refuses a body that is not valid UTF-8 with 400 G000 instead of storing mangled text', async () => {
      for (const bytes of [[0xff], [0xc3], [0xed, 0xa0, 0x80], [0xe2, 0x82], [0xf8, 0x88, 0x80, 0x80, 0x80]]) {
        const body = Buffer.concat([
          Buffer.from(`{"recipient":"${bob.username}","memo":"a`),
          Buffer.from(bytes),
          Buffer.from('b","assets":{"gold":1}}'),
        ])
        expectError(await sendRaw(alice, body), 400, 'G000')
      }
      assert.equal(await holdings(bob), delivered)
    })

    it('refuses NUL and unpaired surrogates in any string with 400 G000, on both storages', async () => {
      for (const memo of ['\\u0000', 'a\\u0000b', '\\ud800', 'x\\udc00y']) {
        expectError(await sendRaw(alice, `{"recipient":"${bob.username}","memo":"${memo}","assets":{"gold":1}}`), 400, 'G000')
      }
      const name = await t.app.inject({
        method: 'POST',
        url: '/wallet/sessions',
        headers: { ...alice.auth, 'content-type': 'application/json' },
        payload: '{"name":"key\\u0000"}',
      })
      expectError(name, 400, 'G000')
      const key = await t.app.inject({
        method: 'POST',
        url: '/wallet/transactions',
        headers: { ...alice.auth, 'content-type': 'application/json' },
        payload: `{"recipient":"${bob.username}","assets":{"gold\\u0000":1}}`,
      })
      expectError(key, 400, 'G000')
      // A well-formed pair (an emoji) is fine.
      const emoji = await sendRaw(alice, `{"recipient":"${bob.username}","memo":"rent \\ud83d\\udcb0","assets":{"gold":1}}`)
      assert.equal(emoji.statusCode, 201, emoji.body)
      assert.equal(emoji.json().memo, 'rent 💰')
      delivered += 1
    })

    it('refuses NUL in paths and queries with G001 / G002 (a 500 on PostgreSQL before)', async () => {
      expectError(await t.app.inject({ method: 'POST', url: '/users/ali%00ce/sessions', payload: { password: 'whatever1' } }), 400, 'G001')
      expectError(await t.app.inject({ method: 'GET', url: '/wallet/transactions?asset=go%00ld', headers: alice.auth }), 400, 'G002')
    })

    it('refuses a 10,000-entry asset map with 400 G000', async () => {
      const assets: Record<string, number> = {}
      for (let i = 0; i < 10_000; i++) assets[`a${i.toString(36)}`] = 1
      const response = await t.app.inject({
        method: 'POST',
        url: '/wallet/transactions',
        headers: alice.auth,
        payload: { recipient: bob.username, assets },
      })
      expectError(response, 400, 'G000')
    })

    it('refuses 1e309, -0, fractions, 2^53 and strings as quantities with 400 G000', async () => {
      for (const quantity of [
        '1e309',
        '-1e309',
        '-0',
        '0',
        '0.5',
        '1.0000001',
        '9007199254740992',
        '1e16',
        '"5"',
        'null',
        'true',
        '[1]',
        '{}',
      ]) {
        expectError(await sendRaw(alice, `{"recipient":"${bob.username}","assets":{"gold":${quantity}}}`), 400, 'G000')
        const issue = await t.app.inject({
          method: 'POST',
          url: `/wallets/${bob.walletId}/assets`,
          headers: { ...t.admin, 'content-type': 'application/json' },
          payload: `{"id":${goldId},"quantity":${quantity}}`,
        })
        expectError(issue, 400, 'G000')
      }
      assert.equal(await holdings(bob), delivered)
    })

    it('refuses 1e309 as an asset value instead of storing infinity; -0 reads as 0', async () => {
      for (const value of ['1e309', '-1e309', '-1', '"1"']) {
        const response = await t.app.inject({
          method: 'POST',
          url: '/assets',
          headers: { ...t.admin, 'content-type': 'application/json' },
          payload: `{"name":"odd","value":${value}}`,
        })
        expectError(response, 400, 'G000')
      }
      const zero = await t.app.inject({
        method: 'POST',
        url: '/assets',
        headers: { ...t.admin, 'content-type': 'application/json' },
        payload: '{"name":"negzero","value":-0}',
      })
      assert.equal(zero.statusCode, 201, zero.body)
      assert.equal(Object.is(zero.json().value, 0), true)
    })

    it('refuses odd recipients and ids in bodies with 400 G000', async () => {
      // (A bare 1e3 is the JSON number 1000, a well-formed id.)
      for (const recipient of ['"1e3"', '"99999999999999999999"', '"0x10"', '"01"', '99999999999999999999', '-1', '0', '1.5', '""']) {
        expectError(await sendRaw(alice, `{"recipient":${recipient},"type":2,"assets":{"gold":1}}`), 400, 'G000')
      }
      for (const walletId of ['1e309', '99999999999999999999', '0', '-0', '1.5', '"2"']) {
        const response = await t.app.inject({
          method: 'PUT',
          url: '/user/session/wallet',
          headers: { ...alice.auth, 'content-type': 'application/json' },
          payload: `{"wallet_id":${walletId}}`,
        })
        expectError(response, 400, 'G000')
      }
    })
  })

  describe('ids in paths', () => {
    const BAD_IDS = ['1e3', '99999999999999999999', '9999999999999999', '0', '-1', '01', '1.0', '0x1', '1%20', 'abc', '%F0%9F%92%B0']

    it('answers every malformed id in every path parameter with 400 G001', async () => {
      const routes: {
        method: 'PUT' | 'POST' | 'DELETE'
        url: (id: string) => string
        headers: Record<string, string>
        payload?: object
      }[] = [
        { method: 'PUT', url: (id) => `/assets/${id}/value`, headers: t.admin, payload: { value: 1 } },
        { method: 'PUT', url: (id) => `/assets/${id}/name`, headers: t.admin, payload: { name: 'x' } },
        { method: 'DELETE', url: (id) => `/assets/${id}`, headers: t.admin },
        { method: 'POST', url: (id) => `/wallets/${id}/assets`, headers: t.admin, payload: { id: goldId, quantity: 1 } },
        { method: 'DELETE', url: (id) => `/wallets/${id}/assets/${goldId}`, headers: t.admin },
        { method: 'DELETE', url: (id) => `/wallets/${alice.walletId}/assets/${id}`, headers: t.admin },
        { method: 'DELETE', url: (id) => `/user/sessions/${id}`, headers: alice.auth },
        { method: 'DELETE', url: (id) => `/wallet/users/${id}`, headers: alice.auth },
        { method: 'DELETE', url: (id) => `/wallet/sessions/${id}`, headers: alice.auth },
      ]
      for (const route of routes) {
        for (const id of BAD_IDS) {
          const response = await t.app.inject({ method: route.method, url: route.url(id), headers: route.headers, payload: route.payload })
          assert.equal(response.statusCode, 400, `${route.method} ${route.url(id)}: ${response.body}`)
          assert.equal(response.json().code, 'G001', `${route.method} ${route.url(id)}: ${response.body}`)
        }
      }
      assert.equal(await holdings(alice), 1000 - delivered)
    })

    it('answers a path parameter over 512 characters or with broken percent-encoding with 400 G001 in the contract layout', async () => {
      for (const url of [
        `/users/${'a'.repeat(600)}/sessions`,
        `/user/sessions/${'1'.repeat(101)}`,
        '/user/sessions/%E0%A4%A',
        '/wallet/users/%',
      ]) {
        const response = await t.app.inject({
          method: url.startsWith('/users/') ? 'POST' : 'DELETE',
          url,
          headers: { ...alice.auth, 'x-request-id': 'abuse-url' },
          payload: { password: 'whatever1' },
        })
        expectError(response, 400, 'G001')
        assert.equal(response.headers['x-request-id'], 'abuse-url')
        assert.equal(response.json().request_id, 'abuse-url')
      }
    })

    it('answers malformed query values with 400 G002', async () => {
      for (const query of [
        'limit=1e3',
        'limit=0',
        'limit=101',
        'offset=-1',
        'before=99999999999999999999',
        'after=abc',
        'since=yesterday',
        'direction=up',
      ]) {
        expectError(await t.app.inject({ method: 'GET', url: `/wallet/transactions?${query}`, headers: alice.auth }), 400, 'G002')
      }
      for (const quantity of ['1e3', '0', '-1', '1.5', '99999999999999999999']) {
        expectError(
          await t.app.inject({
            method: 'DELETE',
            url: `/wallets/${alice.walletId}/assets/${goldId}?quantity=${quantity}`,
            headers: t.admin,
          }),
          400,
          'G002',
        )
      }
    })
  })

  describe('headers and cookies', () => {
    it('never echoes a CRLF from X-Request-Id, and a header split over two lines stays two request headers', async () => {
      const split = await raw(
        port,
        `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Request-Id: abc\r\nSet-Cookie: evil=1\r\nConnection: close\r\n\r\n`,
      )
      assert.match(split, /^HTTP\/1\.1 200/)
      assert.match(split, /\r\nx-request-id: abc\r\n/i)
      assert.doesNotMatch(split, /evil/)
      for (const value of ['abc\rSet-Cookie: evil=1', 'abc\nSet-Cookie: evil=1', 'abc\r\n Set-Cookie: evil=1', 'abc\u0000evil']) {
        const answer = await raw(port, `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Request-Id: ${value}\r\nConnection: close\r\n\r\n`)
        const status = /^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1]
        assert.ok(status === '400' || status === '200', `${JSON.stringify(value)} answered ${answer.slice(0, 80)}`)
        assert.doesNotMatch(answer, /set-cookie: evil|\r\nevil/i, JSON.stringify(value))
      }
    })

    it('replaces a hostile X-Request-Id with a generated one', async () => {
      for (const given of ['<script>alert(1)</script>', '../../etc/passwd', 'a b', 'x'.repeat(129), 'ünïcödé', '${jndi:ldap://x}']) {
        const response = await send(port, 'GET', '/wallet/assets', { 'x-request-id': given })
        assert.equal(response.status, 401)
        assert.match(String(response.headers['x-request-id']), UUID, given)
        assert.equal(JSON.parse(response.body).request_id, response.headers['x-request-id'])
      }
    })

    it('refuses a malformed Idempotency-Key with 400 G000 and moves nothing', async () => {
      for (const key of ['', ' ', 'x'.repeat(256), 'tab\there']) {
        const response = await send(
          port,
          'POST',
          '/wallet/transactions',
          { ...alice.auth, 'content-type': 'application/json', 'idempotency-key': key },
          JSON.stringify({ recipient: bob.username, assets: { gold: 1 } }),
        )
        assert.equal(response.status, 400, `${JSON.stringify(key)}: ${response.body}`)
        assert.equal(errorCode(response), 'G000')
      }
      const latin1 = await raw(
        port,
        Buffer.concat([
          Buffer.from(
            `POST /wallet/transactions HTTP/1.1\r\nHost: x\r\nAuthorization: ${alice.auth.authorization}\r\nContent-Type: application/json\r\nIdempotency-Key: k`,
          ),
          Buffer.from([0xe9]),
          Buffer.from(`\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}`),
        ]),
      )
      assert.match(latin1, /^HTTP\/1\.1 400/)
      assert.equal(await holdings(bob), delivered)
    })

    it('answers weird cookies with A000 / A001, never a 500', async () => {
      const name = t.config.sessionCookieName
      const cookies = [
        `${name}=`,
        `${name}=%E0%A4%A`,
        `${name}="quoted"`,
        `${name}=${'x'.repeat(8000)}`,
        `${name}=${createToken('user')}`,
        `${name}=${alice.token}x`,
        `${name}=${createToken('wallet')}`,
        `=;;;=; ${name}`,
        `${name}=a; ${name}=b`,
        `${name}=${encodeURIComponent('\u0000')}`,
        'other=1',
      ]
      for (const cookie of cookies) {
        const response = await t.app.inject({ method: 'GET', url: '/user/session', headers: { cookie } })
        assert.equal(response.statusCode, 401, `${cookie.slice(0, 40)}: ${response.body}`)
        assert.ok(['A000', 'A001'].includes(response.json().code), cookie.slice(0, 40))
      }
      // A real wallet key is refused in a cookie: keys travel only in the Authorization header.
      const key = await t.app.inject({ method: 'POST', url: '/wallet/sessions', headers: alice.auth, payload: { name: 'cookie test' } })
      expectError(
        await t.app.inject({ method: 'GET', url: '/wallet/assets', headers: { cookie: `${name}=${key.json().token}` } }),
        401,
        'A001',
      )
      // The admin key in a cookie does not open admin routes.
      expectError(
        await t.app.inject({
          method: 'POST',
          url: '/assets',
          headers: { cookie: `${name}=${t.admin.authorization.slice(7)}` },
          payload: { name: 'viacookie', value: 1 },
        }),
        403,
        'A003',
      )
    })

    it('sets only its own cookie attributes on login', async () => {
      const login = await send(
        port,
        'POST',
        `/users/${alice.username}/sessions`,
        { 'content-type': 'application/json' },
        JSON.stringify({ password: alice.password }),
      )
      assert.equal(login.status, 201)
      const setCookie = login.headers['set-cookie'] ?? []
      assert.equal(setCookie.length, 1)
      assert.match(
        setCookie[0],
        new RegExp(`^${t.config.sessionCookieName}=cfu_[0-9A-Za-z]{36}; Max-Age=\\d+; Path=/; HttpOnly; SameSite=Lax$`),
      )
    })

    it('answers long and odd Authorization headers with 401 A000 / A001, and an oversized header block with 400 G000', async () => {
      const values = [
        'Bearer',
        'Bearer    ',
        'Basic YWxpY2U6cGFzc3dvcmQ=',
        'Bearer a b',
        `Bearer ${'x'.repeat(8000)}`,
        `Bearer cfu_${'A'.repeat(8000)}`,
        `Bearer ${alice.token.slice(0, -1)}${alice.token.endsWith('A') ? 'B' : 'A'}`,
        `${alice.token} ${alice.token}`,
        `Bearer ${createToken('admin')}`,
      ]
      for (const authorization of values) {
        const response = await send(port, 'GET', '/wallet/assets', { authorization })
        assert.equal(response.status, 401, `${authorization.slice(0, 30)}: ${response.body}`)
        assert.ok(['A000', 'A001'].includes(errorCode(response) ?? ''), authorization.slice(0, 30))
      }
      const huge = await raw(
        port,
        `GET /wallet/assets HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${'x'.repeat(20_000)}\r\nConnection: close\r\n\r\n`,
      )
      expectRawError(huge, 400, 'G000')
    })

    it("answers requests the HTTP parser refuses with 400 G000 in the contract's layout", async () => {
      for (const request of [
        'GARBAGE\r\n\r\n',
        'GET /healthz HTTP/1.1\r\nHost: x\r\nBad Header Line\r\n\r\n',
        'POST /users HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n',
      ]) {
        expectRawError(await raw(port, request), 400, 'G000')
      }
    })
  })

  describe('slow clients', () => {
    async function othersStillAnswered(during: Promise<unknown>): Promise<number> {
      let answered = 0
      let slowest = 0
      let running = true
      void during.finally(() => (running = false))
      while (running) {
        const started = Date.now()
        const response = await send(port, 'GET', '/wallet/assets', alice.auth)
        assert.equal(response.status, 200)
        slowest = Math.max(slowest, Date.now() - started)
        answered++
        await new Promise((resolve) => setTimeout(resolve, 25))
      }
      // Not held for the slow client's whole timeout (a loaded machine may add a few hundred ms).
      assert.ok(slowest < REQUEST_TIMEOUT_MS, `another client waited ${slowest} ms`)
      return answered
    }

    it('times out a client that trickles its body, and keeps answering others meanwhile', async () => {
      const started = Date.now()
      let lastByte = started
      let closed = started
      const trickle = new Promise<string>((resolve) => {
        const socket = net.connect(port, '127.0.0.1')
        let received = ''
        socket.write(
          `POST /wallet/transactions HTTP/1.1\r\nHost: x\r\nAuthorization: ${alice.auth.authorization}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{`,
        )
        // One byte every 50 ms (the 1000-byte body would take 50 s), stopping short of the server's
        // deadline: a byte sent after the server closed may get the connection reset before its
        // answer is read, which no server can prevent.
        const timer = setInterval(() => {
          if (Date.now() - started >= REQUEST_TIMEOUT_MS - 100) return clearInterval(timer)
          socket.write(' ')
          lastByte = Date.now()
        }, 50)
        socket.on('data', (chunk) => (received += chunk.toString()))
        socket.on('error', () => {})
        socket.on('close', () => {
          closed = Date.now()
          clearInterval(timer)
          resolve(received)
        })
        setTimeout(() => socket.destroy(), 10 * REQUEST_TIMEOUT_MS)
      })
      const answered = await othersStillAnswered(trickle)
      const received = await trickle
      expectRawError(received, 400, 'G000')
      assert.ok(closed - started < 3 * REQUEST_TIMEOUT_MS, `timed out after ${closed - started} ms`)
      // The whole request is timed, not the silence after its last byte.
      assert.ok(closed - lastByte < REQUEST_TIMEOUT_MS, `answered ${closed - lastByte} ms after the last byte`)
      assert.ok(answered >= 5, `only ${answered} other requests were answered meanwhile`)
      assert.equal(await holdings(bob), delivered)
    })

    it('times out a client that never finishes its headers', async () => {
      const started = Date.now()
      const partial = raw(port, 'GET /wallet/assets HTTP/1.1\r\nHost: x\r\nX-Slow: ', 10 * REQUEST_TIMEOUT_MS)
      await othersStillAnswered(partial)
      const received = await partial
      expectRawError(received, 400, 'G000')
      assert.ok(Date.now() - started < 3 * REQUEST_TIMEOUT_MS)
    })
  })

  it('answered none of the above with a 500', async () => {
    const metrics = await t.app.inject({ method: 'GET', url: '/metrics', headers: t.admin })
    const errors = metrics.body.split('\n').filter((line) => line.startsWith('coffer_http_requests_total') && /status="5\d\d"/.test(line))
    assert.deepEqual(errors, [])
  })
})
