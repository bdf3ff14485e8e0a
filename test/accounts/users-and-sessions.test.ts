import assert from 'node:assert/strict'
import { after, before, beforeEach, describe, it } from 'node:test'
import type { LightMyRequestResponse } from 'fastify'
import * as repo from '../../src/accounts/accounts.repository.ts'
import type { Trx } from '../../src/db/database.ts'
import { hashPassword } from '../../src/accounts/passwords.ts'
import { createToken } from '../../src/http/tokens.ts'
import { ADMIN_KEY, awayFromTheMinute, buildTestApp, expectError, whileOpen, type TestApp } from '../helpers/app.ts'
import { createUser, type TestUser } from '../helpers/factories.ts'

const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/

let t: TestApp
before(async () => {
  t = await buildTestApp()
})
after(async () => {
  await t.close()
})

let counter = 0
/** A fresh username that no other test uses. */
function uniqueName(prefix = 'acct'): string {
  counter += 1
  return `${prefix}${process.pid}n${counter}`
}

function get(url: string, headers: Record<string, string>) {
  return t.app.inject({ method: 'GET', url, headers })
}

function register(username: unknown, password: unknown) {
  return t.app.inject({ method: 'POST', url: '/users', payload: { username, password } })
}

function login(username: string, password: string, returnToken?: boolean, remoteAddress?: string) {
  const payload = returnToken === undefined ? { password } : { password, return_token: returnToken }
  return t.app.inject({ method: 'POST', url: `/users/${encodeURIComponent(username)}/sessions`, payload, remoteAddress })
}

/** Another session of the same user, by returned token. */
async function newSession(user: TestUser): Promise<{ id: number; auth: Record<string, string> }> {
  const response = await login(user.username, user.password, true)
  assert.equal(response.statusCode, 201, response.body)
  return { id: response.json().id, auth: { authorization: `Bearer ${response.json().token}` } }
}

function sessionCookie(response: LightMyRequestResponse) {
  return response.cookies.find((cookie) => cookie.name === t.config.sessionCookieName)
}

async function isAlive(auth: Record<string, string>): Promise<boolean> {
  const response = await get('/user/session', auth)
  if (response.statusCode === 200) return true
  expectError(response, 401, 'A001')
  return false
}

describe('POST /users', () => {
  it('registers a user with a primary wallet at a random lowercase address', async () => {
    const username = uniqueName('Reg')
    const response = await register(username, 'correct horse')
    assert.equal(response.statusCode, 201, response.body)
    const body = response.json()
    assert.deepEqual(Object.keys(body).sort(), ['id', 'primary_wallet_id', 'username', 'wallet_address'])
    assert.equal(body.username, username)
    assert.ok(Number.isSafeInteger(body.id) && body.id > 0)
    assert.ok(Number.isSafeInteger(body.primary_wallet_id) && body.primary_wallet_id > 0)
    assert.match(body.wallet_address, /^[a-z]{3,24}$/)
    assert.ok(!response.body.includes('correct horse'), 'the password is never returned')
  })

  it('gives every user a different address', async () => {
    const [a, b] = await Promise.all([register(uniqueName(), 'correct horse'), register(uniqueName(), 'correct horse')])
    assert.notEqual(a.json().wallet_address, b.json().wallet_address)
    assert.notEqual(a.json().primary_wallet_id, b.json().primary_wallet_id)
  })

  it('refuses a username taken in another case with 409 U000', async () => {
    const username = uniqueName('Case')
    assert.equal((await register(username, 'correct horse')).statusCode, 201)
    expectError(await register(username.toLowerCase(), 'another password'), 409, 'U000')
    expectError(await register(username.toUpperCase(), 'another password'), 409, 'U000')
    // The original account is untouched: its password still works, the other one does not.
    assert.equal((await login(username, 'correct horse', true)).statusCode, 201)
    expectError(await login(username, 'another password', true), 401, 'U001')
  })

  it('accepts usernames of 2 and 32 characters and passwords of 8 and 32 characters', async () => {
    const longName = uniqueName('L').padEnd(32, 'q')
    assert.equal((await register('zq', '12345678')).statusCode, 201)
    assert.equal((await login('zq', '12345678', true)).statusCode, 201)
    assert.equal((await register(longName, 'p'.repeat(32))).statusCode, 201)
    assert.equal((await login(longName, 'p'.repeat(32), true)).statusCode, 201)
  })

  const badUsernames: [string, unknown][] = [
    ['a space', 'has space'],
    ['non-ASCII letters', 'jürgen'],
    ['non-Latin letters', 'имя'],
    ['1 character', 'a'],
    ['33 characters', 'a'.repeat(33)],
    ['punctuation', 'bob!'],
    ['an underscore', 'bob_smith'],
    ['an empty string', ''],
    ['a number', 12345],
    ['null', null],
  ]
  for (const [why, username] of badUsernames) {
    it(`refuses a username with ${why} with 400 G000`, async () => {
      expectError(await register(username, 'correct horse'), 400, 'G000')
    })
  }

  it('lets only one of two simultaneous registrations of a name succeed', async () => {
    const username = uniqueName('Race')
    const responses = await Promise.all([register(username, 'correct horse'), register(username.toLowerCase(), 'other password')])
    assert.deepEqual(responses.map((response) => response.statusCode).sort(), [201, 409])
    expectError(
      responses.find((response) => response.statusCode === 409)!,
      409,
      'U000',
    )
  })

  it('refuses 7- and 33-character passwords with 400 G000 and creates no user', async () => {
    const username = uniqueName()
    expectError(await register(username, '1234567'), 400, 'G000')
    expectError(await register(username, 'x'.repeat(33)), 400, 'G000')
    expectError(await login(username, '1234567', true), 401, 'U001')
  })

  it('refuses missing fields and a non-string password with 400 G000', async () => {
    expectError(await t.app.inject({ method: 'POST', url: '/users', payload: { username: uniqueName() } }), 400, 'G000')
    expectError(await t.app.inject({ method: 'POST', url: '/users', payload: { password: 'correct horse' } }), 400, 'G000')
    expectError(await t.app.inject({ method: 'POST', url: '/users' }), 400, 'G000')
    expectError(await register(uniqueName(), 123456789), 400, 'G000')
  })
})

