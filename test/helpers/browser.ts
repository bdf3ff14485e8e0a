import fs from 'node:fs'
import path from 'node:path'
import axeCore from 'axe-core'
import { chromium, type Browser, type BrowserContext, type Locator, type Page } from 'playwright-core'
import { buildTestApp, STORAGE, type TestApp } from './app.ts'
import { startReceiver, type Receiver } from './receiver.ts'

/**
 * The console in Chromium (playwright-core, Debian's binary), for the browser tests: one test app,
 * one browser, and the steps a person takes, found by role and label. Screenshots go to
 * test-results/screenshots/<storage>/ (and to docs/screenshots/ with UPDATE_SCREENSHOTS=1).
 */

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium'
export const available = fs.existsSync(CHROMIUM)
if (!available && process.env.REQUIRE_BROWSER === '1') throw new Error(`REQUIRE_BROWSER=1 but there is no browser at ${CHROMIUM}`)

const SHOTS = path.resolve('test-results', 'screenshots', STORAGE)
const DOC_SHOTS = path.resolve('docs', 'screenshots')

export async function shoot(page: Page, name: string): Promise<void> {
  fs.mkdirSync(SHOTS, { recursive: true })
  const file = path.join(SHOTS, `${name}.png`)
  await page.screenshot({ path: file, fullPage: true })
  if (process.env.UPDATE_SCREENSHOTS === '1' && STORAGE === 'sqlite') {
    fs.mkdirSync(DOC_SHOTS, { recursive: true })
    fs.copyFileSync(file, path.join(DOC_SHOTS, `${name}.png`))
  }
}

type AxeResult = { violations: { id: string; impact: string; nodes: { target: string[] }[] }[] }

/** The serious and critical axe-core violations (WCAG 2.1 A and AA) of the page as it is now, each as "rule at targets". */
async function axeViolations(page: Page): Promise<string[]> {
  await page.waitForFunction(() => !document.querySelector('.loading'))
  await page.evaluate(axeCore.source)
  return page.evaluate(async () => {
    const axe = (window as unknown as { axe: { run: (context: Document, options: object) => Promise<AxeResult> } }).axe
    const result = await axe.run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] } })
    return result.violations
      .filter((violation) => violation.impact === 'serious' || violation.impact === 'critical')
      .map((violation) => `${violation.id} at ${violation.nodes.map((node) => node.target.join(' ')).join(', ')}`)
  })
}

/** Everything a page did wrong: script errors, console errors (CSP violations among them), requests elsewhere. */
export interface Watch {
  problems: string[]
}

function watch(page: Page, origin: string): Watch {
  const result: Watch = { problems: [] }
  page.on('pageerror', (error) => result.problems.push(`script error: ${error.message}`))
  page.on('console', (message) => {
    // A refused request is logged by the browser as a failed resource load; the console shows the
    // person the refusal itself, so only other errors count.
    if (message.type() === 'error' && !/Failed to load resource: the server responded with a status of 4\d\d/.test(message.text()))
      result.problems.push(`console: ${message.text()}`)
  })
  page.on('request', (request) => {
    if (!request.url().startsWith(`${origin}/`) && !request.url().startsWith('data:'))
      result.problems.push(`request elsewhere: ${request.url()}`)
  })
  return result
}

/** A phone's browser, for a session the console must name. */
export const ANDROID_CHROME =
  'Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36'

