import assert from 'node:assert/strict'
import fs from 'node:fs'
import { after, before, describe, it } from 'node:test'
import type { InjectOptions, LightMyRequestResponse } from 'fastify'
import { sql } from 'kysely'
import { buildApp } from '../../src/app.ts'
import { loadConfig } from '../../src/config.ts'
import { openPostgres } from '../../src/db/database.ts'
import { ERRORS, type ErrorCode } from '../../src/http/errors.ts'
import { hashToken } from '../../src/http/tokens.ts'
import { ADMIN_KEY, awayFromTheMinute, buildTestApp, type TestApp } from '../helpers/app.ts'
import { createUser, type TestUser } from '../helpers/factories.ts'
import { freePort } from '../../scripts/lib/postgres.ts'
import { generateSecretsKey } from '../../src/secrets/secret-box.ts'

/** The error table as the API promises it, copied by hand: the table in the code must say exactly this. */
const CONTRACT: Record<string, [number, string]> = {
  G000: [400, 'Invalid JSON Body'],
  G001: [400, 'Invalid URL Parameter'],
  G002: [400, 'Invalid URL Query'],
  G003: [409, 'Idempotency Key Reused'],
  G004: [409, 'Request In Progress'],
  G005: [429, 'Too Many Requests'],
  G006: [404, 'Route Not Found'],
  S000: [500, 'Unexpected Server Error'],
  S001: [503, 'Service Unavailable'],
  U000: [409, 'Username Taken'],
  U001: [401, 'Invalid Username or Password'],
  U003: [404, 'User Not Found'],
  U004: [404, 'Session Not Found'],
  W000: [404, 'Wallet Not Found'],
  W002: [404, 'Wallet or Asset Not Found'],
  W003: [409, 'User Already Assigned To Wallet'],
  W005: [404, 'Session Not Found'],
  W006: [400, 'Wallet Not Owned'],
  W007: [400, 'User Not Assigned'],
  W008: [400, "Can't Delete Primary Wallet"],
  W010: [400, 'Webhook URL Not Allowed'],
  W011: [409, 'Address Taken'],
  W012: [400, "Can't Transfer Primary Wallet"],
  W013: [400, "Can't Send To Same Wallet"],
  A000: [401, 'Session Required'],
  A001: [401, 'Invalid Session'],
  A003: [403, 'Invalid Admin Key'],
  A004: [403, 'Cross-Site Request Refused'],
  I000: [404, 'Asset Not Found'],
  I001: [400, 'Invalid Asset'],
  I002: [400, 'Insufficient Quantity'],
  I003: [400, 'Quantity Overflow'],
  I004: [409, 'Asset Name Taken'],
  I005: [409, 'Asset In Use'],
  T000: [404, 'Transaction Not Found'],
  T001: [409, 'Transaction Not Reversible'],
  H000: [404, 'Hold Not Found'],
  H001: [409, 'Hold Not Pending'],
  H002: [400, 'Capture Exceeds Hold'],
  J000: [409, 'Not In Journal Yet'],
  K000: [403, 'Key Scope Missing'],
  K001: [403, 'Key Limit Reached'],
  K002: [403, 'Recipient Not Allowed'],
  C000: [409, 'Credit Not Allowed'],
  C001: [409, 'Wallet In Debt'],
  R000: [404, 'Schedule Not Found'],
  R001: [409, 'Schedule Ended'],
  M000: [404, 'Monitor Not Found'],
  M001: [409, 'Too Many Monitors'],
}

/** Codes raised only by routes that other suites cover; here they are checked through the table alone. */
const TABLE_ONLY = new Set(['G004', 'W003', 'W005', 'W006', 'W007', 'W008', 'W010', 'W012', 'J000', 'C000', 'C001'])