describe('POST /users/{username}/sessions', () => {
  let user: TestUser
  before(async () => {
    user = await createUser(t.app, uniqueName('Login'))
  })

  it('logs in by cookie: HttpOnly, SameSite=Lax, Path=/, long-lived, and no token in the body', async () => {
    const response = await login(user.username, user.password)
    assert.equal(response.statusCode, 201, response.body)
    const body = response.json()
    assert.deepEqual(Object.keys(body).sort(), ['id', 'user_id', 'wallet_id'])
    assert.equal(body.user_id, user.id)
    assert.equal(body.wallet_id, user.walletId)
    const cookie = sessionCookie(response)
    assert.ok(cookie, 'sets the session cookie')
    assert.equal(cookie.httpOnly, true)
    assert.equal(String(cookie.sameSite).toLowerCase(), 'lax')
    assert.equal(cookie.path, '/')
    assert.ok(!cookie.secure, 'not Secure unless COOKIE_SECURE is set')
    assert.equal(cookie.maxAge, 30 * 86_400)
    assert.match(cookie.value, /^cfu_/)
    const session = await get('/user/session', { cookie: `${cookie.name}=${cookie.value}` })
    assert.equal(session.statusCode, 200)
    assert.equal(session.json().id, body.id)
  })

  it('returns a token and sets no cookie when return_token is true', async () => {
    const response = await login(user.username, user.password, true)
    assert.equal(response.statusCode, 201, response.body)
    const body = response.json()
    assert.match(body.token, /^cfu_[0-9A-Za-z]{36}$/)
    assert.equal(body.user_id, user.id)
    assert.equal(body.wallet_id, user.walletId)
    assert.equal(sessionCookie(response), undefined)
    assert.equal((await get('/user/session', { authorization: `Bearer ${body.token}` })).json().id, body.id)
  })

  it('logs in whatever the case of the username', async () => {
    assert.equal((await login(user.username.toUpperCase(), user.password, true)).statusCode, 201)
  })

  it('answers an unknown user and a wrong password alike with 401 U001', async () => {
    const unknown = await login(uniqueName('ghost'), user.password, true)
    const wrong = await login(user.username, 'wrong password', true)
    expectError(unknown, 401, 'U001')
    expectError(wrong, 401, 'U001')
    const strip = (response: LightMyRequestResponse) => {
      const { request_id: _ignored, ...rest } = response.json()
      return rest
    }
    assert.deepEqual(strip(unknown), strip(wrong))
    assert.equal(sessionCookie(unknown), undefined)
    assert.equal(sessionCookie(wrong), undefined)
  })

  it('refuses a missing password or a non-boolean return_token with 400 G000', async () => {
    expectError(await t.app.inject({ method: 'POST', url: `/users/${user.username}/sessions`, payload: {} }), 400, 'G000')
    expectError(
      await t.app.inject({
        method: 'POST',
        url: `/users/${user.username}/sessions`,
        payload: { password: user.password, return_token: 'yes' },
      }),
      400,
      'G000',
    )
  })
})

