import assert from 'node:assert/strict'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { after, before, describe, it } from 'node:test'
import type { BrowserContext, Page } from 'playwright-core'
import { buildTestApp, type TestApp } from '../helpers/app.ts'
import { available, CHROMIUM, launchBrowser, type LaunchedBrowser } from '../helpers/browser.ts'
import { createUser, type TestUser } from '../helpers/factories.ts'

/**
 * What a real browser does with the session cookie, CORS and the CSRF guard (A004), for a
 * web dashboard on another origin. Debian's Chromium, driven by playwright-core; `.ci/run`
 * installs it. Without it the suite is skipped with a note, unless `REQUIRE_BROWSER=1` (CI).
 *
 * Origins, all on this machine (a cookie belongs to a host, whatever the port):
 * - the API at http://localhost:<api>;
 * - the dashboard at http://localhost:<dashboard>, listed in CORS_ORIGINS: same site, allowed;
 * - a foreign page at http://localhost:<foreign>: same site (the browser sends the cookie), not
 *   allowed, so only the CSRF guard stands between it and the wallet;
 * - a cross-site page at http://127.0.0.1:<foreign>: the browser keeps the SameSite=Lax cookie back.
 */

/** A blank page server, so that scripts run with that origin. */
async function pageServer(): Promise<{ port: number; close(): Promise<void> }> {
  const server = http.createServer((_request, response) =>
    response.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><title>page</title>'),
  )
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return { port: (server.address() as AddressInfo).port, close: () => new Promise((resolve) => server.close(() => resolve())) }
}

interface Answer {
  status?: number
  body?: string
  requestId?: string | null
  /** The browser refused to let the page read the answer, or to send the request at all. */
  blocked?: string
}

/** Runs fetch in the page, with the page's origin and the browser's cookies. */
function call(page: Page, url: string, init: { method?: string; headers?: Record<string, string>; body?: string }): Promise<Answer> {
  return page.evaluate(
    async ({ url, init }) => {
      try {
        const response = await fetch(url, { ...init, credentials: 'include' })
        return { status: response.status, body: await response.text(), requestId: response.headers.get('x-request-id') }
      } catch (error) {
        return { blocked: String(error) }
      }
    },
    { url, init },
  )
}

const json = { 'content-type': 'application/json' }

