import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import type { Trx } from '../../src/db/database.ts'
import * as wallets from '../../src/wallets/wallets.repository.ts'
import { buildTestApp, expectError, STORAGE, whileOpen, type TestApp } from '../helpers/app.ts'
import { createAsset, createUser, createWalletKey, issue, type TestUser } from '../helpers/factories.ts'

let t: TestApp

before(async () => {
  t = await buildTestApp()
})
after(async () => {
  await t.close()
})

type Headers = Record<string, string>

function call(method: 'GET' | 'POST' | 'PUT' | 'DELETE', url: string, headers: Headers, payload?: unknown) {
  return t.app.inject({ method, url, headers, ...(payload === undefined ? {} : { payload: payload as object }) })
}

function bearer(token: string): Headers {
  return { authorization: `Bearer ${token}` }
}

let addressCounter = 0

/** A fresh lowercase address no other test uses. */
function newAddress(): string {
  addressCounter += 1
  let n = addressCounter * 7919 + (process.pid % 1000) * 104729
  let out = ''
  while (out.length < 10) {
    out += String.fromCharCode(97 + (n % 26))
    n = Math.floor(n / 26) + out.length * 3
  }
  return `w${out}`
}

/** Creates a second wallet for the user and makes it the active wallet of their session. */
async function activeSecondWallet(user: TestUser): Promise<{ id: number; address: string }> {
  const created = await call('POST', '/user/wallets', user.auth, { address: newAddress() })
  assert.equal(created.statusCode, 201, created.body)
  await activate(user.auth, created.json().id)
  return created.json()
}

async function activate(headers: Headers, walletId: number): Promise<void> {
  const response = await call('PUT', '/user/session/wallet', headers, { wallet_id: walletId })
  assert.equal(response.statusCode, 200, response.body)
}

async function activeWalletOf(headers: Headers): Promise<number> {
  const response = await call('GET', '/user/session', headers)
  assert.equal(response.statusCode, 200, response.body)
  return response.json().wallet_id
}

async function assign(owner: TestUser, user: TestUser): Promise<void> {
  const response = await call('POST', '/wallet/users', owner.auth, { username: user.username })
  assert.equal(response.statusCode, 201, response.body)
}

/** A second, independent session of the same user. */
async function logInAgain(user: TestUser): Promise<Headers> {
  const response = await call('POST', `/users/${user.username}/sessions`, {}, { password: user.password, return_token: true })
  assert.equal(response.statusCode, 201, response.body)
  return bearer(response.json().token)
}

/**
 * An owner with a second wallet active, and a user assigned to it who has made it active too.
 * The owner's primary wallet stays their own.
 */
async function sharedWallet() {
  const owner = await createUser(t.app)
  const member = await createUser(t.app)
  const wallet = await activeSecondWallet(owner)
  await assign(owner, member)
  await activate(member.auth, wallet.id)
  return { owner, member, wallet }
}

describe('POST /wallet/users', () => {
  it('assigns a user, who can then use the wallet', async () => {
    const owner = await createUser(t.app)
    const user = await createUser(t.app)
    const wallet = await activeSecondWallet(owner)
    const response = await call('POST', '/wallet/users', owner.auth, { username: user.username })
    assert.equal(response.statusCode, 201, response.body)
    assert.deepEqual(response.json(), { id: user.id, username: user.username })
    const assigned = await call('GET', '/user/assigned_wallets', user.auth)
    assert.deepEqual(assigned.json(), [{ id: wallet.id, address: wallet.address, user_id: owner.id }])
    await activate(user.auth, wallet.id)
    assert.equal(await activeWalletOf(user.auth), wallet.id)
  })

  it('finds the user case-insensitively and answers with the stored spelling', async () => {
    const owner = await createUser(t.app)
    const user = await createUser(t.app, `Mixed${process.pid}Case`)
    const response = await call('POST', '/wallet/users', owner.auth, { username: user.username.toLowerCase() })
    assert.equal(response.statusCode, 201, response.body)
    assert.equal(response.json().username, user.username)
  })

  it('refuses an assigned user who is not the owner with 400 W006', async () => {
    const { member } = await sharedWallet()
    const other = await createUser(t.app)
    expectError(await call('POST', '/wallet/users', member.auth, { username: other.username }), 400, 'W006')
  })

  it('answers 404 U003 for an unknown user', async () => {
    const owner = await createUser(t.app)
    expectError(await call('POST', '/wallet/users', owner.auth, { username: 'nobodyhere' }), 404, 'U003')
  })

  it('answers 409 W003 for a user already assigned and for the owner', async () => {
    const { owner, member } = await sharedWallet()
    expectError(await call('POST', '/wallet/users', owner.auth, { username: member.username }), 409, 'W003')
    expectError(await call('POST', '/wallet/users', owner.auth, { username: owner.username }), 409, 'W003')
  })

  it('answers 400 G000 for a malformed body', async () => {
    const owner = await createUser(t.app)
    expectError(await call('POST', '/wallet/users', owner.auth, {}), 400, 'G000')
    expectError(await call('POST', '/wallet/users', owner.auth, { username: 42 }), 400, 'G000')
    expectError(await call('POST', '/wallet/users', owner.auth, { username: 'not a name!' }), 400, 'G000')
    expectError(await call('POST', '/wallet/users', owner.auth, [owner.username]), 400, 'G000')
    const broken = await t.app.inject({
      method: 'POST',
      url: '/wallet/users',
      headers: { ...owner.auth, 'content-type': 'application/json' },
      payload: '{"username":',
    })
    expectError(broken, 400, 'G000')
  })

  it('needs a user session: none is 401 A000, a wallet key is 401 A001', async () => {
    const owner = await createUser(t.app)
    const key = await createWalletKey(t, owner.auth)
    expectError(await call('POST', '/wallet/users', {}, { username: 'someone' }), 401, 'A000')
    expectError(await call('POST', '/wallet/users', bearer(key.token), { username: owner.username }), 401, 'A001')
  })
})