describe('credentials', () => {
  let user: TestUser
  let cookie: string
  before(async () => {
    user = await createUser(t.app, uniqueName('Cred'))
    const response = await login(user.username, user.password)
    const set = sessionCookie(response)
    assert.ok(set)
    cookie = `${set.name}=${set.value}`
  })

  it('accepts the session by cookie, by Bearer header and by bare Authorization header', async () => {
    const ways: Record<string, string>[] = [
      { cookie },
      { authorization: `Bearer ${user.token}` },
      { authorization: `bearer ${user.token}` },
      { authorization: user.token },
    ]
    for (const headers of ways) {
      const response = await get('/user/session', headers)
      assert.equal(response.statusCode, 200, `${JSON.stringify(headers)}: ${response.body}`)
      assert.equal(response.json().user_id, user.id)
    }
  })

  it('answers a request without credentials with 401 A000', async () => {
    expectError(await get('/user/session', {}), 401, 'A000')
    expectError(await get('/user/wallets', { authorization: '' }), 401, 'A000')
    expectError(await get('/wallet/assets', {}), 401, 'A000')
  })

  it('answers a token with a bad checksum with 401 A001', async () => {
    const last = user.token.at(-1) === 'a' ? 'b' : 'a'
    const tampered = user.token.slice(0, -1) + last
    expectError(await get('/user/session', { authorization: `Bearer ${tampered}` }), 401, 'A001')
    expectError(await get('/user/session', { cookie: `${t.config.sessionCookieName}=${tampered}` }), 401, 'A001')
  })

  it('answers tokens of the wrong kind with 401 A001', async () => {
    expectError(await get('/user/session', { authorization: `Bearer ${ADMIN_KEY}` }), 401, 'A001')
    expectError(await get('/user/session', { authorization: `Bearer ${createToken('admin')}` }), 401, 'A001')
    expectError(await get('/user/session', { authorization: `Bearer ${createToken('wallet')}` }), 401, 'A001')
  })

  it('answers a well-formed but unknown token and garbage with 401 A001', async () => {
    expectError(await get('/user/session', { authorization: `Bearer ${createToken('user')}` }), 401, 'A001')
    expectError(await get('/user/session', { authorization: 'Bearer' }), 401, 'A001')
    expectError(await get('/user/session', { authorization: 'Basic dXNlcjpwYXNz' }), 401, 'A001')
    expectError(await get('/user/session', { cookie: `${t.config.sessionCookieName}=nonsense` }), 401, 'A001')
  })
})

