import assert from 'node:assert/strict'
import http from 'node:http'
import { after, before, describe, it } from 'node:test'
import fastifyCookie from '@fastify/cookie'
import fastifyCors from '@fastify/cors'
import Fastify, { type FastifyInstance } from 'fastify'
import { loadConfig } from '../../src/config.ts'
import { clearOperatorCookie, clearSessionCookie, setOperatorCookie, setSessionCookie } from '../../src/http/auth.ts'
import cookies from '../../src/http/cookies.ts'
import cors from '../../src/http/cors.ts'
import { requestLoggerFactory } from '../../src/http/observability.ts'
import { buildTestApp, type TestApp } from '../helpers/app.ts'

/**
 * `src/http/cors.ts` and `src/http/cookies.ts` replace the hooks of `@fastify/cors` and
 * `@fastify/cookie` with cheaper ones (docs/performance.md#reads).
 * These tests hold them to what the plugins, configured as the app configured them, answered:
 * the same status, body and headers, in the same order, over HTTP, for every kind of request.
 */

const ALLOWED = 'https://app.example.com'
const METHODS = ['GET', 'POST', 'PUT', 'DELETE']
const EXPOSED = ['X-Request-Id', 'Link', 'Idempotent-Replayed', 'Retry-After']

/** The routes of a small app shaped like Coffer's: a request id set first, a read, a write, a guarded route. */
async function serve(register: (app: FastifyInstance) => Promise<void>): Promise<{ url: string; app: FastifyInstance }> {
  const app = Fastify()
  app.addHook('onRequest', (_request, reply, done) => {
    reply.header('x-request-id', 'the-request')
    done()
  })
  await register(app)
  app.get('/thing', async () => ({ ok: true }))
  app.post('/thing', async () => ({ ok: true }))
  app.get(
    '/guarded',
    {
      onRequest: async () => {
        throw Object.assign(new Error('no credential'), { statusCode: 401 })
      },
    },
    async () => ({ ok: true }),
  )
  const url = await app.listen({ port: 0, host: '127.0.0.1' })
  return { url, app }
}

interface Answer {
  status: number
  headers: string[]
  body: string
}

/** One request over HTTP; the raw header lines in order, without Date (it moves with the clock). */
function send(base: string, method: string, path: string, headers: Record<string, string>): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const request = http.request(`${base}${path}`, { method, headers, agent: false }, (response) => {
      let body = ''
      response.setEncoding('utf8')
      response.on('data', (chunk: string) => (body += chunk))
      response.on('end', () => {
        const lines: string[] = []
        for (let i = 0; i < response.rawHeaders.length; i += 2)
          if (response.rawHeaders[i].toLowerCase() !== 'date') lines.push(`${response.rawHeaders[i]}: ${response.rawHeaders[i + 1]}`)
        resolve({ status: response.statusCode ?? 0, headers: lines, body })
      })
    })
    request.on('error', reject)
    request.end()
  })
}

