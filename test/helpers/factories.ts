import assert from 'node:assert/strict'
import type { FastifyInstance } from 'fastify'
import type { Asset, Transaction } from '../../src/ledger/ledger.types.ts'
import type { Monitor } from '../../src/monitors/monitors.service.ts'
import type { Schedule } from '../../src/schedules/schedules.service.ts'

/**
 * Shared factories: the one place a test makes a user, an asset, a funded wallet, a wallet key, a
 * webhook or a transfer, through the HTTP API as a client would. Each asserts its own success, so
 * a test reads as what it sets up and what it checks.
 */

/** What the factories need of a test app: the app and the admin's headers. */
export interface Api {
  app: FastifyInstance
  admin: Record<string, string>
}

export interface TestUser {
  id: number
  username: string
  password: string
  walletId: number
  address: string
  token: string
  /** Bearer headers for this user's session. */
  auth: Record<string, string>
}

let counter = 0

/** A name no other factory call in this process gives: `${prefix}${pid}x${n}`. */
export function uniqueName(prefix: string): string {
  counter += 1
  return `${prefix}${process.pid}x${counter}`
}

/** Registers a user and logs in with a returned token. */
export async function createUser(app: FastifyInstance, name?: string): Promise<TestUser> {
  const username = name ?? uniqueName('user')
  const password = 'correct horse'
  const registered = await app.inject({ method: 'POST', url: '/users', payload: { username, password } })
  if (registered.statusCode !== 201) throw new Error(`register failed: ${registered.body}`)
  const user = registered.json()
  const login = await app.inject({ method: 'POST', url: `/users/${username}/sessions`, payload: { password, return_token: true } })
  if (login.statusCode !== 201) throw new Error(`login failed: ${login.body}`)
  const { token } = login.json()
  return {
    id: user.id,
    username,
    password,
    walletId: user.primary_wallet_id,
    address: user.wallet_address,
    token,
    auth: { authorization: `Bearer ${token}` },
  }
}

/** Creates an asset (a unique name unless given). */
export async function createAsset(t: Api, options: { name?: string; value?: number } = {}): Promise<Asset> {
  const response = await t.app.inject({
    method: 'POST',
    url: '/assets',
    headers: t.admin,
    payload: { name: options.name ?? uniqueName('coin'), value: options.value ?? 1 },
  })
  assert.equal(response.statusCode, 201, response.body)
  return response.json()
}

/** Issues `quantity` of the asset from mint into the wallet, expiring at `expiresAt` when given. */
export async function issue(t: Api, walletId: number, assetId: number, quantity: number, expiresAt?: string): Promise<Transaction> {
  const response = await t.app.inject({
    method: 'POST',
    url: `/wallets/${walletId}/assets`,
    headers: t.admin,
    payload: { id: assetId, quantity, ...(expiresAt ? { expires_at: expiresAt } : {}) },
  })
  assert.equal(response.statusCode, 201, response.body)
  return response.json()
}

/** Sets a wallet's credit limit on an asset (the operator's `PUT /wallets/{id}/credit`). */
export async function setCredit(t: Api, walletId: number, assetId: number, limit: number): Promise<void> {
  const response = await t.app.inject({
    method: 'PUT',
    url: `/wallets/${walletId}/credit`,
    headers: t.admin,
    payload: { asset_id: assetId, limit },
  })
  assert.equal(response.statusCode, 200, response.body)
}

/** A new user whose primary wallet holds these quantities (each issued from mint). */
export async function fundedUser(t: Api, holdings: [asset: Asset, quantity: number][]): Promise<TestUser> {
  const user = await createUser(t.app)
  for (const [asset, quantity] of holdings) if (quantity > 0) await issue(t, user.walletId, asset.id, quantity)
  return user
}

/** POST /wallet/transactions with this body from the caller's active wallet; answers the Transaction. */
export async function sendTransaction(t: Pick<Api, 'app'>, from: { auth: Record<string, string> }, body: object): Promise<Transaction> {
  const response = await t.app.inject({ method: 'POST', url: '/wallet/transactions', headers: from.auth, payload: body })
  assert.equal(response.statusCode, 201, response.body)
  return response.json()
}