/** Asserts the full error layout (`code`, `message`, `detail`, `request_id`) for `code`. */
function assertError(response: LightMyRequestResponse, code: ErrorCode): void {
  const { status, message } = ERRORS[code]
  assert.equal(response.statusCode, status, `${code}: ${response.body}`)
  assert.match(String(response.headers['content-type']), /^application\/json/)
  const body = response.json()
  assert.equal(body.code, code, response.body)
  assert.equal(body.message, message)
  assert.equal(body.request_id, response.headers['x-request-id'])
  // The contract's fields, in its order.
  const layout = ['code', 'message', 'detail', 'request_id']
  assert.deepEqual(
    Object.keys(body),
    layout.filter((key) => key in body),
    `fields of ${response.body}`,
  )
  if (body.detail !== undefined) {
    assert.equal(typeof body.detail, 'string')
    assert.doesNotMatch(
      body.detail,
      /\bselect\b|\binsert\b|\bupdate\b.*\bset\b|at .*\.ts:\d+|cfu_|cfw_|cfa_/i,
      'no SQL, stack or secret in the detail',
    )
  }
}

describe('the error table', () => {
  it('holds exactly the codes of the contract, each with its status and message', () => {
    const table = Object.fromEntries(Object.entries(ERRORS).map(([code, entry]) => [code, [entry.status, entry.message]]))
    assert.deepEqual(table, CONTRACT)
  })

  it('gives every code a well-formed name, an error status and a non-empty message', () => {
    for (const [code, entry] of Object.entries(ERRORS)) {
      assert.match(code, /^[GSUWAIHTJKCRM]\d{3}$/)
      assert.ok(Number.isInteger(entry.status) && entry.status >= 400 && entry.status <= 599, `${code} status ${entry.status}`)
      assert.ok(entry.message.trim().length > 0, `${code} message`)
    }
  })
})