describe('GET /user/session and GET /user/sessions', () => {
  let user: TestUser
  before(async () => {
    user = await createUser(t.app, uniqueName('Sess'))
  })

  it('describes the current session', async () => {
    const response = await get('/user/session', user.auth)
    assert.equal(response.statusCode, 200)
    const body = response.json()
    assert.deepEqual(Object.keys(body).sort(), [
      'created_at',
      'id',
      'primary_wallet_id',
      'user_id',
      'username',
      'wallet_address',
      'wallet_id',
      'wallet_user_id',
    ])
    assert.equal(body.user_id, user.id)
    assert.equal(body.username, user.username)
    assert.equal(body.primary_wallet_id, user.walletId)
    assert.equal(body.wallet_id, user.walletId, 'a new session is on the primary wallet')
    assert.equal(body.wallet_user_id, user.id)
    assert.equal(body.wallet_address, user.address)
    assert.match(body.created_at, ISO_MS)
  })

  it('lists the live sessions with exactly the current one marked', async () => {
    const other = await newSession(user)
    const response = await get('/user/sessions', user.auth)
    assert.equal(response.statusCode, 200)
    const sessions = response.json() as {
      id: number
      user_id: number
      wallet_id: number
      created_at: string
      last_used_at: string
      current: boolean
    }[]
    assert.ok(sessions.length >= 2)
    assert.ok(sessions.some((session) => session.id === other.id && !session.current))
    const current = sessions.filter((session) => session.current)
    assert.equal(current.length, 1)
    assert.equal(current[0].id, (await get('/user/session', user.auth)).json().id)
    for (const session of sessions) {
      // Every session here signed in with light-my-request's own User-Agent.
      assert.deepEqual(Object.keys(session).sort(), ['created_at', 'current', 'id', 'last_used_at', 'user_agent', 'user_id', 'wallet_id'])
      assert.equal(session.user_id, user.id)
      assert.match(session.created_at, ISO_MS)
      assert.match(session.last_used_at, ISO_MS)
    }
    assert.ok(!response.body.includes('cfu_'), 'tokens are never listed')
  })

  it('names each session by the User-Agent it signed in with, its first 256 characters, none when none was sent', async () => {
    const signIn = async (userAgent: string) => {
      const response = await t.app.inject({
        method: 'POST',
        url: `/users/${user.username}/sessions`,
        payload: { password: user.password, return_token: true },
        headers: { 'user-agent': userAgent },
      })
      assert.equal(response.statusCode, 201, response.body)
      assert.equal(response.json().user_agent, undefined, 'a new session answers the shape it always had')
      return response.json().id as number
    }
    const android = 'Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36'
    const phone = await signIn(android)
    const long = await signIn(`Bot/1 ${'x'.repeat(400)}`)
    const silent = await signIn('')
    const listed = (await get('/user/sessions', user.auth)).json() as { id: number; user_agent?: string }[]
    const byId = new Map(listed.map((session) => [session.id, session]))
    assert.equal(byId.get(phone)?.user_agent, android)
    assert.equal(byId.get(long)?.user_agent, `Bot/1 ${'x'.repeat(250)}`)
    assert.ok(byId.has(silent) && !('user_agent' in (byId.get(silent) ?? {})), 'no user_agent when none was sent')
  })

  it('neither accepts nor lists a session idle for longer than SESSION_IDLE_DAYS', async () => {
    const idle = await newSession(user)
    const longAgo = new Date(Date.now() - (t.config.sessionIdleDays + 1) * 86_400_000).toISOString()
    await t.database.db.updateTable('user_sessions').set({ last_used_at: longAgo }).where('id', '=', idle.id).execute()
    assert.equal(await isAlive(idle.auth), false)
    const listed = (await get('/user/sessions', user.auth)).json() as { id: number }[]
    assert.ok(!listed.some((session) => session.id === idle.id), 'an idle session is not listed as active')
  })

  it('neither accepts nor lists a session past its lifetime', async () => {
    const old = await newSession(user)
    await t.database.db
      .updateTable('user_sessions')
      .set({ expires_at: new Date(Date.now() - 1000).toISOString() })
      .where('id', '=', old.id)
      .execute()
    assert.equal(await isAlive(old.auth), false)
    const listed = (await get('/user/sessions', user.auth)).json() as { id: number }[]
    assert.ok(!listed.some((session) => session.id === old.id))
  })
})

