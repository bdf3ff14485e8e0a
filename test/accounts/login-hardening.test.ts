import assert from 'node:assert/strict'
import { after, before, describe, it, mock } from 'node:test'
import { DECOY_HASH, hashPassword, verifyPassword } from '../../src/accounts/passwords.ts'
import { AppError } from '../../src/http/errors.ts'
import { RateLimiter } from '../../src/http/rate-limit.ts'
import { buildTestApp, expectError, type TestApp } from '../helpers/app.ts'
import { createUser, type TestUser } from '../helpers/factories.ts'

/**
 * Login hardening: rate limits on login and registration engage with G005 and
 * Retry-After and release after their window; an unknown username and a wrong password answer
 * alike, in comparable time.
 */

const LIMIT = 3

function login(t: TestApp, username: string, password: string, ip = '203.0.113.1') {
  return t.app.inject({ method: 'POST', url: `/users/${username}/sessions`, remoteAddress: ip, payload: { password, return_token: true } })
}

function expectLimited(response: Awaited<ReturnType<typeof login>>): number {
  expectError(response, 429, 'G005')
  const retryAfter = Number(response.headers['retry-after'])
  assert.ok(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 60, `Retry-After is ${response.headers['retry-after']}`)
  return retryAfter
}

describe('RateLimiter', () => {
  it('allows the limit per window, refuses the next with G005 and Retry-After, and releases when the window ends', () => {
    let now = 1_000_000
    const limiter = new RateLimiter(2, () => now)
    limiter.hit('a')
    limiter.hit('a')
    assert.throws(
      () => limiter.hit('a'),
      (error: unknown) => error instanceof AppError && error.code === 'G005' && error.headers['retry-after'] === '60',
    )
    now += 45_000
    assert.throws(
      () => limiter.hit('a'),
      (error: unknown) => error instanceof AppError && error.headers['retry-after'] === '15',
    )
    limiter.hit('b')
    now += 15_000
    limiter.hit('a')
    limiter.hit('a')
    assert.throws(() => limiter.hit('a'))
  })

  it('counts every key and refuses when any of them is over', () => {
    const limiter = new RateLimiter(1, () => 0)
    limiter.hit('ip:1', 'user:x')
    assert.throws(() => limiter.hit('ip:2', 'user:x'))
    assert.throws(() => limiter.hit('ip:1', 'user:y'))
    limiter.hit('ip:3', 'user:z')
  })

  it('never limits when the limit is 0', () => {
    const limiter = new RateLimiter(0, () => 0)
    for (let i = 0; i < 1000; i++) limiter.hit('a')
  })
})

describe('login and registration rate limits', () => {
  let t: TestApp
  let alice: TestUser
  let bob: TestUser

  before(async () => {
    // One app for the block: each test uses its own client addresses, and a mocked clock that
    // jumps past the window, so the tests do not limit one another.
    t = await buildTestApp({ AUTH_RATE_LIMIT: String(LIMIT) })
    alice = await createUser(t.app)
    bob = await createUser(t.app)
  })
  after(async () => {
    mock.timers.reset()
    await t.close()
  })

  it('limits wrong passwords per username across addresses, refuses even the right one, and releases after the window', async () => {
    mock.timers.enable({ apis: ['Date'], now: Date.now() })
    try {
      for (let i = 0; i < LIMIT - 1; i++) expectError(await login(t, alice.username, 'wrong password', `198.51.100.${i + 10}`), 401, 'U001')
      const retryAfter = expectLimited(await login(t, alice.username, 'wrong password', '198.51.100.50'))
      // The correct password does not get past the limit either, nor a change of letter case.
      expectLimited(await login(t, alice.username, alice.password, '198.51.100.51'))
      expectLimited(await login(t, alice.username.toUpperCase(), alice.password, '198.51.100.52'))
      // Another user is not affected.
      assert.equal((await login(t, bob.username, bob.password, '198.51.100.53')).statusCode, 201)
      mock.timers.tick(retryAfter * 1000)
      const released = await login(t, alice.username, alice.password, '198.51.100.54')
      assert.equal(released.statusCode, 201, released.body)
    } finally {
      mock.timers.reset()
    }
  })

  it('limits login attempts per client address across usernames, and releases after the window', async () => {
    mock.timers.enable({ apis: ['Date'], now: Date.now() })
    try {
      const ip = '192.0.2.77'
      for (let i = 0; i < LIMIT; i++) expectError(await login(t, `nobody${i}x`, 'whatever password', ip), 401, 'U001')
      const retryAfter = expectLimited(await login(t, bob.username, bob.password, ip))
      assert.equal((await login(t, bob.username, bob.password, '192.0.2.78')).statusCode, 201, 'another address is not affected')
      mock.timers.tick(retryAfter * 1000)
      assert.equal((await login(t, bob.username, bob.password, ip)).statusCode, 201)
    } finally {
      mock.timers.reset()
    }
  })

  it('limits registrations per client address, and releases after the window', async () => {
    mock.timers.enable({ apis: ['Date'], now: Date.now() })
    try {
      const ip = '192.0.2.90'
      const register = (username: string) =>
        t.app.inject({ method: 'POST', url: '/users', remoteAddress: ip, payload: { username, password: 'long enough' } })
      for (let i = 0; i < LIMIT; i++) assert.equal((await register(`limited${i}r${process.pid}`)).statusCode, 201)
      const refused = await register(`limitedxr${process.pid}`)
      const retryAfter = expectLimited(refused)
      mock.timers.tick(retryAfter * 1000)
      assert.equal((await register(`limitedxr${process.pid}`)).statusCode, 201)
    } finally {
      mock.timers.reset()
    }
  })
})