describe(
  'a browser on another origin',
  { skip: !available && `no browser at ${CHROMIUM} (set REQUIRE_BROWSER=1 to make this a failure)` },
  () => {
    let t: TestApp
    let api: string
    let launched: LaunchedBrowser
    let context: BrowserContext
    let dashboard: Page
    let foreign: Page
    let crossSite: Page
    let alice: TestUser
    let bob: TestUser
    const servers: { close(): Promise<void> }[] = []

    before(async () => {
      const dashboardServer = await pageServer()
      const foreignServer = await pageServer()
      servers.push(dashboardServer, foreignServer)
      t = await buildTestApp({ CORS_ORIGINS: `http://localhost:${dashboardServer.port}` })
      const address = await t.app.listen({ port: 0, host: '127.0.0.1' })
      api = address.replace('127.0.0.1', 'localhost')
      alice = await createUser(t.app)
      bob = await createUser(t.app)
      const asset = await t.app.inject({ method: 'POST', url: '/assets', headers: t.admin, payload: { name: 'gold', value: 1 } })
      await t.app.inject({
        method: 'POST',
        url: `/wallets/${alice.walletId}/assets`,
        headers: t.admin,
        payload: { id: asset.json().id, quantity: 100 },
      })
      launched = await launchBrowser()
      context = await launched.browser.newContext()
      dashboard = await context.newPage()
      await dashboard.goto(`http://localhost:${dashboardServer.port}/`)
      foreign = await context.newPage()
      await foreign.goto(`http://localhost:${foreignServer.port}/`)
      crossSite = await context.newPage()
      await crossSite.goto(`http://127.0.0.1:${foreignServer.port}/`)
    })
    after(async () => {
      await launched?.close()
      await t?.close()
      for (const server of servers) await server.close()
    })

    async function goldOf(user: TestUser): Promise<number> {
      const holdings = (await t.app.inject({ method: 'GET', url: '/wallet/assets', headers: user.auth })).json() as {
        asset: { name: string }
        quantity: number
      }[]
      return holdings.find((holding) => holding.asset.name === 'gold')?.quantity ?? 0
    }

    /** How many answers the API gave to POST /wallet/transactions with this status. */
    async function answered(status: number): Promise<number> {
      const metrics = (await t.app.inject({ method: 'GET', url: '/metrics', headers: t.admin })).body
      const line = metrics
        .split('\n')
        .find((entry) => entry.startsWith(`coffer_http_requests_total{method="POST",route="/wallet/transactions",status="${status}"}`))
      return line ? Number(line.split(' ').pop()) : 0
    }

    const transfer = JSON.stringify({ recipient: 'BOB', assets: { gold: 1 } })

    it('logs the dashboard in with an HttpOnly, SameSite=Lax session cookie', async () => {
      const login = await call(dashboard, `${api}/users/${alice.username}/sessions`, {
        method: 'POST',
        headers: json,
        body: JSON.stringify({ password: alice.password }),
      })
      assert.equal(login.status, 201, login.body ?? login.blocked)
      assert.equal(JSON.parse(login.body ?? '{}').token, undefined, 'no token in the body when a cookie is set')
      const cookie = (await context.cookies(api)).find((entry) => entry.name === t.config.sessionCookieName)
      assert.ok(cookie, 'the browser keeps the session cookie')
      assert.equal(cookie.httpOnly, true)
      assert.equal(cookie.sameSite, 'Lax')
      assert.equal(cookie.path, '/')
      // Scripts of the dashboard cannot read it, only send it.
      assert.equal(await dashboard.evaluate(() => document.cookie), '')
    })

    it('lets the dashboard read and send with that cookie, and read the exposed headers', async () => {
      const session = await call(dashboard, `${api}/user/session`, {})
      assert.equal(session.status, 200, session.body ?? session.blocked)
      assert.equal(JSON.parse(session.body ?? '{}').username, alice.username)
      const sent = await call(dashboard, `${api}/wallet/transactions`, {
        method: 'POST',
        headers: json,
        body: transfer.replace('BOB', bob.username),
      })
      assert.equal(sent.status, 201, sent.body ?? sent.blocked)
      assert.ok(sent.requestId, 'X-Request-Id is exposed to the dashboard')
      assert.equal(await goldOf(bob), 1)
    })

    it('refuses a same-site page that is not allowed: its request carries the cookie but gets A004, and moves nothing', async () => {
      const refusedBefore = await answered(403)
      // text/plain needs no preflight, so the browser sends it, cookie and Origin included.
      const simple = await call(foreign, `${api}/wallet/transactions`, {
        method: 'POST',
        headers: { 'content-type': 'text/plain' },
        body: transfer.replace('BOB', bob.username),
      })
      assert.ok(simple.blocked, 'the page may not read the answer (no CORS for its origin)')
      assert.equal(await answered(403), refusedBefore + 1, 'the API answered the forged request with 403 (A004)')
      // A JSON request needs a preflight, which the API does not grant to this origin: never sent.
      const createdBefore = await answered(201)
      const preflighted = await call(foreign, `${api}/wallet/transactions`, {
        method: 'POST',
        headers: json,
        body: transfer.replace('BOB', bob.username),
      })
      assert.ok(preflighted.blocked)
      assert.equal(await answered(201), createdBefore)
      assert.equal(await goldOf(bob), 1)
      assert.equal(await goldOf(alice), 99)
    })

    it('never gets the cookie from a cross-site page: its request arrives without credentials (A000)', async () => {
      const unauthenticatedBefore = await answered(401)
      const forged = await call(crossSite, `${api}/wallet/transactions`, {
        method: 'POST',
        headers: { 'content-type': 'text/plain' },
        body: transfer.replace('BOB', bob.username),
      })
      assert.ok(forged.blocked)
      assert.equal(await answered(401), unauthenticatedBefore + 1, 'the API saw the request, without the SameSite=Lax cookie')
      assert.equal(await goldOf(bob), 1)
    })

    it('renders the API reference on /docs: every route of the OpenAPI document, with no script error', async () => {
      const page = await context.newPage()
      const errors: string[] = []
      page.on('pageerror', (error) => errors.push(String(error)))
      await page.goto(`${api}/docs`)
      await page.waitForSelector('.opblock', { timeout: 15_000 })
      const shown = await page.$$eval('.opblock-summary-path', (paths) => new Set(paths.map((path) => path.getAttribute('data-path'))).size)
      const documented = Object.keys((await t.app.inject({ method: 'GET', url: '/openapi.json' })).json().paths).length
      assert.equal(shown, documented)
      assert.deepEqual(errors, [])
      await page.close()
    })

    it('signs the dashboard out: the session ends and the browser drops the cookie', async () => {
      const out = await call(dashboard, `${api}/user/session`, { method: 'DELETE' })
      assert.equal(out.status, 204, out.body ?? out.blocked)
      assert.equal(
        (await context.cookies(api)).find((entry) => entry.name === t.config.sessionCookieName),
        undefined,
      )
      const after = await call(dashboard, `${api}/user/session`, {})
      assert.equal(after.status, 401)
      assert.equal(JSON.parse(after.body ?? '{}').code, 'A000')
    })
  },
)