describe('signing out', () => {
  let user: TestUser
  before(async () => {
    user = await createUser(t.app, uniqueName('Out'))
  })

  it('DELETE /user/session ends a cookie session and clears the cookie', async () => {
    const loggedIn = await login(user.username, user.password)
    const set = sessionCookie(loggedIn)
    assert.ok(set)
    const cookie = `${set.name}=${set.value}`
    const response = await t.app.inject({ method: 'DELETE', url: '/user/session', headers: { cookie } })
    assert.equal(response.statusCode, 204)
    assert.equal(response.body, '')
    const cleared = sessionCookie(response)
    assert.ok(cleared, 'the response clears the cookie')
    assert.equal(cleared.value, '')
    assert.ok(cleared.maxAge === 0 || (cleared.expires !== undefined && cleared.expires.getTime() <= Date.now()), 'the cookie expires now')
    assert.equal(cleared.path, '/')
    assert.equal(await isAlive({ cookie }), false)
  })

  it('DELETE /user/session ends a bearer session and leaves the others alive', async () => {
    const first = await newSession(user)
    const second = await newSession(user)
    assert.equal((await t.app.inject({ method: 'DELETE', url: '/user/session', headers: first.auth })).statusCode, 204)
    assert.equal(await isAlive(first.auth), false)
    assert.equal(await isAlive(second.auth), true)
  })

  it('DELETE /user/sessions/{id} ends one chosen session of the caller', async () => {
    const keep = await newSession(user)
    const end = await newSession(user)
    const response = await t.app.inject({ method: 'DELETE', url: `/user/sessions/${end.id}`, headers: keep.auth })
    assert.equal(response.statusCode, 204)
    assert.equal(await isAlive(end.auth), false)
    assert.equal(await isAlive(keep.auth), true)
    const listed = (await get('/user/sessions', keep.auth)).json() as { id: number }[]
    assert.ok(!listed.some((session) => session.id === end.id))
  })

  it('DELETE /user/sessions/{id} on the current session signs out and clears the cookie', async () => {
    const loggedIn = await login(user.username, user.password)
    const set = sessionCookie(loggedIn)
    assert.ok(set)
    const cookie = `${set.name}=${set.value}`
    const response = await t.app.inject({ method: 'DELETE', url: `/user/sessions/${loggedIn.json().id}`, headers: { cookie } })
    assert.equal(response.statusCode, 204)
    assert.equal(sessionCookie(response)?.value, '')
    assert.equal(await isAlive({ cookie }), false)
  })

  it("answers someone else's session id with 404 U004, and their session still works", async () => {
    const mallory = await createUser(t.app, uniqueName('Mal'))
    const victim = await newSession(user)
    expectError(await t.app.inject({ method: 'DELETE', url: `/user/sessions/${victim.id}`, headers: mallory.auth }), 404, 'U004')
    assert.equal(await isAlive(victim.auth), true)
    assert.equal(await isAlive(mallory.auth), true)
  })

  it('answers an unknown session id with 404 U004', async () => {
    expectError(await t.app.inject({ method: 'DELETE', url: '/user/sessions/987654321', headers: user.auth }), 404, 'U004')
  })

  it('DELETE /user/sessions ends every session of the user, the current one included, and no one else’s', async () => {
    const other = await createUser(t.app, uniqueName('Bystander'))
    const sessions = [await newSession(user), await newSession(user), await newSession(user)]
    const response = await t.app.inject({ method: 'DELETE', url: '/user/sessions', headers: sessions[0].auth })
    assert.equal(response.statusCode, 204)
    assert.equal(sessionCookie(response)?.value, '', 'the cookie is cleared too')
    for (const session of sessions) assert.equal(await isAlive(session.auth), false)
    assert.equal(await isAlive(user.auth), false)
    assert.equal(await isAlive(other.auth), true)
    // Signing in again works.
    assert.equal((await login(user.username, user.password, true)).statusCode, 201)
  })
})

describe('PUT /user/password', () => {
  it('changes the password, ends every other session and keeps the current one', async () => {
    const user = await createUser(t.app, uniqueName('Pw'))
    const other = await newSession(user)
    const response = await t.app.inject({
      method: 'PUT',
      url: '/user/password',
      headers: user.auth,
      payload: { password: 'new password 1' },
    })
    assert.equal(response.statusCode, 200, response.body)
    assert.deepEqual(response.json(), {})
    assert.equal(await isAlive(user.auth), true)
    assert.equal(await isAlive(other.auth), false)
    expectError(await login(user.username, user.password, true), 401, 'U001')
    assert.equal((await login(user.username, 'new password 1', true)).statusCode, 201)
  })

  it('a login with the old password racing the change is refused: no session outlives the change', async () => {
    const user = await createUser(t.app, uniqueName('Pw'))
    const newHash = await hashPassword('new password 2')
    // What PUT /user/password changes, not yet committed while the login arrives.
    const change = async (trx: Trx) => {
      await repo.updateUser(trx, user.id, { password_hash: newHash })
      await repo.deleteUserSessions(trx, user.id)
    }
    // Held long enough for a login that does not wait to verify the password (Argon2id) and commit.
    expectError(await whileOpen(t.database.db, change, () => login(user.username, user.password, true), 1_000), 401, 'U001')
    assert.equal(await isAlive(user.auth), false)
    assert.equal((await login(user.username, 'new password 2', true)).statusCode, 201)
  })

  it('refuses 7- and 33-character passwords with 400 G000 and keeps the old one', async () => {
    const user = await createUser(t.app, uniqueName('Pw'))
    expectError(
      await t.app.inject({ method: 'PUT', url: '/user/password', headers: user.auth, payload: { password: '1234567' } }),
      400,
      'G000',
    )
    expectError(
      await t.app.inject({ method: 'PUT', url: '/user/password', headers: user.auth, payload: { password: 'y'.repeat(33) } }),
      400,
      'G000',
    )
    expectError(await t.app.inject({ method: 'PUT', url: '/user/password', headers: user.auth, payload: {} }), 400, 'G000')
    assert.equal((await login(user.username, user.password, true)).statusCode, 201)
  })
})