describe('login answers alike for an unknown user and a wrong password', () => {
  let t: TestApp
  let alice: TestUser

  before(async () => {
    t = await buildTestApp()
    alice = await createUser(t.app)
  })
  after(async () => {
    await t.close()
  })

  function comparable(response: Awaited<ReturnType<typeof login>>) {
    const { request_id: _requestId, ...body } = response.json()
    const headers = Object.keys(response.headers)
      .filter((name) => !['date', 'x-request-id'].includes(name))
      .sort()
    return { status: response.statusCode, body, headers, length: response.body.length - String(response.headers['x-request-id']).length }
  }

  it('gives the same status, body and headers', async () => {
    const unknown = comparable(await login(t, 'nosuchuser', alice.password))
    const wrong = comparable(await login(t, alice.username, 'not the password'))
    assert.deepEqual(unknown, wrong)
    assert.deepEqual(unknown.body, { code: 'U001', message: 'Invalid Username or Password' })
    // Letter case does not tell either: the same user in capitals with a wrong password.
    assert.deepEqual(comparable(await login(t, alice.username.toUpperCase(), 'not the password')), wrong)
    // Nor does a name no user could have: too long, or not alphanumeric.
    for (const name of ['a'.repeat(65), 'b'.repeat(512), 'no%20such%20user'])
      assert.deepEqual(comparable(await login(t, name, 'not the password')), wrong, name)
  })

  it('checks unknown usernames against a hash made with the parameters of real ones', async () => {
    const parameters = (hash: string) => hash.split('$').slice(0, 4).join('$')
    assert.equal(parameters(DECOY_HASH), parameters(await hashPassword('any password')))
    assert.equal(await verifyPassword(DECOY_HASH, 'decoy password that matches nobody'), true)
  })

  it('takes comparable time: the means of 10 tries differ by less than one password hash', async (context) => {
    const stored = await hashPassword(alice.password)
    // Warm both paths.
    await login(t, 'warmupnobody', 'x')
    await login(t, alice.username, 'warm up')
    const mean = (list: number[]) => list.reduce((sum, value) => sum + value, 0) / list.length
    /** One measurement: 10 of each, interleaved with 10 bare hash checks, so all see the same load. */
    async function measure() {
      const unknown: number[] = []
      const wrong: number[] = []
      const hashes: number[] = []
      const timed = async (list: number[], work: () => Promise<unknown>) => {
        const started = performance.now()
        await work()
        list.push(performance.now() - started)
      }
      for (let i = 0; i < 10; i++) {
        const steps = [
          () => timed(unknown, async () => expectError(await login(t, `nobody${i}`, 'not the password'), 401, 'U001')),
          () => timed(wrong, async () => expectError(await login(t, alice.username, 'not the password'), 401, 'U001')),
          () => timed(hashes, () => verifyPassword(stored, 'not the password')),
        ]
        for (const step of i % 2 === 0 ? steps : steps.reverse()) await step()
      }
      const hashTime = mean(hashes)
      const figures = `unknown user ${mean(unknown).toFixed(1)} ms, wrong password ${mean(wrong).toFixed(1)} ms, one hash ${hashTime.toFixed(1)} ms`
      // Equal within one hash, and an unknown user really spends the hash time: answering at
      // once would tell it apart.
      return { ok: Math.abs(mean(unknown) - mean(wrong)) < hashTime && mean(unknown) > 0.8 * hashTime, figures }
    }
    // Other test files run beside this one; a burst of their load can skew one measurement, but a
    // real difference (a missing decoy) shows in every one of three.
    const results: string[] = []
    let passed = false
    for (let attempt = 0; attempt < 3 && !passed; attempt++) {
      const result = await measure()
      results.push(result.figures)
      passed = result.ok
    }
    context.diagnostic(results.join(' | '))
    assert.ok(passed, results.join(' | '))
  })
})