describe('GET /wallet/users', () => {
  it('lists the assigned users to the owner and to each assigned user', async () => {
    const { owner, member } = await sharedWallet()
    const second = await createUser(t.app)
    await assign(owner, second)
    const expected = [
      { id: member.id, username: member.username },
      { id: second.id, username: second.username },
    ]
    for (const headers of [owner.auth, member.auth]) {
      const response = await call('GET', '/wallet/users', headers)
      assert.equal(response.statusCode, 200, response.body)
      assert.deepEqual(response.json(), expected)
    }
  })

  it('lists nobody for a wallet without assigned users', async () => {
    const owner = await createUser(t.app)
    const response = await call('GET', '/wallet/users', owner.auth)
    assert.deepEqual(response.json(), [])
  })

  it('marks every key used at once as used (their marks written together)', async () => {
    const owner = await createUser(t.app)
    const keys = await Promise.all(Array.from({ length: 12 }, (_, i) => createWalletKey(t, owner.auth, `k${i}`)))
    const answers = await Promise.all(keys.map((key) => call('GET', '/wallet/assets', bearer(key.token))))
    assert.deepEqual(
      answers.map((response) => response.statusCode),
      keys.map(() => 200),
    )
    const listed = (await call('GET', '/wallet/sessions', owner.auth)).json() as { id: number; last_used_at: string | null }[]
    for (const key of keys)
      assert.match(listed.find((row) => row.id === key.id)?.last_used_at ?? '', /Z$/, `key ${key.name} is marked as used`)
    // Revoked: refused by the very next request, the mark of its first use notwithstanding.
    assert.equal((await call('DELETE', `/wallet/sessions/${keys[0].id}`, owner.auth)).statusCode, 204)
    expectError(await call('GET', '/wallet/assets', bearer(keys[0].token)), 401, 'A001')
  })

  it('refuses a wallet key with 401 A001', async () => {
    const owner = await createUser(t.app)
    const key = await createWalletKey(t, owner.auth)
    expectError(await call('GET', '/wallet/users', bearer(key.token)), 401, 'A001')
  })
})

