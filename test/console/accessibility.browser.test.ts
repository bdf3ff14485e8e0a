import assert from 'node:assert/strict'
import path from 'node:path'
import { after, before, describe, it } from 'node:test'
import axeCore from 'axe-core'
import type { Browser, Page } from 'playwright-core'
import { ADMIN_KEY, buildTestApp, type TestApp } from '../helpers/app.ts'
import { available, CHROMIUM, launchBrowser, type LaunchedBrowser } from '../helpers/browser.ts'
import { createAsset, createUser, issue, transfer } from '../helpers/factories.ts'

/**
 * Every screen of the console, holder's and operator's, in light and in dark, checked by axe-core
 * (injected by the test; the page's CSP allows no such script): no serious or critical violation
 * of WCAG 2.1 A and AA, colour contrast among them. Skipped without a browser unless REQUIRE_BROWSER=1.
 */

const HOLDER: [link: string, heading: string][] = [
  ['Balances', 'Balances'],
  ['Send', 'Send'],
  ['History', 'History'],
  ['Batch', 'Batch send'],
  ['Holds', 'Holds'],
  ['Schedules', 'Scheduled payments'],
  ['Alerts', 'Balance alerts'],
  ['Wallets', 'Wallets'],
  ['Sharing', 'Sharing'],
  ['Keys', 'Keys'],
  ['Webhook', 'Webhook'],
  ['Account', 'Account'],
]
const OPERATOR: [link: string, heading: string][] = [
  ['Overview', 'Overview'],
  ['Assets', 'Assets'],
  ['Wallets', 'Wallets'],
  ['Journal', 'Journal'],
  ['Schedules', 'Schedules in trouble'],
  ['Verification', 'Verification'],
]

type AxeResult = { violations: { id: string; impact: string; nodes: { target: string[] }[] }[] }

describe('the console reads well in light and dark', { skip: !available && `no browser at ${CHROMIUM}` }, () => {
  let t: TestApp
  let origin: string
  let launched: LaunchedBrowser
  let browser: Browser
  let username: string
  let walletId: number
  const axe = axeCore.source

  before(async () => {
    t = await buildTestApp()
    origin = (await t.app.listen({ port: 0, host: '127.0.0.1' })).replace('127.0.0.1', 'localhost')
    launched = await launchBrowser()
    browser = launched.browser
    const gold = await createAsset(t)
    const holder = await createUser(t.app)
    const other = await createUser(t.app)
    await issue(t, holder.walletId, gold.id, 1000)
    await transfer(t, holder, other.username, { [gold.name]: 25 })
    await transfer(t, other, holder.username, { [gold.name]: 5 })
    username = holder.username
    walletId = holder.walletId
  })

  after(async () => {
    await launched?.close()
    await t?.close()
  })

  async function go(page: Page, link: string, heading = link): Promise<void> {
    await page.locator('header.top').waitFor()
    const menu = page.getByRole('button', { name: 'Menu' })
    if (await menu.isVisible()) await menu.click()
    await page.getByRole('navigation').getByRole('link', { name: link, exact: true }).click()
    await page.getByRole('heading', { level: 1, name: heading }).waitFor()
    await page.waitForFunction(() => !document.querySelector('.loading'))
  }

  /** The serious and critical violations on the page as it is now. */
  async function check(page: Page): Promise<string[]> {
    await page.evaluate(axe)
    return page.evaluate(async () => {
      const run = (window as unknown as { axe: { run: (context: Document, options: object) => Promise<AxeResult> } }).axe.run
      const result = await run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] } })
      return result.violations
        .filter((violation) => violation.impact === 'serious' || violation.impact === 'critical')
        .map((violation) => `${violation.id} at ${violation.nodes.map((node) => node.target.join(' ')).join(', ')}`)
    })
  }

  for (const colorScheme of ['light', 'dark'] as const) {
    it(`has no serious violation on any screen, ${colorScheme}`, async () => {
      const found: string[] = []
      const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, locale: 'en-US', colorScheme })
      const page = await context.newPage()
      await page.goto(`${origin}/console/`)
      found.push(...(await check(page)).map((violation) => `sign-in: ${violation}`))
      await page.getByLabel('Username').fill(username)
      await page.getByLabel('Password').fill('correct horse')
      await page.getByRole('button', { name: 'Sign in' }).click()
      for (const [link, heading] of HOLDER) {
        await go(page, link, heading)
        // A transaction's detail is checked open.
        if (heading === 'History')
          await page
            .getByRole('button', { name: /^Details of transaction/ })
            .first()
            .click()
        found.push(...(await check(page)).map((violation) => `${heading}: ${violation}`))
      }
      await page.goto(`${origin}/console/#/operator`)
      await page.getByLabel('Admin key').fill(ADMIN_KEY)
      await page.getByRole('button', { name: 'Sign in' }).click()
      for (const [link, heading] of OPERATOR) {
        await go(page, link, heading)
        found.push(...(await check(page)).map((violation) => `operator ${heading}: ${violation}`))
      }
      // One wallet's page, with its holdings, issue and burn forms and its history.
      await page.goto(`${origin}/console/#/operator/wallets/${walletId}`)
      await page.getByRole('heading', { level: 2, name: 'Holdings' }).waitFor()
      await page.waitForFunction(() => !document.querySelector('.loading'))
      found.push(...(await check(page)).map((violation) => `operator wallet: ${violation}`))
      if (process.env.UPDATE_SCREENSHOTS === '1' && colorScheme === 'dark') {
        await go(page, 'Journal')
        await page.screenshot({ path: path.resolve('docs', 'screenshots', 'operator-journal-dark.png') })
      }
      await context.close()
      assert.deepEqual(found, [])
    })
  }
})