/** Sends assets (by name) from the caller's active wallet to a username; answers the Transaction. */
export function transfer(
  t: Pick<Api, 'app'>,
  from: { auth: Record<string, string> },
  to: string,
  assets: Record<string, number>,
): Promise<Transaction> {
  return sendTransaction(t, from, { recipient: to, assets })
}

/** A wallet key of the caller's active wallet, with Bearer headers for it. */
export async function createWalletKey(
  t: Pick<Api, 'app'>,
  headers: Record<string, string>,
  name?: string,
): Promise<{ id: number; wallet_id: number; name: string; token: string; auth: Record<string, string> }> {
  const response = await t.app.inject({
    method: 'POST',
    url: '/wallet/sessions',
    headers,
    ...(name === undefined ? {} : { payload: { name } }),
  })
  assert.equal(response.statusCode, 201, response.body)
  const key = response.json()
  return { ...key, auth: { authorization: `Bearer ${key.token}` } }
}

/** Sets the webhook of the user's active wallet; answers its signing secret. */
export async function setWebhook(t: Pick<Api, 'app'>, user: { auth: Record<string, string> }, url: string): Promise<string> {
  const response = await t.app.inject({ method: 'PUT', url: '/wallet/webhook', headers: user.auth, payload: { webhook: url } })
  assert.equal(response.statusCode, 200, response.body)
  return response.json().secret
}

/**
 * The transaction `answered` when it was made, as a later read must show it: the same in every
 * field, with the journal's `position` and `hash` the read has if the answer had none yet (they are
 * null until the sequencer positions it, within a second of commit, and never change after).
 */
function asJournalled(answered: Transaction, read: Transaction | undefined): Transaction {
  if (answered.position !== null || read === undefined) return answered
  return { ...answered, position: read.position, hash: read.hash }
}

/** Asserts that `read` is the transaction `answered` when it was made (`asJournalled`). */
export function assertSameTransaction(read: Transaction, answered: Transaction): void {
  assert.equal(read.position === null, read.hash === null, 'a position and its hash come together')
  assert.deepEqual(read, asJournalled(answered, read))
}

/** Asserts that `read` are the transactions `answered` when they were made, in the same order (`asJournalled`). */
export function assertSameTransactions(read: Transaction[], answered: Transaction[]): void {
  for (const transaction of read)
    assert.equal(transaction.position === null, transaction.hash === null, 'a position and its hash come together')
  assert.deepEqual(
    read,
    answered.map((transaction, i) => asJournalled(transaction, read[i])),
  )
}

/** POST /wallet/schedules with this body from the caller's active wallet; answers the Schedule. */
export async function createSchedule(t: Pick<Api, 'app'>, from: { auth: Record<string, string> }, body: object): Promise<Schedule> {
  const response = await t.app.inject({ method: 'POST', url: '/wallet/schedules', headers: from.auth, payload: body })
  assert.equal(response.statusCode, 201, response.body)
  return response.json()
}

/** POST /wallet/monitors with this body for the caller's active wallet; answers the Monitor. */
export async function createMonitor(t: Pick<Api, 'app'>, user: { auth: Record<string, string> }, body: object): Promise<Monitor> {
  const response = await t.app.inject({ method: 'POST', url: '/wallet/monitors', headers: user.auth, payload: body })
  assert.equal(response.statusCode, 201, response.body)
  return response.json()
}

/** A holding as GET /wallet/assets answers it. */
export interface Holding {
  asset: Asset
  quantity: number
  held: number
  credit_limit: number
  expiring: { quantity: number; expires_at: string }[]
}

/** GET /wallet/assets (with `query`, such as `?as_of=…`) for the caller's active wallet. */
export async function readHoldings(t: Pick<Api, 'app'>, user: { auth: Record<string, string> }, query = ''): Promise<Holding[]> {
  const response = await t.app.inject({ method: 'GET', url: `/wallet/assets${query}`, headers: user.auth })
  assert.equal(response.statusCode, 200, response.body)
  return response.json()
}
