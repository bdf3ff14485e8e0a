import assert from 'node:assert/strict'
import zlib from 'node:zlib'
import { after, before, describe, it } from 'node:test'
import { COMPRESS_FROM_BYTES } from '../../src/http/compression.ts'
import { buildTestApp, type TestApp } from '../helpers/app.ts'
import { createAsset, createUser, fundedUser, transfer } from '../helpers/factories.ts'

/** The console's files go precompressed to a browser that accepts it, hashed ones cached for good. */
describe('compression of the console', () => {
  let t: TestApp
  let bundle: string
  before(async () => {
    t = await buildTestApp()
    const page = await t.app.inject({ method: 'GET', url: '/console/' })
    bundle = /src="(\/console\/assets\/[^"]+\.js)"/.exec(page.body)?.[1] as string
  })
  after(() => t.close())

  it('sends brotli to a browser that accepts it, gzip to one that accepts only gzip, and plain to one that accepts neither', async () => {
    const plain = await t.app.inject({ method: 'GET', url: bundle })
    assert.equal(plain.headers['content-encoding'], undefined)
    assert.match(String(plain.headers.vary), /accept-encoding/i)
    const br = await t.app.inject({ method: 'GET', url: bundle, headers: { 'accept-encoding': 'gzip, deflate, br' } })
    assert.equal(br.headers['content-encoding'], 'br')
    assert.match(String(br.headers.vary), /accept-encoding/i)
    assert.match(String(br.headers['content-type']), /javascript/)
    assert.match(String(br.headers['cache-control']), /max-age=31536000, immutable/)
    assert.equal(zlib.brotliDecompressSync(br.rawPayload).toString(), plain.body)
    const gzip = await t.app.inject({ method: 'GET', url: bundle, headers: { 'accept-encoding': 'gzip' } })
    assert.equal(gzip.headers['content-encoding'], 'gzip')
    assert.equal(zlib.gunzipSync(gzip.rawPayload).toString(), plain.body)
    assert.ok(br.rawPayload.length < plain.rawPayload.length / 2)
  })

  it('sends the page compressed too, revalidated each time, with its security headers', async () => {
    const page = await t.app.inject({ method: 'GET', url: '/console/', headers: { 'accept-encoding': 'br' } })
    assert.equal(page.statusCode, 200)
    assert.equal(page.headers['content-encoding'], 'br')
    assert.equal(page.headers['cache-control'], 'no-cache')
    assert.match(String(page.headers['content-security-policy']), /script-src 'self'/)
    assert.match(zlib.brotliDecompressSync(page.rawPayload).toString(), /<div id="app">|<body/)
  })
})

/** The API's larger answers go compressed to a client that accepts it; small ones as they are. */
describe('compression of the API', () => {
  let t: TestApp
  let auth: Record<string, string>
  let gold: Awaited<ReturnType<typeof createAsset>>
  let bob: Awaited<ReturnType<typeof createUser>>
  before(async () => {
    t = await buildTestApp()
    gold = await createAsset(t)
    const alice = await fundedUser(t, [[gold, 1000]])
    bob = await createUser(t.app)
    for (let i = 0; i < 25; i++) await transfer(t, alice, bob.username, { [gold.name]: i + 1 })
    auth = alice.auth
  })
  /** A transfer whose answer passes 1 KB by its metadata. */
  const largeTransfer = () => ({
    recipient: bob.username,
    assets: { [gold.name]: 1 },
    metadata: { note: 'x'.repeat(500), more: 'y'.repeat(500) },
  })
  after(() => t.close())

  it('compresses a history page with brotli, or gzip, and says it varies by Accept-Encoding', async () => {
    const url = '/wallet/transactions?limit=20'
    const plain = await t.app.inject({ method: 'GET', url, headers: auth })
    assert.equal(plain.headers['content-encoding'], undefined)
    assert.ok(plain.rawPayload.length >= COMPRESS_FROM_BYTES)
    const br = await t.app.inject({ method: 'GET', url, headers: { ...auth, 'accept-encoding': 'gzip, deflate, br' } })
    assert.equal(br.headers['content-encoding'], 'br')
    assert.match(String(br.headers.vary), /accept-encoding/i)
    // The same page, decompressed (its transactions, by id).
    const ids = (body: { id: number }[]) => body.map((transaction) => transaction.id)
    assert.deepEqual(ids(JSON.parse(zlib.brotliDecompressSync(br.rawPayload).toString())), ids(plain.json()))
    const gzip = await t.app.inject({ method: 'GET', url, headers: { ...auth, 'accept-encoding': 'gzip' } })
    assert.equal(gzip.headers['content-encoding'], 'gzip')
    assert.deepEqual(ids(JSON.parse(zlib.gunzipSync(gzip.rawPayload).toString())), ids(plain.json()))
    console.log(`history page of 20: ${plain.rawPayload.length} B, ${gzip.rawPayload.length} B gzip, ${br.rawPayload.length} B br`)
  })

  it('compresses a CSV statement as it streams', async () => {
    const url = '/wallet/transactions?format=csv'
    const plain = await t.app.inject({ method: 'GET', url, headers: auth })
    const gzip = await t.app.inject({ method: 'GET', url, headers: { ...auth, 'accept-encoding': 'gzip' } })
    assert.equal(gzip.headers['content-encoding'], 'gzip')
    assert.match(String(gzip.headers['content-type']), /text\/csv/)
    const statement = zlib.gunzipSync(gzip.rawPayload).toString()
    assert.equal(statement.split('\n')[0], plain.body.split('\n')[0])
    assert.equal(statement.split('\n').length, plain.body.split('\n').length)
    console.log(`statement of 26 transactions: ${plain.rawPayload.length} B, ${gzip.rawPayload.length} B gzip`)
  })

  it("compresses a batch's answer, which grows with its transfers", async () => {
    const payload = { transfers: Array.from({ length: 5 }, largeTransfer) }
    const br = await t.app.inject({
      method: 'POST',
      url: '/wallet/transactions/batch',
      headers: { ...auth, 'accept-encoding': 'br, gzip' },
      payload,
    })
    assert.equal(br.statusCode, 201, br.body)
    assert.equal(br.headers['content-encoding'], 'br')
    const answer = JSON.parse(zlib.brotliDecompressSync(br.rawPayload).toString())
    assert.equal(answer.transactions.length, 5)
    assert.equal(answer.transactions[0].metadata.note, 'x'.repeat(500))
  })

  it("sends a single transfer's answer as it is, even past 1 KB: a write answers the one object it made", async () => {
    const sent = await t.app.inject({
      method: 'POST',
      url: '/wallet/transactions',
      headers: { ...auth, 'accept-encoding': 'br, gzip' },
      payload: largeTransfer(),
    })
    assert.equal(sent.statusCode, 201, sent.body)
    assert.ok(sent.rawPayload.length >= COMPRESS_FROM_BYTES)
    assert.equal(sent.headers['content-encoding'], undefined)
    assert.equal(sent.json().metadata.more, 'y'.repeat(500))
  })

  it('sends a small answer as it is', async () => {
    const small = await t.app.inject({ method: 'GET', url: '/wallet/assets', headers: { ...auth, 'accept-encoding': 'br, gzip' } })
    assert.equal(small.statusCode, 200)
    assert.ok(small.rawPayload.length < COMPRESS_FROM_BYTES)
    assert.equal(small.headers['content-encoding'], undefined)
  })
})