const LAUNCH = { executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'] }

/** Chromium, and the way to end it whatever state it is in. */
export interface LaunchedBrowser {
  browser: Browser
  /** Closes the browser, or kills its process if it has not closed within 10 s. */
  close(): Promise<void>
}

/**
 * Chromium launched as a server of this process: a browser that does not answer `close` would keep
 * the test file's process open through its pipes, and only a server's process can be killed.
 */
export async function launchBrowser(): Promise<LaunchedBrowser> {
  const server = await chromium.launchServer(LAUNCH)
  const browser = await chromium.connect(server.wsEndpoint())
  return {
    browser,
    async close() {
      let timer: NodeJS.Timeout | undefined
      const late = new Promise<void>((resolve) => (timer = setTimeout(resolve, 10_000)))
      await Promise.race([browser.close().catch(() => undefined), late])
      clearTimeout(timer)
      await server.kill()
    },
  }
}

/** A browser on a test app of the storage under test, and a person's steps in the console. */
export function consoleBrowser() {
  const state = {} as { t: TestApp; origin: string; browser: Browser; receiver: Receiver }
  let launched: LaunchedBrowser | undefined
  const contexts: BrowserContext[] = []
  const watches: Watch[] = []
  const password = 'correct horse'

  async function open(viewport = { width: 1280, height: 900 }, userAgent?: string): Promise<Page> {
    const context = await state.browser.newContext({ viewport, locale: 'en-US', ...(userAgent ? { userAgent } : {}) })
    contexts.push(context)
    const page = await context.newPage()
    watches.push(watch(page, state.origin))
    return page
  }

  async function register(page: Page, username: string): Promise<void> {
    await page.goto(`${state.origin}/`)
    await page.getByRole('link', { name: 'New here? Create an account' }).click()
    await page.getByLabel('Username').fill(username)
    await page.getByLabel('Password', { exact: true }).fill(password)
    await page.getByLabel('Repeat the password').fill(password)
    await page.getByRole('button', { name: 'Create account' }).click()
    await page.getByRole('heading', { level: 1, name: 'Balances' }).waitFor()
  }

  async function signIn(page: Page, username: string): Promise<void> {
    await page.goto(`${state.origin}/console/`)
    await page.getByLabel('Username').fill(username)
    await page.getByLabel('Password').fill(password)
    await page.getByRole('button', { name: 'Sign in' }).click()
    await page.getByRole('heading', { level: 1, name: 'Balances' }).waitFor()
  }

  async function go(page: Page, link: string, heading = link): Promise<void> {
    // On a phone the links are behind the top bar's menu.
    await page.locator('header.top').waitFor()
    const menu = page.getByRole('button', { name: 'Menu' })
    if (await menu.isVisible()) await menu.click()
    await page.getByRole('navigation').getByRole('link', { name: link, exact: true }).click()
    await page.getByRole('heading', { level: 1, name: heading }).waitFor()
  }

  /** Opens the screen's filters, folded behind one "Filter" control. */
  async function openFilters(page: Page): Promise<void> {
    const fold = page.locator('.filter-bar details')
    if (!(await fold.evaluate((details) => (details as HTMLDetailsElement).open))) await fold.locator('summary').click()
  }

  /** Opens a transaction's detail (in a list or a table) unless it is open. */
  async function openDetails(transaction: Locator): Promise<void> {
    const toggle = transaction.getByRole('button', { name: /^(Details|Hide details) of transaction \d+$/ })
    if ((await toggle.getAttribute('aria-expanded')) !== 'true') await toggle.click()
    await transaction.getByRole('region', { name: /^Transaction \d+$/ }).waitFor()
  }

  async function confirmDialog(page: Page, action: string): Promise<void> {
    const dialog = page.getByRole('dialog')
    await dialog.waitFor()
    await dialog.getByRole('button', { name: action }).click()
    await dialog.waitFor({ state: 'hidden' })
  }

  async function send(page: Page, kind: string, recipient: string, quantity: string, memo = ''): Promise<void> {
    await go(page, 'Send')
    await page.getByLabel('Send to a').selectOption({ label: kind })
    await page.getByLabel(kind, { exact: true }).fill(recipient)
    await page.getByLabel('Asset 1').selectOption({ index: 0 })
    await page.getByLabel('Quantity 1').fill(quantity)
    if (memo) await page.getByLabel('Memo (optional)').fill(memo)
    await page.getByRole('button', { name: 'Send', exact: true }).click()
    await page.getByRole('status').filter({ hasText: 'Sent ' }).waitFor()
  }

  async function address(page: Page): Promise<string> {
    return (await page.locator('.who strong').nth(1).textContent()) as string
  }

  /**
   * The serious axe violations of what `visit` opens, at 1280 px in the light and then the dark
   * colour scheme, each prefixed with its scheme: `visit` leaves its page where it is to be checked.
   */
  async function axeInEachScheme(visit: (page: Page) => Promise<void>): Promise<string[]> {
    const found: string[] = []
    for (const colorScheme of ['light', 'dark'] as const) {
      const context = await state.browser.newContext({ viewport: { width: 1280, height: 900 }, locale: 'en-US', colorScheme })
      contexts.push(context)
      const page = await context.newPage()
      await visit(page)
      found.push(...(await axeViolations(page)).map((violation) => `${colorScheme}: ${violation}`))
    }
    return found
  }

  /** Before the tests: the app (with `buildTestApp`'s settings and parts), listening on localhost, the browser and a webhook receiver. */
  async function start(...app: Parameters<typeof buildTestApp>): Promise<void> {
    state.t = await buildTestApp(...app)
    state.origin = (await state.t.app.listen({ port: 0, host: '127.0.0.1' })).replace('127.0.0.1', 'localhost')
    launched = await launchBrowser()
    state.browser = launched.browser
    state.receiver = await startReceiver()
  }

  async function stop(): Promise<void> {
    // Closing the browser closes its contexts.
    await launched?.close()
    await state.receiver?.close()
    await state.t?.close()
  }

  return {
    state,
    contexts,
    watches,
    password,
    start,
    stop,
    open,
    register,
    signIn,
    go,
    openFilters,
    openDetails,
    confirmDialog,
    send,
    address,
    axeInEachScheme,
  }
}