describe('DELETE /wallet/users/{userid}', () => {
  it('ends the access at once: their sessions move to their primary wallet and their keys are revoked', async () => {
    const { owner, member, wallet } = await sharedWallet()
    const stay = await createUser(t.app)
    await assign(owner, stay)
    await activate(stay.auth, wallet.id)
    const otherSession = await logInAgain(member)
    const memberKey = await createWalletKey(t, member.auth, 'member app')
    const stayKey = await createWalletKey(t, stay.auth, 'stay app')
    const ownerKey = await createWalletKey(t, owner.auth, 'owner app')

    const response = await call('DELETE', `/wallet/users/${member.id}`, owner.auth)
    assert.equal(response.statusCode, 204, response.body)
    assert.equal(response.body, '')

    assert.equal(await activeWalletOf(member.auth), member.walletId)
    assert.equal(await activeWalletOf(otherSession), member.walletId, 'a session on the primary wallet stays there')
    expectError(await call('GET', '/wallet/assets', bearer(memberKey.token)), 401, 'A001')
    assert.equal((await call('GET', '/wallet/assets', bearer(stayKey.token))).statusCode, 200)
    assert.equal((await call('GET', '/wallet/assets', bearer(ownerKey.token))).statusCode, 200)
    assert.equal(await activeWalletOf(stay.auth), wallet.id, 'other assigned users keep their access')

    expectError(await call('PUT', '/user/session/wallet', member.auth, { wallet_id: wallet.id }), 404, 'W000')
    assert.deepEqual((await call('GET', '/user/assigned_wallets', member.auth)).json(), [])
    assert.deepEqual((await call('GET', '/wallet/users', owner.auth)).json(), [{ id: stay.id, username: stay.username }])
    const keys = (await call('GET', '/wallet/sessions', owner.auth)).json() as { name: string }[]
    assert.deepEqual(keys.map((key) => key.name).sort(), ['owner app', 'stay app'])
  })

  it('refuses a non-owner with 400 W006', async () => {
    const { owner, member } = await sharedWallet()
    expectError(await call('DELETE', `/wallet/users/${member.id}`, member.auth), 400, 'W006')
    expectError(await call('DELETE', `/wallet/users/${owner.id}`, member.auth), 400, 'W006')
  })

  it('answers 404 U003 for a user who is not assigned', async () => {
    const owner = await createUser(t.app)
    const stranger = await createUser(t.app)
    expectError(await call('DELETE', `/wallet/users/${stranger.id}`, owner.auth), 404, 'U003')
    expectError(await call('DELETE', `/wallet/users/${owner.id}`, owner.auth), 404, 'U003')
    expectError(await call('DELETE', '/wallet/users/999999999', owner.auth), 404, 'U003')
  })

  it('answers 400 G001 for an id that is not a positive integer', async () => {
    const owner = await createUser(t.app)
    expectError(await call('DELETE', '/wallet/users/abc', owner.auth), 400, 'G001')
    expectError(await call('DELETE', '/wallet/users/-1', owner.auth), 400, 'G001')
    expectError(await call('DELETE', '/wallet/users/9999999999999999', owner.auth), 400, 'G001')
  })
})

describe('PUT /wallet/owner', () => {
  it('hands the wallet over; the previous owner becomes an assigned user', async () => {
    const { owner, member, wallet } = await sharedWallet()
    const response = await call('PUT', '/wallet/owner', owner.auth, { user_id: member.id })
    assert.equal(response.statusCode, 200, response.body)
    assert.deepEqual(response.json(), { id: wallet.id, address: wallet.address, user_id: member.id })

    assert.deepEqual((await call('GET', '/wallet/users', member.auth)).json(), [{ id: owner.id, username: owner.username }])
    const owned = (await call('GET', '/user/wallets', member.auth)).json() as { id: number }[]
    assert.ok(owned.some((item) => item.id === wallet.id))
    assert.deepEqual((await call('GET', '/user/assigned_wallets', owner.auth)).json(), [
      { id: wallet.id, address: wallet.address, user_id: member.id },
    ])
    assert.deepEqual((await call('GET', '/user/assigned_wallets', member.auth)).json(), [])
    const session = (await call('GET', '/user/session', owner.auth)).json()
    assert.equal(session.wallet_id, wallet.id, 'the previous owner keeps using the wallet')
    assert.equal(session.wallet_user_id, member.id)

    const someone = await createUser(t.app)
    expectError(await call('POST', '/wallet/users', owner.auth, { username: someone.username }), 400, 'W006')
    assert.equal((await call('POST', '/wallet/users', member.auth, { username: someone.username })).statusCode, 201)
  })

  it('refuses a non-owner with 400 W006', async () => {
    const { member, owner } = await sharedWallet()
    expectError(await call('PUT', '/wallet/owner', member.auth, { user_id: member.id }), 400, 'W006')
    expectError(await call('PUT', '/wallet/owner', member.auth, { user_id: owner.id }), 400, 'W006')
  })

  it('answers 400 W007 when the new owner is not assigned', async () => {
    const owner = await createUser(t.app)
    const stranger = await createUser(t.app)
    await activeSecondWallet(owner)
    expectError(await call('PUT', '/wallet/owner', owner.auth, { user_id: stranger.id }), 400, 'W007')
    expectError(await call('PUT', '/wallet/owner', owner.auth, { user_id: owner.id }), 400, 'W007')
    expectError(await call('PUT', '/wallet/owner', owner.auth, { user_id: 999999999 }), 400, 'W007')
  })

  it("answers 400 W012 for the caller's primary wallet", async () => {
    const owner = await createUser(t.app)
    const member = await createUser(t.app)
    await assign(owner, member)
    expectError(await call('PUT', '/wallet/owner', owner.auth, { user_id: member.id }), 400, 'W012')
    assert.equal(await activeWalletOf(owner.auth), owner.walletId)
    assert.deepEqual((await call('GET', '/wallet/users', owner.auth)).json(), [{ id: member.id, username: member.username }])
  })

  it('answers 400 G000 for a malformed body', async () => {
    const owner = await createUser(t.app)
    await activeSecondWallet(owner)
    expectError(await call('PUT', '/wallet/owner', owner.auth, {}), 400, 'G000')
    expectError(await call('PUT', '/wallet/owner', owner.auth, { user_id: '2' }), 400, 'G000')
    expectError(await call('PUT', '/wallet/owner', owner.auth, { user_id: 0 }), 400, 'G000')
    expectError(await call('PUT', '/wallet/owner', owner.auth, { user_id: 1.5 }), 400, 'G000')
  })
})

