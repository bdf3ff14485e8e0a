import assert from 'node:assert/strict'
import type { FastifyInstance } from 'fastify'

/**
 * A small ledger with every kind of credential and record an operator would carry from one store
 * to another: two users with live sessions, a wallet key, a webhook, an asset, issuance, transfers
 * with events and deliveries. Used by the backup tests and by scripts/make-backup-fixture.ts.
 */
export interface LedgerWorld {
  alice: { username: string; password: string; token: string; walletId: number }
  bob: { username: string; password: string; token: string; walletId: number }
  /** A wallet key of alice's wallet. */
  walletKey: string
  assetName: string
  transfers: number
}

export async function buildLedgerWorld(
  app: FastifyInstance,
  admin: Record<string, string>,
  options: { prefix?: string; webhookUrl?: string; transfers?: number } = {},
): Promise<LedgerWorld> {
  const prefix = options.prefix ?? 'w'
  const user = async (name: string) => {
    const username = `${prefix}${name}`
    const password = `${name} password`
    const registered = await app.inject({ method: 'POST', url: '/users', payload: { username, password } })
    assert.equal(registered.statusCode, 201, registered.body)
    const login = await app.inject({ method: 'POST', url: `/users/${username}/sessions`, payload: { password, return_token: true } })
    assert.equal(login.statusCode, 201, login.body)
    return { username, password, token: login.json().token as string, walletId: registered.json().primary_wallet_id as number }
  }
  const alice = await user('alice')
  const bob = await user('bob')
  const assetName = `${prefix}gold`
  const asset = await app.inject({ method: 'POST', url: '/assets', headers: admin, payload: { name: assetName, value: 2.5 } })
  assert.equal(asset.statusCode, 201, asset.body)
  const issued = await app.inject({
    method: 'POST',
    url: `/wallets/${alice.walletId}/assets`,
    headers: admin,
    payload: { id: asset.json().id, quantity: 1000 },
  })
  assert.equal(issued.statusCode, 201, issued.body)
  const key = await app.inject({
    method: 'POST',
    url: '/wallet/sessions',
    headers: { authorization: `Bearer ${alice.token}` },
    payload: { name: 'bot' },
  })
  assert.equal(key.statusCode, 201, key.body)
  const hook = await app.inject({
    method: 'PUT',
    url: '/wallet/webhook',
    headers: { authorization: `Bearer ${bob.token}` },
    payload: { webhook: options.webhookUrl ?? 'http://127.0.0.1:9/hooks' },
  })
  assert.equal(hook.statusCode, 200, hook.body)
  const transfers = options.transfers ?? 5
  for (let i = 0; i < transfers; i++) {
    const sent = await app.inject({
      method: 'POST',
      url: '/wallet/transactions',
      headers: { authorization: `Bearer ${key.json().token}` },
      payload: { recipient: bob.username, assets: { [assetName]: i + 1 }, memo: `payment ${i}` },
    })
    assert.equal(sent.statusCode, 201, sent.body)
  }
  return { alice, bob, walletKey: key.json().token, assetName, transfers }
}

/**
 * Checks, through the API of an app on a restored store, that everything of the world still
 * works: both sessions, the wallet key, both passwords, the admin key, balances and history.
 */
export async function checkLedgerWorld(
  app: FastifyInstance,
  admin: Record<string, string>,
  world: LedgerWorld,
  options: { sessionsLive?: boolean } = {},
): Promise<void> {
  const bearer = (token: string) => ({ authorization: `Bearer ${token}` })
  // A fixture's sessions expire with time (their `expires_at`, SESSION_IDLE_DAYS); the caller then checks their rows instead.
  if (options.sessionsLive !== false) {
    const session = await app.inject({ method: 'GET', url: '/user/session', headers: bearer(world.alice.token) })
    assert.equal(session.statusCode, 200, `alice's session: ${session.body}`)
    assert.equal(
      (await app.inject({ method: 'GET', url: '/user/session', headers: bearer(world.bob.token) })).statusCode,
      200,
      "bob's session",
    )
  }
  const sent = (world.transfers * (world.transfers + 1)) / 2
  const held = await app.inject({ method: 'GET', url: '/wallet/assets', headers: bearer(world.walletKey) })
  assert.equal(held.statusCode, 200, `the wallet key: ${held.body}`)
  assert.equal(held.json()[0].quantity, 1000 - sent)
  const history = await app.inject({ method: 'GET', url: '/wallet/transactions', headers: bearer(world.bob.token) })
  assert.equal(history.statusCode, 200)
  assert.equal(history.json().length, world.transfers)
  for (const person of [world.alice, world.bob]) {
    const login = await app.inject({
      method: 'POST',
      url: `/users/${person.username}/sessions`,
      payload: { password: person.password, return_token: true },
    })
    assert.equal(login.statusCode, 201, `${person.username}'s password: ${login.body}`)
  }
  const assets = await app.inject({ method: 'GET', url: '/assets', headers: admin })
  assert.equal(assets.statusCode, 200, `the admin key: ${assets.body}`)
  assert.ok(assets.json().some((asset: { name: string }) => asset.name === world.assetName))
  const hook = await app.inject({ method: 'GET', url: '/wallet/webhook', headers: bearer(world.bob.token) })
  assert.equal(hook.statusCode, 200)
  assert.notEqual(hook.json().webhook, null)
  // New rows get ids past the restored ones (PostgreSQL sequences moved): a new user and a transfer.
  const newcomer = await app.inject({
    method: 'POST',
    url: '/users',
    payload: { username: `${world.alice.username}new`, password: 'a new password' },
  })
  assert.equal(newcomer.statusCode, 201, newcomer.body)
  const more = await app.inject({
    method: 'POST',
    url: '/wallet/transactions',
    headers: bearer(world.walletKey),
    payload: { recipient: world.bob.username, assets: { [world.assetName]: 1 } },
  })
  assert.equal(more.statusCode, 201, more.body)
}