const REQUESTS: { method: string; path: string; headers: Record<string, string> }[] = []
for (const [method, path] of [
  ['GET', '/thing'],
  ['POST', '/thing'],
  ['GET', '/guarded'],
  ['GET', '/missing'],
  ['OPTIONS', '/thing'],
  ['OPTIONS', '/missing'],
]) {
  const variants: Record<string, string>[] = [
    {},
    { origin: ALLOWED },
    { origin: 'https://elsewhere.example.com' },
    { origin: '' },
    { origin: ALLOWED, 'access-control-request-method': 'POST' },
    { origin: ALLOWED, 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type,idempotency-key' },
    { origin: 'https://elsewhere.example.com', 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type' },
    { origin: ALLOWED, 'access-control-request-method': '' },
    { 'access-control-request-method': 'GET' },
  ]
  for (const headers of variants) {
    REQUESTS.push({ method, path, headers })
  }
}

for (const origins of [[ALLOWED, 'http://localhost:5173'], []]) {
  describe(`CORS (src/http/cors.ts) answers as @fastify/cors did, ${origins.length > 0 ? 'with CORS_ORIGINS' : 'without CORS_ORIGINS'}`, () => {
    let plugin: { url: string; app: FastifyInstance }
    let ours: { url: string; app: FastifyInstance }

    before(async () => {
      plugin = await serve(async (app) => {
        await app.register(fastifyCors, {
          origin: origins.length > 0 ? origins : false,
          credentials: true,
          methods: METHODS,
          exposedHeaders: EXPOSED,
        })
      })
      ours = await serve(async (app) => {
        await app.register(cors, { origins, methods: METHODS, exposedHeaders: EXPOSED })
      })
    })
    after(async () => {
      await plugin.app.close()
      await ours.app.close()
    })

    it(`gives the same status, headers (in order) and body to ${REQUESTS.length} kinds of request`, async () => {
      let withCors = 0
      for (const { method, path, headers } of REQUESTS) {
        const expected = await send(plugin.url, method, path, headers)
        const actual = await send(ours.url, method, path, headers)
        assert.deepEqual(actual, expected, `${method} ${path} ${JSON.stringify(headers)}`)
        if (expected.headers.some((line) => line.startsWith('access-control-allow-origin'))) withCors++
      }
      // The matrix is not vacuous: with origins, the allowed one gets its header (on reads, writes, refusals, preflights).
      if (origins.length > 0) assert.ok(withCors >= 10, `allowed answers: ${withCors}`)
      else assert.equal(withCors, 0)
    })
  })
}

describe('cookies (src/http/cookies.ts) as @fastify/cookie read and wrote them', () => {
  let plugin: FastifyInstance
  let ours: FastifyInstance
  const config = { ...loadConfig({ ADMIN_API_KEY: 'cfa_not_used_here_at_all_only_config' }), cookieSecure: true }
  const URLS = ['/set-session', '/clear-session', '/set-operator', '/clear-operator']

  before(async () => {
    // Before: the plugin registered, and `reply.setCookie` / `reply.clearCookie` called with what the helpers now pass on.
    plugin = Fastify()
    await plugin.register(fastifyCookie)
    const session = { httpOnly: true, sameSite: 'lax', path: '/', secure: true } as const
    const operator = { httpOnly: true, sameSite: 'strict', path: '/', secure: true } as const
    plugin.get(
      '/set-session',
      async (_request, reply) => (
        reply.setCookie(config.sessionCookieName, 'cfu_token', { ...session, maxAge: config.sessionLifetimeDays * 86_400 }),
        { ok: true }
      ),
    )
    plugin.get('/clear-session', async (_request, reply) => (reply.clearCookie(config.sessionCookieName, session), { ok: true }))
    plugin.get(
      '/set-operator',
      async (_request, reply) => (reply.setCookie('coffer_admin', 'cfo_token', { ...operator, maxAge: 12 * 3600 }), { ok: true }),
    )
    plugin.get('/clear-operator', async (_request, reply) => (reply.clearCookie('coffer_admin', operator), { ok: true }))
    plugin.get('/read', async (request) => ({ cookies: request.cookies }))
    // Now: the helpers of src/http/auth.ts.
    ours = Fastify()
    await ours.register(cookies)
    ours.get('/set-session', async (_request, reply) => (setSessionCookie(reply, config, 'cfu_token'), { ok: true }))
    ours.get('/clear-session', async (_request, reply) => (clearSessionCookie(reply, config), { ok: true }))
    ours.get('/set-operator', async (_request, reply) => (setOperatorCookie(reply, config, 'cfo_token'), { ok: true }))
    ours.get('/clear-operator', async (_request, reply) => (clearOperatorCookie(reply, config), { ok: true }))
    ours.get('/read', async (request) => ({ cookies: request.cookies }))
  })
  after(async () => {
    await plugin.close()
    await ours.close()
  })

  it('writes the same Set-Cookie for each cookie the app sets or clears', async () => {
    for (const url of URLS) {
      const expected = await plugin.inject({ method: 'GET', url })
      const actual = await ours.inject({ method: 'GET', url })
      assert.ok(expected.headers['set-cookie'], `${url}: the plugin set a cookie`)
      assert.deepEqual(actual.headers['set-cookie'], expected.headers['set-cookie'], url)
    }
  })

  it('reads the same cookies, and none without a Cookie header', async () => {
    for (const cookie of [undefined, 'coffer_session=cfu_abc', 'a=1; coffer_admin=cfo_x; b="quoted"; c=%20d', 'broken', '']) {
      const headers = cookie === undefined ? {} : { cookie }
      const expected = await plugin.inject({ method: 'GET', url: '/read', headers })
      const actual = await ours.inject({ method: 'GET', url: '/read', headers })
      assert.deepEqual(actual.json(), expected.json(), `Cookie: ${cookie}`)
    }
  })
})

describe('the request log', () => {
  const lines: string[] = []
  let t: TestApp
  let app: FastifyInstance

  before(async () => {
    t = await buildTestApp({ LOG_LEVEL: 'info' }, { logStream: { write: (line: string) => void lines.push(line) } })
    app = t.app
  })
  after(async () => {
    await t.close()
  })

  /** The line without what changes from run to run. */
  const steady = (line: string) => line.replace(/"time":\d+/, '"time":0').replace(/"ms":[\d.]+/, '"ms":0')

  it('writes one line per request with the request id, method, route, status and time, and nothing secret', async () => {
    lines.length = 0
    await app.inject({ method: 'GET', url: '/healthz', headers: { 'x-request-id': 'log-line-1' } })
    await app.inject({
      method: 'GET',
      url: '/wallet/assets',
      headers: { 'x-request-id': 'log-line-2', authorization: 'Bearer cfw_secret_that_must_not_show' },
    })
    assert.equal(lines.length, 2)
    // Byte for byte the line pino's child logger for the request (what `request.log` was) writes.
    const child = (reqId: string, fields: object) => {
      const written: string[] = []
      const root = Fastify({ logger: { level: 'info', stream: { write: (line: string) => void written.push(line) } } }).log
      root.child({ reqId }).info(fields, 'request')
      return written[0]
    }
    assert.equal(steady(lines[0]), steady(child('log-line-1', { method: 'GET', route: '/healthz', status: 200, ms: 0 })))
    assert.equal(steady(lines[1]), steady(child('log-line-2', { method: 'GET', route: '/wallet/assets', status: 401, ms: 0 })))
    assert.ok(!lines.join('').includes('cfw_secret'), 'no token in the log')
  })

  it('gives request.log the request id, made only when something logs through it', async () => {
    const written: string[] = []
    const root = Fastify({ logger: { level: 'info', stream: { write: (line: string) => void written.push(line) } } }).log
    const made: unknown[] = []
    const counting = Object.assign(Object.create(root) as typeof root, {
      child: (...args: Parameters<typeof root.child>) => (made.push(args[0]), root.child(...args)),
    })
    const log = requestLoggerFactory(counting, { reqId: 'lazy-1' }, {})
    assert.equal(made.length, 0, 'no child yet')
    log.debug('below the level')
    log.warn({ cause: 'ECONNREFUSED' }, 'storage unavailable')
    log.error({ code: 'S000' }, 'request failed')
    assert.deepEqual(made, [{ reqId: 'lazy-1' }], 'one child, on the first line')
    assert.equal(written.length, 2)
    const expected: string[] = []
    const plain = Fastify({ logger: { level: 'info', stream: { write: (line: string) => void expected.push(line) } } }).log.child({
      reqId: 'lazy-1',
    })
    plain.warn({ cause: 'ECONNREFUSED' }, 'storage unavailable')
    plain.error({ code: 'S000' }, 'request failed')
    assert.deepEqual(written.map(steady), expected.map(steady))
  })
})