describe('every code, provoked through HTTP', () => {
  let t: TestApp
  let alice: TestUser
  let bob: TestUser
  let aliceCookie: string
  let gold: { id: number; name: string }

  before(async () => {
    t = await buildTestApp()
    alice = await createUser(t.app)
    bob = await createUser(t.app)
    const login = await t.app.inject({ method: 'POST', url: `/users/${alice.username}/sessions`, payload: { password: alice.password } })
    const cookie = login.cookies.find((entry) => entry.name === t.config.sessionCookieName)
    assert.ok(cookie)
    aliceCookie = `${cookie.name}=${cookie.value}`
    gold = (await t.app.inject({ method: 'POST', url: '/assets', headers: t.admin, payload: { name: 'gold', value: 1 } })).json()
    const issued = await t.app.inject({
      method: 'POST',
      url: `/wallets/${alice.walletId}/assets`,
      headers: t.admin,
      payload: { id: gold.id, quantity: 10 },
    })
    assert.equal(issued.statusCode, 201)
  })
  after(async () => {
    await t.close()
  })

  const inject = (options: InjectOptions): Promise<LightMyRequestResponse> => t.app.inject(options)
  /** A wallet key of alice's wallet with these scopes and limits, as headers. */
  const newKey = async (body: object): Promise<Record<string, string>> => {
    const created = await inject({ method: 'POST', url: '/wallet/sessions', headers: alice.auth, payload: body })
    assert.equal(created.statusCode, 201, created.body)
    return { authorization: `Bearer ${created.json().token}` }
  }

  /** One request (or a short sequence whose last response is checked) per code. */
  const provoke: Partial<Record<ErrorCode, () => Promise<LightMyRequestResponse>>> = {
    G000: () => inject({ method: 'POST', url: '/users', headers: { 'content-type': 'application/json' }, payload: '{"username":' }),
    G001: () => inject({ method: 'DELETE', url: '/user/sessions/abc', headers: alice.auth }),
    G002: () => inject({ method: 'GET', url: '/wallet/transactions?limit=1000', headers: alice.auth }),
    G003: async () => {
      const headers = { ...alice.auth, 'idempotency-key': 'errors-g003' }
      const first = await inject({
        method: 'POST',
        url: '/wallet/transactions',
        headers,
        payload: { recipient: bob.username, assets: { gold: 1 } },
      })
      assert.equal(first.statusCode, 201, first.body)
      return inject({ method: 'POST', url: '/wallet/transactions', headers, payload: { recipient: bob.username, assets: { gold: 2 } } })
    },
    G005: async () => {
      const limited = await buildTestApp({ AUTH_RATE_LIMIT: '1' })
      try {
        // Both attempts in one window: on PostgreSQL windows turn with the clock's minute.
        await awayFromTheMinute(5_000)
        await limited.app.inject({ method: 'POST', url: '/users/someone/sessions', payload: { password: 'whatever1' } })
        return await limited.app.inject({ method: 'POST', url: '/users/someone/sessions', payload: { password: 'whatever1' } })
      } finally {
        await limited.close()
      }
    },
    G006: () => inject({ method: 'GET', url: '/wallet/nowhere' }),
    // A schema that lost a table is a fault of the server, not of the request.
    S000: () =>
      withBrokenStorage(
        async (broken) => {
          await sql`drop table idempotency_keys`.execute(broken.database.db)
        },
        (broken, user) =>
          broken.app.inject({
            method: 'POST',
            url: '/wallet/transactions',
            headers: { ...user.auth, 'idempotency-key': 'k1' },
            payload: { recipient: 'someone', assets: { gold: 1 } },
          }),
      ),
    S001: () =>
      withBrokenStorage(
        (broken) => broken.database.close(),
        (broken, user) => broken.app.inject({ method: 'GET', url: '/wallet/assets', headers: user.auth }),
      ),
    U000: () => inject({ method: 'POST', url: '/users', payload: { username: alice.username.toUpperCase(), password: 'correct horse' } }),
    U001: () => inject({ method: 'POST', url: `/users/${alice.username}/sessions`, payload: { password: 'not her password' } }),
    U003: () =>
      inject({
        method: 'POST',
        url: '/wallet/transactions',
        headers: alice.auth,
        payload: { recipient: 'nosuchuser', assets: { gold: 1 } },
      }),
    U004: () => inject({ method: 'DELETE', url: '/user/sessions/987654', headers: alice.auth }),
    W000: () =>
      inject({
        method: 'POST',
        url: '/wallet/transactions',
        headers: alice.auth,
        payload: { recipient: 'nosuchaddress', type: 1, assets: { gold: 1 } },
      }),
    W002: () => inject({ method: 'POST', url: '/wallets/987654/assets', headers: t.admin, payload: { id: gold.id, quantity: 1 } }),
    W011: () => inject({ method: 'POST', url: '/user/wallets', headers: alice.auth, payload: { address: bob.address } }),
    W013: () =>
      inject({
        method: 'POST',
        url: '/wallet/transactions',
        headers: alice.auth,
        payload: { recipient: alice.username, assets: { gold: 1 } },
      }),
    A000: () => inject({ method: 'GET', url: '/wallet/assets' }),
    // The last character changed (to 'x', or to 'y' when it already is 'x'): the checksum no longer matches.
    A001: () =>
      inject({
        method: 'GET',
        url: '/wallet/assets',
        headers: { authorization: `Bearer ${alice.token.slice(0, -1)}${alice.token.endsWith('x') ? 'y' : 'x'}` },
      }),
    A003: () => inject({ method: 'POST', url: '/assets', headers: alice.auth, payload: { name: 'silver', value: 1 } }),
    A004: () =>
      inject({ method: 'POST', url: '/user/wallets', headers: { cookie: aliceCookie, origin: 'https://evil.example.com' }, payload: {} }),
    I000: () => inject({ method: 'PUT', url: '/assets/987654/value', headers: t.admin, payload: { value: 2 } }),
    K000: async () => {
      const key = await newKey({ scopes: ['read'] })
      return inject({
        method: 'POST',
        url: '/wallet/transactions',
        headers: key,
        payload: { recipient: bob.username, assets: { gold: 1 } },
      })
    },
    K001: async () => {
      const key = await newKey({ limits: { per_transfer: { gold: 1 } } })
      return inject({
        method: 'POST',
        url: '/wallet/transactions',
        headers: key,
        payload: { recipient: bob.username, assets: { gold: 2 } },
      })
    },
    K002: async () => {
      const key = await newKey({ limits: { recipients: [alice.walletId] } })
      return inject({
        method: 'POST',
        url: '/wallet/transactions',
        headers: key,
        payload: { recipient: bob.username, assets: { gold: 1 } },
      })
    },
    I001: () =>
      inject({
        method: 'POST',
        url: '/wallet/transactions',
        headers: alice.auth,
        payload: { recipient: bob.username, assets: { unobtainium: 1 } },
      }),
    I002: () =>
      inject({
        method: 'POST',
        url: '/wallet/transactions',
        headers: alice.auth,
        payload: { recipient: bob.username, assets: { gold: 1000 } },
      }),
    I003: async () => {
      const huge = (await inject({ method: 'POST', url: '/assets', headers: t.admin, payload: { name: 'huge', value: 0 } })).json()
      const first = await inject({
        method: 'POST',
        url: `/wallets/${bob.walletId}/assets`,
        headers: t.admin,
        payload: { id: huge.id, quantity: Number.MAX_SAFE_INTEGER },
      })
      assert.equal(first.statusCode, 201, first.body)
      return inject({ method: 'POST', url: `/wallets/${bob.walletId}/assets`, headers: t.admin, payload: { id: huge.id, quantity: 1 } })
    },
    I004: () => inject({ method: 'POST', url: '/assets', headers: t.admin, payload: { name: 'GOLD', value: 3 } }),
    I005: () => inject({ method: 'DELETE', url: `/assets/${gold.id}`, headers: t.admin }),
    T000: () => inject({ method: 'POST', url: '/wallet/transactions/987654/refund', headers: alice.auth }),
    T001: async () => {
      const sent = await inject({
        method: 'POST',
        url: '/wallet/transactions',
        headers: alice.auth,
        payload: { recipient: bob.username, assets: { gold: 1 } },
      })
      assert.equal(sent.statusCode, 201, sent.body)
      return inject({
        method: 'POST',
        url: `/wallet/transactions/${sent.json().id}/refund`,
        headers: bob.auth,
        payload: { assets: { gold: 2 } },
      })
    },
    H000: () => inject({ method: 'GET', url: '/wallet/holds/987654', headers: alice.auth }),
    R000: () => inject({ method: 'GET', url: '/wallet/schedules/987654', headers: alice.auth }),
    R001: async () => {
      const start_at = new Date(Date.now() + 3_600_000).toISOString()
      const created = await inject({
        method: 'POST',
        url: '/wallet/schedules',
        headers: alice.auth,
        payload: { recipient: bob.username, assets: { gold: 1 }, start_at },
      })
      assert.equal(created.statusCode, 201, created.body)
      const cancelled = await inject({ method: 'DELETE', url: `/wallet/schedules/${created.json().id}`, headers: alice.auth })
      assert.equal(cancelled.statusCode, 200, cancelled.body)
      return inject({ method: 'POST', url: `/wallet/schedules/${created.json().id}/pause`, headers: alice.auth })
    },
    M000: () => inject({ method: 'DELETE', url: '/wallet/monitors/987654', headers: alice.auth }),
    M001: async () => {
      for (let above = 0; above < 20; above++) {
        const made = await inject({ method: 'POST', url: '/wallet/monitors', headers: alice.auth, payload: { asset: 'gold', above } })
        assert.equal(made.statusCode, 201, made.body)
      }
      return inject({ method: 'POST', url: '/wallet/monitors', headers: alice.auth, payload: { asset: 'gold', above: 20 } })
    },
    H001: async () => {
      const hold = await inject({
        method: 'POST',
        url: '/wallet/holds',
        headers: alice.auth,
        payload: { recipient: bob.username, assets: { gold: 1 } },
      })
      assert.equal(hold.statusCode, 201, hold.body)
      const voided = await inject({ method: 'POST', url: `/wallet/holds/${hold.json().id}/void`, headers: bob.auth })
      assert.equal(voided.statusCode, 200, voided.body)
      return inject({ method: 'POST', url: `/wallet/holds/${hold.json().id}/capture`, headers: alice.auth })
    },
    H002: async () => {
      const hold = await inject({
        method: 'POST',
        url: '/wallet/holds',
        headers: alice.auth,
        payload: { recipient: bob.username, assets: { gold: 1 } },
      })
      assert.equal(hold.statusCode, 201, hold.body)
      return inject({
        method: 'POST',
        url: `/wallet/holds/${hold.json().id}/capture`,
        headers: alice.auth,
        payload: { assets: { gold: 2 } },
      })
    },
  }

  /** Runs `request` as a fresh user of a second app whose storage `breakIt` has broken. */
  async function withBrokenStorage(
    breakIt: (broken: TestApp) => Promise<void>,
    request: (broken: TestApp, user: TestUser) => Promise<LightMyRequestResponse>,
  ): Promise<LightMyRequestResponse> {
    const broken = await buildTestApp()
    try {
      const user = await createUser(broken.app)
      await breakIt(broken)
      return await request(broken, user)
    } finally {
      await broken.app.close()
      await broken.database.close().catch(() => {})
      fs.rmSync(broken.config.dataDir, { recursive: true, force: true })
    }
  }

  it('answers /readyz and a login with 503 S001 while storage is unreachable, not with a wrong-password answer', async () => {
    let readiness: LightMyRequestResponse | undefined
    const login = await withBrokenStorage(
      (broken) => broken.database.close(),
      async (broken, user) => {
        readiness = await broken.app.inject({ method: 'GET', url: '/readyz' })
        return broken.app.inject({ method: 'POST', url: `/users/${user.username}/sessions`, payload: { password: user.password } })
      },
    )
    assert.ok(readiness)
    assertError(readiness, 'S001')
    assertError(login, 'S001')
    assert.equal((await inject({ method: 'GET', url: '/healthz' })).statusCode, 200, 'this app is unaffected')
  })

  it('answers with 503 S001 when PostgreSQL refuses connections', async () => {
    const port = await freePort()
    const url = `postgres://coffer:secret@127.0.0.1:${port}/coffer`
    const config = loadConfig({ DATABASE_URL: url, ADMIN_API_KEY: ADMIN_KEY, LOG_LEVEL: 'silent', AUTH_RATE_LIMIT: '0' })
    const database = openPostgres(url, 2)
    const app = await buildApp({ config, database, adminKeyHash: hashToken(ADMIN_KEY), secretsKey: generateSecretsKey() })
    try {
      const response = await app.inject({ method: 'GET', url: '/assets', headers: { authorization: `Bearer ${ADMIN_KEY}` } })
      assertError(response, 'S001')
      assert.doesNotMatch(response.body, /secret|127\.0\.0\.1|ECONNREFUSED/)
    } finally {
      await app.close()
      await database.close()
    }
  })

  it('has a provoking request for every code except those owned by other suites', () => {
    const covered = new Set([...Object.keys(provoke), ...TABLE_ONLY])
    assert.deepEqual([...covered].sort(), Object.keys(ERRORS).sort())
    for (const code of TABLE_ONLY) assert.ok(!(code in provoke), `${code} is either provoked or table-only`)
  })

  for (const code of Object.keys(ERRORS) as ErrorCode[]) {
    if (TABLE_ONLY.has(code)) continue
    it(`answers ${code} with ${ERRORS[code].status} "${ERRORS[code].message}"`, async () => {
      const run = provoke[code]
      assert.ok(run, `no request provokes ${code}`)
      const response = await run()
      assertError(response, code)
      if (code === 'G005') {
        assert.ok(Number(response.headers['retry-after']) >= 1, 'G005 carries Retry-After')
      }
      if (code === 'S000' || code === 'S001') {
        assert.equal(
          response.json().detail === undefined || !/sqlite|postgres|pool|connection|driver/i.test(response.json().detail),
          true,
          'no storage internals',
        )
      }
    })
  }
})
