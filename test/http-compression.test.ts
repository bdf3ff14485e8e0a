import assert from 'node:assert/strict'
import zlib from 'node:zlib'
import { after, before, describe, it } from 'node:test'
import { buildTestApp, type TestApp } from './helpers/app.ts'

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