describe('PUT /user/username', () => {
  let user: TestUser
  let taken: TestUser
  before(async () => {
    user = await createUser(t.app, uniqueName('Ren'))
    taken = await createUser(t.app, uniqueName('Taken'))
  })

  it('renames the account: the new name logs in, the old one no longer does', async () => {
    const renamed = uniqueName('Renamed')
    const response = await t.app.inject({ method: 'PUT', url: '/user/username', headers: user.auth, payload: { username: renamed } })
    assert.equal(response.statusCode, 200, response.body)
    assert.deepEqual(response.json(), { id: user.id, username: renamed })
    assert.equal((await get('/user/session', user.auth)).json().username, renamed)
    assert.equal((await login(renamed, user.password, true)).statusCode, 201)
    expectError(await login(user.username, user.password, true), 401, 'U001')
    user.username = renamed
  })

  it('lets a user change the case of their own name', async () => {
    const response = await t.app.inject({
      method: 'PUT',
      url: '/user/username',
      headers: user.auth,
      payload: { username: user.username.toUpperCase() },
    })
    assert.equal(response.statusCode, 200, response.body)
    assert.equal(response.json().username, user.username.toUpperCase())
  })

  it('refuses a name held by someone else, in any case, with 409 U000', async () => {
    expectError(
      await t.app.inject({ method: 'PUT', url: '/user/username', headers: user.auth, payload: { username: taken.username.toLowerCase() } }),
      409,
      'U000',
    )
    assert.equal((await login(taken.username, taken.password, true)).statusCode, 201)
  })

  it('refuses bad usernames with 400 G000', async () => {
    for (const username of ['a', 'b'.repeat(33), 'with space', 'ünïcode', 42]) {
      expectError(await t.app.inject({ method: 'PUT', url: '/user/username', headers: user.auth, payload: { username } }), 400, 'G000')
    }
  })
})