describe('POST /wallet/sessions', () => {
  it('issues a key shown once, for the owner and for assigned users', async () => {
    const { owner, member, wallet } = await sharedWallet()
    const named = await call('POST', '/wallet/sessions', owner.auth, { name: 'bookkeeping' })
    assert.equal(named.statusCode, 201, named.body)
    const key = named.json()
    assert.deepEqual(Object.keys(key).sort(), ['id', 'limits', 'name', 'scopes', 'token', 'used', 'wallet_id'])
    assert.deepEqual([key.scopes, key.limits, key.used], [['read', 'send', 'hold'], {}, {}])
    assert.equal(key.wallet_id, wallet.id)
    assert.equal(key.name, 'bookkeeping')
    assert.match(key.token, /^cfw_[0-9A-Za-z]{36}$/)

    const unnamed = await createWalletKey(t, member.auth)
    assert.equal(unnamed.name, '')
    assert.equal(unnamed.wallet_id, wallet.id)
    assert.notEqual(unnamed.token, key.token)
  })

  it('accepts an empty object and a name of 32 characters', async () => {
    const owner = await createUser(t.app)
    const empty = await call('POST', '/wallet/sessions', owner.auth, {})
    assert.equal(empty.statusCode, 201, empty.body)
    assert.equal(empty.json().name, '')
    assert.equal((await createWalletKey(t, owner.auth, 'x'.repeat(32))).name, 'x'.repeat(32))
  })

  it('answers 400 G000 for a name that is too long or not a string', async () => {
    const owner = await createUser(t.app)
    expectError(await call('POST', '/wallet/sessions', owner.auth, { name: 'x'.repeat(33) }), 400, 'G000')
    expectError(await call('POST', '/wallet/sessions', owner.auth, { name: 7 }), 400, 'G000')
    expectError(await call('POST', '/wallet/sessions', owner.auth, 'name'), 400, 'G000')
  })

  it('refuses a wallet key with 401 A001', async () => {
    const owner = await createUser(t.app)
    const key = await createWalletKey(t, owner.auth)
    expectError(await call('POST', '/wallet/sessions', bearer(key.token), {}), 401, 'A001')
  })

  it("gives the key its own wallet, whatever the user's active wallet", async () => {
    const owner = await createUser(t.app)
    const friend = await createUser(t.app)
    const asset = await createAsset(t)
    const wallet = await activeSecondWallet(owner)
    await issue(t, wallet.id, asset.id, 10)
    const key = await createWalletKey(t, owner.auth, 'shop')
    await activate(owner.auth, owner.walletId)

    const holdings = await call('GET', '/wallet/assets', bearer(key.token))
    assert.equal(holdings.statusCode, 200, holdings.body)
    assert.deepEqual(holdings.json(), [
      { asset: { id: asset.id, name: asset.name, value: 1 }, quantity: 10, held: 0, credit_limit: 0, expiring: [] },
    ])
    const sent = await call('POST', '/wallet/transactions', bearer(key.token), { recipient: friend.username, assets: { [asset.name]: 4 } })
    assert.equal(sent.statusCode, 201, sent.body)
    assert.equal(sent.json().sending_wallet_id, wallet.id)
    assert.equal((await call('GET', '/wallet/assets', bearer(key.token))).json()[0].quantity, 6)
    assert.deepEqual((await call('GET', '/wallet/assets', owner.auth)).json(), [], "the user's active wallet is untouched")
  })
})

