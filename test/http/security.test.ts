import assert from 'node:assert/strict'
import fs from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { after, before, describe, it, mock } from 'node:test'
import type { LightMyRequestResponse } from 'fastify'
import { loadConfig } from '../../src/config.ts'
import { openDatabase } from '../../src/db/database.ts'
import { migrateToLatest } from '../../src/db/migrate.ts'
import { resolveAdminKey } from '../../src/http/admin-key.ts'
import { createToken } from '../../src/http/tokens.ts'
import { createSecretsKeyFile } from '../../src/secrets/secrets-key.ts'
import { ADMIN_KEY, buildTestApp, expectError, type TestApp } from '../helpers/app.ts'
import { createUser } from '../helpers/factories.ts'

/**
 * The service's own defences beyond authorization: headers on every response, `/metrics` behind a
 * token and naming no user, one limiter for every wrong admin key, and data files only the
 * service's user can read.
 */

function expectSecurityHeaders(response: { headers: Record<string, unknown> }, what: string): void {
  assert.equal(response.headers['x-content-type-options'], 'nosniff', `${what}: nosniff`)
  assert.equal(response.headers['x-frame-options'], 'DENY', `${what}: X-Frame-Options`)
  assert.match(String(response.headers['content-security-policy']), /frame-ancestors 'none'/, `${what}: frame-ancestors`)
}

describe('security headers on every response', () => {
  let t: TestApp
  before(async () => {
    t = await buildTestApp()
  })
  after(async () => {
    await t.close()
  })

  it('sends nosniff and forbids framing on JSON answers, errors and the router refusals', async () => {
    const user = await createUser(t.app)
    const cases: [string, Promise<LightMyRequestResponse>][] = [
      ['GET /healthz', t.app.inject({ method: 'GET', url: '/healthz' })],
      ['an authenticated read', t.app.inject({ method: 'GET', url: '/wallet/balances', headers: user.auth })],
      ['401 A000', t.app.inject({ method: 'GET', url: '/wallet/balances' })],
      ['404 G006', t.app.inject({ method: 'GET', url: '/no/such/route' })],
      ['400 G000', t.app.inject({ method: 'POST', url: '/users', payload: '{not json', headers: { 'content-type': 'application/json' } })],
      ['malformed percent-encoding', t.app.inject({ method: 'GET', url: '/wallet/holds/%E0%A4%A' })],
      ['the API reference', t.app.inject({ method: 'GET', url: '/openapi.json' })],
    ]
    for (const [what, pending] of cases) {
      const response = await pending
      assert.ok(response.statusCode < 500, `${what}: ${response.statusCode}`)
      expectSecurityHeaders(response, what)
    }
  })

  it('keeps the console strict: its own policy, not the API one', async () => {
    const response = await t.app.inject({ method: 'GET', url: '/' })
    expectSecurityHeaders(response, 'the console')
    assert.match(String(response.headers['content-security-policy']), /^default-src 'self'; script-src 'self';.*frame-ancestors 'none'$/)
  })

  it('sends them on a request the HTTP parser refuses', async () => {
    await t.app.listen({ port: 0, host: '127.0.0.1' })
    const { port } = t.app.server.address() as net.AddressInfo
    const raw = await new Promise<string>((resolve, reject) => {
      const socket = net.connect(port, '127.0.0.1', () => socket.write('GET / HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n'))
      let text = ''
      socket.on('data', (chunk) => (text += chunk.toString('latin1')))
      socket.on('end', () => resolve(text))
      socket.on('error', reject)
    })
    assert.match(raw, /^HTTP\/1\.1 400 /)
    assert.match(raw, /\r\nx-content-type-options: nosniff\r\n/i)
    assert.match(raw, /\r\nx-frame-options: DENY\r\n/i)
    assert.match(raw, /\r\ncontent-security-policy: frame-ancestors 'none'\r\n/i)
  })
})