describe('wallets of the user', () => {
  let owner: TestUser
  let stranger: TestUser
  before(async () => {
    owner = await createUser(t.app, uniqueName('Own'))
    stranger = await createUser(t.app, uniqueName('Str'))
  })

  const createWallet = (user: TestUser, payload?: unknown) =>
    t.app.inject({ method: 'POST', url: '/user/wallets', headers: user.auth, payload: payload as object })

  it('lists the primary wallet of a new user', async () => {
    const response = await get('/user/wallets', owner.auth)
    assert.equal(response.statusCode, 200)
    assert.deepEqual(response.json(), [{ id: owner.walletId, address: owner.address, user_id: owner.id }])
  })

  it('creates a wallet at a chosen address with 201 and lists it', async () => {
    const address = 'chosenaddress'
    const response = await createWallet(owner, { address })
    assert.equal(response.statusCode, 201, response.body)
    const wallet = response.json()
    assert.deepEqual(Object.keys(wallet).sort(), ['address', 'id', 'user_id'])
    assert.equal(wallet.address, address)
    assert.equal(wallet.user_id, owner.id)
    const listed = (await get('/user/wallets', owner.auth)).json() as { id: number }[]
    assert.ok(listed.some((entry) => entry.id === wallet.id))
    const strangers = (await get('/user/wallets', stranger.auth)).json() as { id: number }[]
    assert.ok(!strangers.some((entry) => entry.id === wallet.id), "it is not listed among someone else's wallets")
  })

  it('picks a random address when none is given, with or without a body', async () => {
    const withEmptyObject = await createWallet(owner, {})
    assert.equal(withEmptyObject.statusCode, 201, withEmptyObject.body)
    assert.match(withEmptyObject.json().address, /^[a-z]{3,24}$/)
    const bodiless = await createWallet(owner)
    assert.equal(bodiless.statusCode, 201, bodiless.body)
    assert.match(bodiless.json().address, /^[a-z]{3,24}$/)
    assert.notEqual(withEmptyObject.json().address, bodiless.json().address)
  })

  it('refuses an address already in use, by anyone, with 409 W011', async () => {
    expectError(await createWallet(owner, { address: stranger.address }), 409, 'W011')
    expectError(await createWallet(owner, { address: owner.address }), 409, 'W011')
    expectError(await createWallet(owner, { address: 'mint' }), 409, 'W011')
  })

  const badAddresses: [string, unknown][] = [
    ['capitals', 'MyWallet'],
    ['digits', 'wallet1'],
    ['2 characters', 'ab'],
    ['25 characters', 'a'.repeat(25)],
    ['a space', 'my wallet'],
    ['an empty string', ''],
    ['a number', 123],
  ]
  for (const [why, address] of badAddresses) {
    it(`refuses an address with ${why} with 400 G000`, async () => {
      const before = (await get('/user/wallets', owner.auth)).json().length
      expectError(await createWallet(owner, { address }), 400, 'G000')
      assert.equal((await get('/user/wallets', owner.auth)).json().length, before)
    })
  }

  it('accepts addresses of 3 and 24 letters', async () => {
    // Random addresses have 12 letters, so these cannot be taken already.
    assert.equal((await createWallet(owner, { address: 'x'.repeat(24) })).statusCode, 201)
    assert.equal((await createWallet(owner, { address: 'xyz' })).statusCode, 201)
  })

  it('lists no assigned wallets for a fresh user', async () => {
    const response = await get('/user/assigned_wallets', stranger.auth)
    assert.equal(response.statusCode, 200)
    assert.deepEqual(response.json(), [])
  })

  describe('PUT /user/wallet (primary wallet)', () => {
    it('makes another owned wallet primary', async () => {
      const user = await createUser(t.app, uniqueName('Prim'))
      const wallet = (await createWallet(user, {})).json()
      const response = await t.app.inject({ method: 'PUT', url: '/user/wallet', headers: user.auth, payload: { wallet_id: wallet.id } })
      assert.equal(response.statusCode, 200, response.body)
      assert.equal(response.json().primary_wallet_id, wallet.id)
      assert.equal((await get('/user/session', user.auth)).json().primary_wallet_id, wallet.id)
      // New sessions start on the new primary wallet.
      assert.equal((await newSession(user).then((session) => get('/user/session', session.auth))).json().wallet_id, wallet.id)
    })

    it("refuses someone else's, an unknown and the mint wallet with 404 W000", async () => {
      for (const walletId of [stranger.walletId, 987654321, 1]) {
        expectError(
          await t.app.inject({ method: 'PUT', url: '/user/wallet', headers: owner.auth, payload: { wallet_id: walletId } }),
          404,
          'W000',
        )
      }
      assert.equal((await get('/user/session', owner.auth)).json().primary_wallet_id, owner.walletId)
    })

    it('refuses a wallet id that is not a positive integer with 400 G000', async () => {
      for (const walletId of ['2', 1.5, 0, -3, null]) {
        expectError(
          await t.app.inject({ method: 'PUT', url: '/user/wallet', headers: owner.auth, payload: { wallet_id: walletId } }),
          400,
          'G000',
        )
      }
    })
  })

  describe('PUT /user/session/wallet (active wallet)', () => {
    it('switches the active wallet of this session only', async () => {
      const user = await createUser(t.app, uniqueName('Act'))
      const other = await newSession(user)
      const wallet = (await createWallet(user, {})).json()
      const response = await t.app.inject({
        method: 'PUT',
        url: '/user/session/wallet',
        headers: user.auth,
        payload: { wallet_id: wallet.id },
      })
      assert.equal(response.statusCode, 200, response.body)
      assert.equal(response.json().wallet_id, wallet.id)
      assert.equal(response.json().wallet_address, wallet.address)
      assert.equal(response.json().primary_wallet_id, user.walletId, 'the primary wallet does not change')
      assert.equal((await get('/user/session', user.auth)).json().wallet_id, wallet.id)
      assert.equal((await get('/user/session', other.auth)).json().wallet_id, user.walletId)
    })

    it("refuses someone else's, an unknown and the mint wallet with 404 W000", async () => {
      for (const walletId of [stranger.walletId, 987654321, 1]) {
        expectError(
          await t.app.inject({ method: 'PUT', url: '/user/session/wallet', headers: owner.auth, payload: { wallet_id: walletId } }),
          404,
          'W000',
        )
      }
      assert.equal((await get('/user/session', owner.auth)).json().wallet_id, owner.walletId)
    })

    it('allows a wallet the user is assigned to, which cannot become primary', async () => {
      const helper = await createUser(t.app, uniqueName('Helper'))
      // Assignment itself is another route's business; set it up directly.
      await t.database.db
        .insertInto('wallet_users')
        .values({ wallet_id: owner.walletId, user_id: helper.id, created_at: new Date().toISOString() })
        .execute()
      const assigned = await get('/user/assigned_wallets', helper.auth)
      assert.deepEqual(assigned.json(), [{ id: owner.walletId, address: owner.address, user_id: owner.id }])
      const active = await t.app.inject({
        method: 'PUT',
        url: '/user/session/wallet',
        headers: helper.auth,
        payload: { wallet_id: owner.walletId },
      })
      assert.equal(active.statusCode, 200, active.body)
      assert.equal(active.json().wallet_user_id, owner.id)
      expectError(
        await t.app.inject({ method: 'PUT', url: '/user/wallet', headers: helper.auth, payload: { wallet_id: owner.walletId } }),
        404,
        'W000',
      )
    })
  })
})