describe('GET /wallet/sessions', () => {
  it('lists every key of the active wallet without its token', async () => {
    const { owner, member, wallet } = await sharedWallet()
    const first = await createWalletKey(t, owner.auth, 'one')
    const second = await createWalletKey(t, member.auth, 'two')
    await createWalletKey(t, await otherWalletHeaders(owner), 'elsewhere')

    const response = await call('GET', '/wallet/sessions', member.auth)
    assert.equal(response.statusCode, 200, response.body)
    const keys = response.json() as Record<string, unknown>[]
    assert.deepEqual(
      keys.map((key) => [key.id, key.wallet_id, key.name, key.last_used_at]),
      [
        [first.id, wallet.id, 'one', null],
        [second.id, wallet.id, 'two', null],
      ],
    )
    for (const key of keys) {
      assert.deepEqual(Object.keys(key).sort(), ['created_at', 'id', 'last_used_at', 'limits', 'name', 'scopes', 'used', 'wallet_id'])
      assert.match(key.created_at as string, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
    }

    assert.equal((await call('GET', '/wallet/assets', bearer(first.token))).statusCode, 200)
    const used = (await call('GET', '/wallet/sessions', owner.auth)).json() as { id: number; last_used_at: string | null }[]
    assert.match(used.find((key) => key.id === first.id)?.last_used_at ?? '', /Z$/)
  })

  it('refuses a wallet key with 401 A001', async () => {
    const owner = await createUser(t.app)
    const key = await createWalletKey(t, owner.auth)
    expectError(await call('GET', '/wallet/sessions', bearer(key.token)), 401, 'A001')
  })
})

/** A second session of the user with a freshly created wallet active. */
async function otherWalletHeaders(user: TestUser): Promise<Headers> {
  const headers = await logInAgain(user)
  const created = await call('POST', '/user/wallets', headers, { address: newAddress() })
  await activate(headers, created.json().id)
  return headers
}

describe('DELETE /wallet/sessions/{sessionid}', () => {
  it('revokes the key: it is no longer listed and answers 401 A001', async () => {
    const owner = await createUser(t.app)
    const key = await createWalletKey(t, owner.auth)
    const keep = await createWalletKey(t, owner.auth)
    const response = await call('DELETE', `/wallet/sessions/${key.id}`, owner.auth)
    assert.equal(response.statusCode, 204, response.body)
    expectError(await call('GET', '/wallet/assets', bearer(key.token)), 401, 'A001')
    expectError(
      await call('POST', '/wallet/transactions', bearer(key.token), { recipient: owner.username, assets: { gold: 1 } }),
      401,
      'A001',
    )
    assert.deepEqual(
      ((await call('GET', '/wallet/sessions', owner.auth)).json() as { id: number }[]).map((item) => item.id),
      [keep.id],
    )
    expectError(await call('DELETE', `/wallet/sessions/${key.id}`, owner.auth), 404, 'W005')
  })

  it("answers 404 W005 for another wallet's key, which keeps working", async () => {
    const owner = await createUser(t.app)
    const stranger = await createUser(t.app)
    const theirs = await createWalletKey(t, stranger.auth)
    const elsewhere = await otherWalletHeaders(owner)
    const ownOtherWallet = await createWalletKey(t, elsewhere)

    expectError(await call('DELETE', `/wallet/sessions/${theirs.id}`, owner.auth), 404, 'W005')
    expectError(await call('DELETE', `/wallet/sessions/${ownOtherWallet.id}`, owner.auth), 404, 'W005')
    expectError(await call('DELETE', '/wallet/sessions/999999999', owner.auth), 404, 'W005')
    assert.equal((await call('GET', '/wallet/assets', bearer(theirs.token))).statusCode, 200)
    assert.equal((await call('GET', '/wallet/assets', bearer(ownOtherWallet.token))).statusCode, 200)
  })

  it("lets an assigned user revoke any key of the wallet, the owner's included", async () => {
    const { owner, member } = await sharedWallet()
    const ownerKey = await createWalletKey(t, owner.auth)
    assert.equal((await call('DELETE', `/wallet/sessions/${ownerKey.id}`, member.auth)).statusCode, 204)
    expectError(await call('GET', '/wallet/assets', bearer(ownerKey.token)), 401, 'A001')
  })

  it('answers 400 G001 for an id that is not a positive integer', async () => {
    const owner = await createUser(t.app)
    expectError(await call('DELETE', '/wallet/sessions/abc', owner.auth), 400, 'G001')
    expectError(await call('DELETE', '/wallet/sessions/0', owner.auth), 400, 'G001')
  })

  it('refuses a wallet key with 401 A001, even for itself', async () => {
    const owner = await createUser(t.app)
    const key = await createWalletKey(t, owner.auth)
    expectError(await call('DELETE', `/wallet/sessions/${key.id}`, bearer(key.token)), 401, 'A001')
    assert.equal((await call('GET', '/wallet/assets', bearer(key.token))).statusCode, 200)
  })
})

describe('DELETE /wallet/sessions', () => {
  it('revokes every key of the active wallet and no other', async () => {
    const { owner, member } = await sharedWallet()
    const keys = [await createWalletKey(t, owner.auth), await createWalletKey(t, member.auth)]
    const primaryKey = await createWalletKey(t, await logInAgain(owner))
    const strangerKey = await createWalletKey(t, (await createUser(t.app)).auth)

    const response = await call('DELETE', '/wallet/sessions', member.auth)
    assert.equal(response.statusCode, 204, response.body)
    for (const key of keys) expectError(await call('GET', '/wallet/assets', bearer(key.token)), 401, 'A001')
    assert.deepEqual((await call('GET', '/wallet/sessions', owner.auth)).json(), [])
    assert.equal((await call('GET', '/wallet/assets', bearer(primaryKey.token))).statusCode, 200)
    assert.equal((await call('GET', '/wallet/assets', bearer(strangerKey.token))).statusCode, 200)
  })

  it('accepts a wallet without keys', async () => {
    const owner = await createUser(t.app)
    assert.equal((await call('DELETE', '/wallet/sessions', owner.auth)).statusCode, 204)
  })

  it('refuses a wallet key with 401 A001', async () => {
    const owner = await createUser(t.app)
    const key = await createWalletKey(t, owner.auth)
    expectError(await call('DELETE', '/wallet/sessions', bearer(key.token)), 401, 'A001')
    assert.equal((await call('GET', '/wallet/assets', bearer(key.token))).statusCode, 200)
  })
})

describe('DELETE /wallet', () => {
  it('sweeps the holdings into the primary wallet as one transaction and retires the wallet', async () => {
    const { owner, member, wallet } = await sharedWallet()
    const gold = await createAsset(t)
    const silver = await createAsset(t)
    await issue(t, wallet.id, gold.id, 7)
    await issue(t, wallet.id, silver.id, 3)
    await issue(t, owner.walletId, gold.id, 1)
    const ownerKey = await createWalletKey(t, owner.auth)
    const memberKey = await createWalletKey(t, member.auth)
    const ownerOnPrimary = await logInAgain(owner)
    const hook = { wallet_id: wallet.id, url: 'http://127.0.0.1:9/hook', secret: 'whsec_test', created_at: new Date().toISOString() }
    await t.database.db.insertInto('webhooks').values(hook).execute()
    // An incoming transfer while the webhook is set queues a delivery for it.
    const sender = await createUser(t.app)
    await issue(t, sender.walletId, gold.id, 2)
    const incoming = await call('POST', '/wallet/transactions', sender.auth, {
      recipient: wallet.address,
      type: 1,
      assets: { [gold.name]: 2 },
    })
    assert.equal(incoming.statusCode, 201, incoming.body)

    const response = await call('DELETE', '/wallet', owner.auth)
    assert.equal(response.statusCode, 204, response.body)
    assert.equal(response.body, '')

    // The funds arrived in the primary wallet, as one transaction.
    assert.equal(await activeWalletOf(owner.auth), owner.walletId)
    const holdings = (await call('GET', '/wallet/assets', owner.auth)).json() as { asset: { id: number }; quantity: number }[]
    assert.deepEqual(
      holdings.map((holding) => [holding.asset.id, holding.quantity]),
      [
        [gold.id, 10],
        [silver.id, 3],
      ],
    )
    const history = (await call('GET', '/wallet/transactions', owner.auth)).json()
    const sweep = history[0]
    assert.equal(sweep.memo, 'wallet deleted')
    assert.equal(sweep.sending_wallet_id, wallet.id)
    assert.equal(sweep.sending_wallet_address, wallet.address)
    assert.equal(sweep.receiving_wallet_id, owner.walletId)
    assert.deepEqual(
      (sweep.assets as { asset: { id: number }; quantity: number }[]).map((line) => [line.asset.id, line.quantity]),
      [
        [gold.id, 9],
        [silver.id, 3],
      ],
    )
    assert.equal(history.filter((entry: { memo: string }) => entry.memo === 'wallet deleted').length, 1)

    // Keys, assignments and sessions are gone from it.
    expectError(await call('GET', '/wallet/assets', bearer(ownerKey.token)), 401, 'A001')
    expectError(await call('GET', '/wallet/assets', bearer(memberKey.token)), 401, 'A001')
    assert.equal(await activeWalletOf(member.auth), member.walletId)
    assert.equal(await activeWalletOf(ownerOnPrimary), owner.walletId)
    assert.deepEqual((await call('GET', '/user/assigned_wallets', member.auth)).json(), [])
    const owned = (await call('GET', '/user/wallets', owner.auth)).json() as { id: number }[]
    assert.deepEqual(
      owned.map((item) => item.id),
      [owner.walletId],
    )
    expectError(await call('PUT', '/user/session/wallet', owner.auth, { wallet_id: wallet.id }), 404, 'W000')
    expectError(await call('PUT', '/user/session/wallet', member.auth, { wallet_id: wallet.id }), 404, 'W000')

    // The webhook is removed and nothing more is delivered to it.
    assert.equal(
      await t.database.db.selectFrom('webhooks').select('wallet_id').where('wallet_id', '=', wallet.id).executeTakeFirst(),
      undefined,
    )
    const deliveries = await t.database.db.selectFrom('webhook_deliveries').select('status').where('wallet_id', '=', wallet.id).execute()
    assert.ok(deliveries.length > 0)
    assert.ok(deliveries.every((delivery) => delivery.status !== 'pending'))

    // The address stays reserved and unreachable.
    expectError(await call('POST', '/user/wallets', owner.auth, { address: wallet.address }), 409, 'W011')
    expectError(
      await call('POST', '/wallet/transactions', owner.auth, { recipient: wallet.address, type: 1, assets: { [gold.name]: 1 } }),
      404,
      'W000',
    )
    expectError(
      await call('POST', '/wallet/transactions', owner.auth, { recipient: wallet.id, type: 2, assets: { [gold.name]: 1 } }),
      404,
      'W000',
    )
    expectError(await call('POST', `/wallets/${wallet.id}/assets`, t.admin, { id: gold.id, quantity: 1 }), 404, 'W002')
  })

  it('records no transaction for an empty wallet', async () => {
    const owner = await createUser(t.app)
    const wallet = await activeSecondWallet(owner)
    assert.equal((await call('DELETE', '/wallet', owner.auth)).statusCode, 204)
    assert.deepEqual((await call('GET', '/wallet/transactions', owner.auth)).json(), [])
    const row = await t.database.db
      .selectFrom('wallets')
      .select(['address', 'deleted_at'])
      .where('id', '=', wallet.id)
      .executeTakeFirstOrThrow()
    assert.equal(row.address, wallet.address)
    assert.match(row.deleted_at ?? '', /Z$/)
  })

  it('refuses an assigned user with 400 W006 and leaves the wallet as it was', async () => {
    const { member, wallet } = await sharedWallet()
    expectError(await call('DELETE', '/wallet', member.auth), 400, 'W006')
    assert.equal(await activeWalletOf(member.auth), wallet.id)
  })

  it('refuses the primary wallet with 400 W008', async () => {
    const owner = await createUser(t.app)
    const asset = await createAsset(t)
    await issue(t, owner.walletId, asset.id, 5)
    expectError(await call('DELETE', '/wallet', owner.auth), 400, 'W008')
    assert.equal((await call('GET', '/wallet/assets', owner.auth)).json()[0].quantity, 5)
  })

  it('refuses a wallet key with 401 A001', async () => {
    const owner = await createUser(t.app)
    await activeSecondWallet(owner)
    const key = await createWalletKey(t, owner.auth)
    expectError(await call('DELETE', '/wallet', bearer(key.token)), 401, 'A001')
    assert.equal((await call('GET', '/wallet/assets', bearer(key.token))).statusCode, 200)
  })

  it('strands nothing in the wallet when transfers race its deletion', async () => {
    const owner = await createUser(t.app)
    const sender = await createUser(t.app)
    const asset = await createAsset(t)
    const wallet = await activeSecondWallet(owner)
    await issue(t, wallet.id, asset.id, 50)
    await issue(t, sender.walletId, asset.id, 100)
    const key = await createWalletKey(t, owner.auth)

    const transfer = (headers: Headers, recipient: string) =>
      call('POST', '/wallet/transactions', headers, { recipient, type: 1, assets: { [asset.name]: 1 } })
    const requests = [
      ...Array.from({ length: 10 }, () => transfer(sender.auth, wallet.address)),
      call('DELETE', '/wallet', owner.auth),
      ...Array.from({ length: 10 }, () => transfer(sender.auth, wallet.address)),
      ...Array.from({ length: 5 }, () => transfer(bearer(key.token), sender.address)),
    ]
    const responses = await Promise.all(requests)
    assert.equal(responses[10].statusCode, 204, responses[10].body)
    let arrived = 0
    let left = 0
    for (const [index, response] of responses.entries()) {
      if (index === 10) continue
      if (response.statusCode === 201) {
        if (index < 21) arrived += 1
        else left += 1
      } else if (response.statusCode === 401) expectError(response, 401, 'A001')
      else expectError(response, 404, 'W000')
    }
    const stranded = await t.database.db
      .selectFrom('holdings')
      .select('quantity')
      .where('wallet_id', '=', wallet.id)
      .where('quantity', '<>', 0)
      .execute()
    assert.deepEqual(stranded, [])
    const primary = (await call('GET', '/wallet/assets', owner.auth)).json()
    assert.equal(primary[0].quantity, 50 + arrived - left)
  })
})

/**
 * A request that checks the caller's access and then writes must not slip past a change of that
 * access committing meanwhile (PostgreSQL runs them side by side; SQLite one after the other).
 * Each test holds a removal or an ownership transfer open, its changes made but not committed, as
 * the service's own transaction would be while the request arrives; the request must wait for it
 * and then answer by what it committed.
 */
describe('access changes racing with requests', () => {
  /** Runs `change` holding the wallet as the owner's operations do, and `request` while it is open. */
  function whileHeld<T>(walletId: number, change: (trx: Trx) => Promise<void>, request: () => Promise<T>): Promise<T> {
    return whileOpen(
      t.database.db,
      async (trx) => {
        assert.ok(await wallets.lockWallet(trx, walletId))
        await change(trx)
      },
      request,
    )
  }

  /** What DELETE /wallet/users/{userid} changes (wallets.service.ts removeUser). */
  const removal = (walletId: number, userId: number) => async (trx: Trx) => {
    assert.ok(await wallets.deleteWalletUser(trx, walletId, userId))
    await wallets.deleteWalletSessions(trx, walletId, userId)
    await wallets.moveSessionsToPrimary(trx, walletId, userId)
  }

  /**
   * How a request of the member racing their removal ends. PostgreSQL authenticated it on the
   * wallet before the removal committed: it waits for the removal and is refused. SQLite ran all
   * of it after the removal, with the session already back on the member's primary wallet: it
   * succeeds there (`status`), which `onPrimary` checks.
   */
  async function refusedOrOnPrimary(
    response: Awaited<ReturnType<typeof call>>,
    status: number,
    onPrimary: () => Promise<void>,
  ): Promise<void> {
    if (STORAGE === 'postgres') return expectError(response, 404, 'W000')
    assert.equal(response.statusCode, status, response.body)
    await onPrimary()
  }

  it('a key asked for while the user is being removed is refused, not left working', async () => {
    const { owner, member, wallet } = await sharedWallet()
    const response = await whileHeld(wallet.id, removal(wallet.id, member.id), () =>
      call('POST', '/wallet/sessions', member.auth, { name: 'late' }),
    )
    await refusedOrOnPrimary(response, 201, async () => assert.equal(response.json().wallet_id, member.walletId))
    const keys = (await call('GET', '/wallet/sessions', owner.auth)).json() as { name: string }[]
    assert.deepEqual(keys, [])
  })

  it('a webhook set while the user is being removed is refused, not left on the wallet', async () => {
    const { owner, member, wallet } = await sharedWallet()
    const response = await whileHeld(wallet.id, removal(wallet.id, member.id), () =>
      call('PUT', '/wallet/webhook', member.auth, { webhook: 'https://example.com/late' }),
    )
    await refusedOrOnPrimary(response, 200, async () =>
      assert.equal((await call('GET', '/wallet/webhook', member.auth)).json().webhook, 'https://example.com/late'),
    )
    assert.deepEqual((await call('GET', '/wallet/webhook', owner.auth)).json(), { webhook: null })
  })

  it('a wallet made active while the user is being removed is refused, and the session stays off it', async () => {
    const { owner, wallet } = await sharedWallet()
    const late = await createUser(t.app)
    await assign(owner, late)
    const response = await whileHeld(wallet.id, removal(wallet.id, late.id), () =>
      call('PUT', '/user/session/wallet', late.auth, { wallet_id: wallet.id }),
    )
    expectError(response, 404, 'W000')
    assert.equal(await activeWalletOf(late.auth), late.walletId)
  })

  it("a wallet made primary while it is being handed over is refused: a primary wallet is always its user's own", async () => {
    const { owner, member, wallet } = await sharedWallet()
    // What PUT /wallet/owner changes (wallets.service.ts transferOwnership).
    const handover = async (trx: Trx) => {
      assert.ok(await wallets.deleteWalletUser(trx, wallet.id, member.id))
      await wallets.setWalletOwner(trx, wallet.id, member.id)
      await wallets.insertWalletUser(trx, wallet.id, owner.id)
    }
    const response = await whileHeld(wallet.id, handover, () => call('PUT', '/user/wallet', owner.auth, { wallet_id: wallet.id }))
    expectError(response, 404, 'W000')
    assert.equal((await call('GET', '/user/session', owner.auth)).json().primary_wallet_id, owner.walletId)
    // The new owner can make it theirs.
    assert.equal((await call('PUT', '/user/wallet', member.auth, { wallet_id: wallet.id })).statusCode, 200)
  })
})