describe('GET /metrics', () => {
  const METRICS_TOKEN = 'metrics-token-for-the-test-only-0123'
  let t: TestApp
  before(async () => {
    t = await buildTestApp({ METRICS_TOKEN })
  })
  after(async () => {
    await t.close()
  })

  const scrape = (headers: Record<string, string> = {}) => t.app.inject({ method: 'GET', url: '/metrics', headers })

  it('answers METRICS_TOKEN and the admin key, and nobody else', async () => {
    assert.equal((await scrape({ authorization: `Bearer ${METRICS_TOKEN}` })).statusCode, 200)
    assert.equal((await scrape(t.admin)).statusCode, 200)
    expectError(await scrape(), 403, 'A003')
    expectError(await scrape({ authorization: 'Bearer metrics-token-for-the-test-only-0124' }), 403, 'A003')
    expectError(await scrape({ authorization: METRICS_TOKEN }), 403, 'A003')
    const user = await createUser(t.app)
    expectError(await scrape(user.auth), 403, 'A003')
  })

  it('names no webhook host, port or wallet', async () => {
    const user = await createUser(t.app)
    const hook = await t.app.inject({
      method: 'PUT',
      url: '/wallet/webhook',
      headers: user.auth,
      payload: { webhook: 'http://127.0.0.1:4917/hooks' },
    })
    assert.equal(hook.statusCode, 200, hook.body)
    const text = (await scrape({ authorization: `Bearer ${METRICS_TOKEN}` })).body
    assert.match(text, /^coffer_webhook_backlog \d+$/m)
    assert.ok(!text.includes('127.0.0.1:4917'), 'the receiver is not named')
    assert.doesNotMatch(text, /\b(origin|wallet|user)="/)
  })

  it('refuses a METRICS_TOKEN shorter than 24 characters at start', () => {
    assert.throws(() => loadConfig({ METRICS_TOKEN: 'short' }), /METRICS_TOKEN/)
  })
})

describe('wrong admin keys', () => {
  const LIMIT = 4
  let t: TestApp
  before(async () => {
    t = await buildTestApp({ AUTH_RATE_LIMIT: String(LIMIT) })
  })
  after(async () => {
    mock.timers.reset()
    await t.close()
  })

  const as = (ip: string, authorization: string | undefined, method: 'GET' | 'POST', url: string, payload?: object) =>
    t.app.inject({ method, url, remoteAddress: ip, headers: authorization === undefined ? {} : { authorization }, payload })

  it('are counted by one limiter whatever route or header carries them, and then the right key is refused too', async () => {
    mock.timers.enable({ apis: ['Date'], now: Date.now() })
    try {
      const ip = '203.0.113.40'
      const wrong = createToken('admin')
      expectError(await as(ip, `Bearer ${wrong}`, 'GET', '/admin/overview'), 403, 'A003')
      expectError(await as(ip, `Bearer ${wrong}`, 'GET', '/metrics'), 403, 'A003')
      expectError(await as(ip, 'Bearer a-long-secret-that-is-not-the-admin-key', 'GET', '/assets'), 401, 'A001')
      expectError(await as(ip, undefined, 'POST', '/admin/sessions', { key: wrong }), 403, 'A003')
      // The fifth wrong key, as a bare header this time, is over the limit...
      const limited = await as(ip, wrong, 'GET', '/admin/overview')
      expectError(limited, 429, 'G005')
      const retryAfter = Number(limited.headers['retry-after'])
      assert.ok(retryAfter >= 1 && retryAfter <= 60)
      // ...and so is the right key from that address, on every route that takes it.
      expectError(await as(ip, `Bearer ${ADMIN_KEY}`, 'GET', '/admin/overview'), 429, 'G005')
      expectError(await as(ip, `Bearer ${ADMIN_KEY}`, 'GET', '/assets'), 429, 'G005')
      expectError(await as(ip, `Bearer ${ADMIN_KEY}`, 'GET', '/metrics'), 429, 'G005')
      // Another address is not affected; the right key is never counted.
      for (let i = 0; i < LIMIT + 2; i++)
        assert.equal((await as('203.0.113.41', `Bearer ${ADMIN_KEY}`, 'GET', '/admin/overview')).statusCode, 200)
      mock.timers.tick(retryAfter * 1000)
      assert.equal((await as(ip, `Bearer ${ADMIN_KEY}`, 'GET', '/admin/overview')).statusCode, 200)
    } finally {
      mock.timers.reset()
    }
  })

  it('do not count user sessions or wallet keys that are wrong', async () => {
    mock.timers.enable({ apis: ['Date'], now: Date.now() })
    try {
      const ip = '203.0.113.50'
      for (let i = 0; i < LIMIT + 2; i++) {
        expectError(await as(ip, `Bearer ${createToken('user')}`, 'GET', '/assets'), 401, 'A001')
        expectError(await as(ip, `Bearer ${createToken('wallet')}`, 'GET', '/assets'), 401, 'A001')
      }
      assert.equal((await as(ip, `Bearer ${ADMIN_KEY}`, 'GET', '/admin/overview')).statusCode, 200)
    } finally {
      mock.timers.reset()
    }
  })
})

describe('files of the data directory', () => {
  let dir: string
  let umask: number
  before(() => {
    // The most permissive umask: whatever the process's umask, the files are the owner's alone.
    umask = process.umask(0)
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'coffer-modes-'))
  })
  after(() => {
    process.umask(umask)
    fs.rmSync(dir, { recursive: true, force: true })
  })

  const mode = (file: string) => fs.statSync(file).mode & 0o777

  it('creates the SQLite database, its WAL and SHM files, and the key files with mode 0600', async () => {
    const dataDir = path.join(dir, 'fresh')
    const config = loadConfig({ DATA_DIR: dataDir })
    const database = openDatabase({ databaseUrl: undefined, dataDir })
    try {
      await migrateToLatest(database.db)
      for (const name of ['coffer.sqlite', 'coffer.sqlite-wal', 'coffer.sqlite-shm'])
        assert.equal(mode(path.join(dataDir, name)), 0o600, name)
    } finally {
      await database.close()
    }
    assert.equal(mode(dataDir), 0o700, 'the data directory')
    assert.equal(mode(resolveAdminKey(config).file as string), 0o600, 'admin-key')
    assert.equal(mode(createSecretsKeyFile(config).file as string), 0o600, 'secrets-key')
  })

  it('narrows a database an earlier version left readable by others', async () => {
    const dataDir = path.join(dir, 'earlier')
    fs.mkdirSync(dataDir, { mode: 0o755 })
    for (const name of ['coffer.sqlite', 'coffer.sqlite-wal', 'coffer.sqlite-shm'])
      fs.writeFileSync(path.join(dataDir, name), '', { mode: 0o644 })
    const database = openDatabase({ databaseUrl: undefined, dataDir })
    try {
      await migrateToLatest(database.db)
      for (const name of ['coffer.sqlite', 'coffer.sqlite-wal', 'coffer.sqlite-shm'])
        assert.equal(mode(path.join(dataDir, name)), 0o600, name)
    } finally {
      await database.close()
    }
  })
})