describe('user routes need a user session', () => {
  const routes: [string, string, object?][] = [
    ['PUT', '/user/username', { username: 'whoever' }],
    ['PUT', '/user/password', { password: 'whatever1' }],
    ['PUT', '/user/wallet', { wallet_id: 2 }],
    ['GET', '/user/wallets'],
    ['GET', '/user/assigned_wallets'],
    ['POST', '/user/wallets', {}],
    ['PUT', '/user/session/wallet', { wallet_id: 2 }],
    ['GET', '/user/session'],
    ['GET', '/user/sessions'],
    ['DELETE', '/user/session'],
    ['DELETE', '/user/sessions/1'],
    ['DELETE', '/user/sessions'],
  ]
  for (const [method, url, payload] of routes) {
    it(`${method} ${url} answers 401 A000 without credentials and A001 with the admin key`, async () => {
      expectError(await t.app.inject({ method: method as 'GET', url, payload }), 401, 'A000')
      expectError(await t.app.inject({ method: method as 'GET', url, payload, headers: t.admin }), 401, 'A001')
    })
  }
})

describe('rate limits on login and registration', () => {
  let limited: TestApp
  before(async () => {
    limited = await buildTestApp({ AUTH_RATE_LIMIT: '3' })
  })
  after(async () => {
    await limited.close()
  })

  const attempt = (username: string, remoteAddress: string) =>
    limited.app.inject({ method: 'POST', url: `/users/${username}/sessions`, payload: { password: 'wrong password' }, remoteAddress })

  // Each test's attempts in one window: on PostgreSQL windows turn with the clock's minute.
  beforeEach(() => awayFromTheMinute(5_000))

  it('answers the attempt over the limit from one address with 429 G005 and Retry-After', async () => {
    for (let i = 0; i < 3; i++) expectError(await attempt(`nobody${i}`, '10.0.0.1'), 401, 'U001')
    const refused = await attempt('nobodyelse', '10.0.0.1')
    expectError(refused, 429, 'G005')
    const retryAfter = Number(refused.headers['retry-after'])
    assert.ok(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 60, `Retry-After: ${refused.headers['retry-after']}`)
    // Another address is not affected.
    expectError(await attempt('nobodyelse', '10.0.0.2'), 401, 'U001')
  })

  it('limits attempts on one username whatever the address', async () => {
    for (let i = 0; i < 3; i++) expectError(await attempt('Target', `10.1.0.${i + 1}`), 401, 'U001')
    expectError(await attempt('target', '10.1.0.9'), 429, 'G005')
  })

  it('limits registrations per address and creates no user past the limit', async () => {
    const address = '10.2.0.1'
    const names = ['ratea', 'rateb', 'ratec', 'rated']
    const results = []
    for (const username of names) {
      results.push(
        await limited.app.inject({
          method: 'POST',
          url: '/users',
          payload: { username, password: 'correct horse' },
          remoteAddress: address,
        }),
      )
    }
    assert.deepEqual(
      results.slice(0, 3).map((response) => response.statusCode),
      [201, 201, 201],
    )
    expectError(results[3], 429, 'G005')
    assert.ok(Number(results[3].headers['retry-after']) >= 1)
    const login = await limited.app.inject({
      method: 'POST',
      url: '/users/rated/sessions',
      payload: { password: 'correct horse' },
      remoteAddress: '10.2.0.2',
    })
    expectError(login, 401, 'U001')
  })

  it('limits registration attempts on one username whatever the address', async () => {
    const attempts = []
    for (let i = 0; i < 4; i++) {
      attempts.push(
        await limited.app.inject({
          method: 'POST',
          url: '/users',
          payload: { username: i % 2 ? 'Wanted' : 'wanted', password: 'correct horse' },
          remoteAddress: `10.3.0.${i + 1}`,
        }),
      )
    }
    assert.equal(attempts[0].statusCode, 201)
    expectError(attempts[1], 409, 'U000')
    expectError(attempts[2], 409, 'U000')
    expectError(attempts[3], 429, 'G005')
  })
})
