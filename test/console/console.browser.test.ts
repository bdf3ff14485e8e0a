import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import zlib from 'node:zlib'
import { after, before, describe, it } from 'node:test'
import { runTipBot } from '../../examples/tip-bot/tip-bot.ts'
import { ADMIN_KEY } from '../helpers/app.ts'
import { ANDROID_CHROME, available, CHROMIUM, consoleBrowser, shoot } from '../helpers/browser.ts'
import type { Receiver } from '../helpers/receiver.ts'

/**
 * The console in Chromium (playwright-core, Debian's binary), as people use it: found by role and
 * label, so accessible names matter. A person's whole day on the storage under test, then the CSP,
 * keyboard-only sending, a 360 px phone and the rest of the tools (the ledger tools are in
 * `ledger.browser.test.ts`). Skipped without a browser unless REQUIRE_BROWSER=1 (CI).
 */

const startedAt = Date.now()
function step(name: string): void {
  if (process.env.BROWSER_STEPS === '1') console.log(`${((Date.now() - startedAt) / 1000).toFixed(1)} s: ${name}`)
}

describe(
  'the console in a browser',
  { skip: !available && `no browser at ${CHROMIUM} (set REQUIRE_BROWSER=1 to make this a failure)` },
  () => {
    let origin: string
    let receiver: Receiver
    const suffix = `${process.pid % 10000}`
    const alice = `alice${suffix}`
    const bob = `bob${suffix}`

    const b = consoleBrowser()
    const { contexts, watches, password, open, register, signIn, go, confirmDialog, send, address } = b

    before(async () => {
      await b.start()
      ;({ origin, receiver } = b.state)
    })

    after(() => b.stop())

    it('a whole day: operator and two people, from the first asset to the ledger check', { timeout: 240_000 }, async () => {
      try {
        await wholeDay()
      } catch (error) {
        for (const [index, context] of contexts.entries())
          for (const page of context.pages()) await shoot(page, `failure-${index}`).catch(() => undefined)
        throw error
      }
    })

    async function wholeDay(): Promise<void> {
      // An operator signs in (a wrong key first), creates an asset.
      step('An operator signs in (a wrong key first)')
      const operator = await open()
      const started = Date.now()
      await operator.goto(`${origin}/`)
      await operator.getByRole('heading', { level: 1, name: 'Sign in' }).waitFor()
      console.log(`first screen of the console ready ${Date.now() - started} ms after the request (cold browser context)`)
      assert.equal(new URL(operator.url()).pathname, '/console/')
      await operator.getByRole('link', { name: 'Operator sign-in' }).click()
      await operator.getByLabel('Admin key').fill('not the admin key, but long enough')
      await operator.getByRole('button', { name: 'Sign in' }).click()
      await operator.getByRole('alert').filter({ hasText: 'The admin key is wrong' }).waitFor()
      await shoot(operator, 'operator-sign-in-refused')
      await operator.getByLabel('Admin key').fill(ADMIN_KEY)
      await operator.getByRole('button', { name: 'Sign in' }).click()
      await operator.getByRole('heading', { level: 1, name: 'Overview' }).waitFor()
      assert.equal(await operator.getByLabel('Admin key').count(), 0)
      const cookies = await operator.context().cookies()
      const adminCookie = cookies.find((cookie) => cookie.name === 'coffer_admin')
      assert.ok(adminCookie?.httpOnly && adminCookie.sameSite === 'Strict', JSON.stringify(cookies))
      assert.ok(!cookies.some((cookie) => cookie.value.includes(ADMIN_KEY)), 'the browser never keeps the admin key')
      await go(operator, 'Assets')
      await operator.getByLabel('Asset name').fill('gold')
      await operator.getByLabel('Value each').fill('1.5')
      await operator.getByRole('button', { name: 'Create asset' }).click()
      await operator.getByRole('status').filter({ hasText: 'Asset gold created' }).waitFor()
      await operator.getByLabel('Asset name').fill('gold')
      await operator.getByLabel('Value each').fill('2')
      await operator.getByRole('button', { name: 'Create asset' }).click()
      await operator.getByRole('alert').filter({ hasText: 'An asset with that name already exists' }).waitFor()

      // Two people register.
      step('Two people register.')
      const alicePage = await open()
      await register(alicePage, alice)
      await alicePage.getByText('This wallet holds nothing yet').waitFor()
      await shoot(alicePage, 'balances-empty')
      const bobPage = await open()
      await register(bobPage, bob)
      const bobAddress = await address(bobPage)

      // The operator finds alice's wallet and issues gold to it.
      step("The operator finds alice's wallet and is")
      await go(operator, 'Wallets')
      await operator.getByLabel('Find a wallet').fill(alice)
      await operator.getByRole('link', { name: await address(alicePage) }).click()
      await operator.getByRole('heading', { level: 1, name: `Wallet ${await address(alicePage)}` }).waitFor()
      await operator.getByLabel('Quantity to issue').fill('100')
      await operator.getByRole('button', { name: 'Issue', exact: true }).click()
      await operator.getByRole('status').filter({ hasText: 'Issued 100 gold' }).waitFor()
      await shoot(operator, 'operator-wallet')

      // Bob watches his history; alice sends by username, then by address: it appears live.
      step('Bob watches his history; alice sends by ')
      await go(bobPage, 'History')
      await bobPage.getByText('No transactions yet.').waitFor()
      await bobPage.getByText('Live: new transactions appear by themselves.').waitFor()
      await go(alicePage, 'Balances')
      await alicePage.getByRole('row', { name: /gold 100 1\.5/ }).waitFor()
      await send(alicePage, 'Username', bob, '5', 'lunch')
      await bobPage.getByText(`Received from ${alice}`).first().waitFor({ timeout: 10_000 })
      await bobPage.getByText('“lunch”').waitFor()
      await send(alicePage, 'Wallet address', bobAddress, '3')
      await bobPage.getByText('+3 gold').waitFor({ timeout: 10_000 })
      await shoot(bobPage, 'history-live')
      // A refused send shows the error table's words, and the form keeps what was typed.
      step("A refused send shows the error table's w")
      await go(alicePage, 'Send')
      await alicePage.getByLabel('Send to a').selectOption({ label: 'Username' })
      await alicePage.getByLabel('Username', { exact: true }).fill(bob)
      await alicePage.getByLabel('Quantity 1').fill('1000000')
      await alicePage.getByRole('button', { name: 'Send', exact: true }).click()
      await alicePage.getByRole('alert').filter({ hasText: 'There is not enough in this wallet for that.' }).waitFor()
      // The refusal's detail groups digits as the rest of the console does.
      await alicePage.getByRole('alert').filter({ hasText: '1,000,000 requested' }).waitFor()
      await alicePage.getByLabel('Quantity 1').fill('1000')
      await alicePage.getByLabel('Quantity 1').fill('1.5')
      await alicePage.getByRole('button', { name: 'Send', exact: true }).click()
      await alicePage.getByRole('alert').filter({ hasText: 'The quantity of gold is a whole number of at least 1.' }).waitFor()
      await shoot(alicePage, 'send-refused')

      // Alice makes a second wallet, funds it, shares it with bob, and gives the tip bot a key.
      step('Alice makes a second wallet, funds it, s')
      const savings = `savings${String.fromCharCode(...[...suffix].map((digit) => 97 + Number(digit)))}`
      await go(alicePage, 'Wallets')
      await alicePage.getByLabel('Address (optional)').fill(savings)
      await alicePage.getByRole('button', { name: 'Create wallet' }).click()
      await alicePage
        .getByRole('status')
        .filter({ hasText: `Wallet ${savings} created.` })
        .waitFor()
      await send(alicePage, 'Wallet address', savings, '20')
      await go(alicePage, 'Wallets')
      await alicePage.getByRole('button', { name: `Use wallet ${savings}` }).click()
      await alicePage.locator('.who').getByText(savings).waitFor()
      await shoot(alicePage, 'wallets')
      await go(alicePage, 'Sharing')
      await alicePage.getByLabel('Username to share with').fill(bob)
      await alicePage.getByRole('button', { name: 'Share', exact: true }).click()
      await alicePage
        .getByRole('status')
        .filter({ hasText: `${bob} can now use wallet ${savings}` })
        .waitFor()
      await go(alicePage, 'Keys')
      // The bot reads the wallet's events and sends tips: at most 100 gold a day.
      await alicePage.getByLabel('Key name').fill('tip bot')
      await alicePage.getByLabel('Can send up to an amount a day').check()
      await alicePage.getByLabel('Asset it may send 1').selectOption('gold')
      await alicePage.getByLabel('Most in 24 hours 1').fill('100')
      await alicePage.getByRole('button', { name: 'Create key' }).click()
      const key = (await alicePage.locator('code.token').textContent()) as string
      assert.match(key, /^cfw_/)
      await shoot(alicePage, 'keys-created')
      const lines: string[] = []
      const stopBot = new AbortController()
      const bot = runTipBot({ baseUrl: origin, key, log: (line) => lines.push(line), signal: stopBot.signal })
      try {
        const deadline = Date.now() + 10_000
        while (!lines.includes('listening for transfers') && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50))
        await send(bobPage, 'Wallet address', savings, '2')
        await go(bobPage, 'History')
        await bobPage.getByText(/thanks for transaction \d+/).waitFor({ timeout: 10_000 })
        // The key shows its use; revoking it (confirmed) stops the bot.
        await go(alicePage, 'Balances')
        await go(alicePage, 'Keys')
        await alicePage.getByText(/last used/).waitFor()
        await alicePage.getByRole('button', { name: 'Revoke key “tip bot”' }).click()
        await confirmDialog(alicePage, 'Revoke key')
        await alicePage.getByText('This wallet has no keys.').waitFor()
        await Promise.race([
          bot,
          new Promise((_, reject) => setTimeout(() => reject(new Error(`the bot kept running: ${lines.join(' | ')}`)), 25_000)),
        ])
        assert.ok(
          lines.some((line) => line.includes('refused the key')),
          lines.join(' | '),
        )
      } finally {
        stopBot.abort()
      }

      // A webhook on the savings wallet: set, its secret shown once, a delivery seen.
      step('A webhook on the savings wallet: set, it')
      await go(alicePage, 'Webhook')
      await alicePage.getByText('No webhook is set.').waitFor()
      await alicePage.getByLabel('Webhook address').fill(`${receiver.url}/hook`)
      await alicePage.getByRole('button', { name: 'Set webhook' }).click()
      assert.match((await alicePage.locator('code.token').textContent()) as string, /^whsec_/)
      await send(bobPage, 'Wallet address', savings, '1')
      await receiver.waitFor(1, 10_000)
      await go(alicePage, 'Webhook')
      // The list follows its deliveries by itself, each named in words.
      await alicePage.getByRole('heading', { name: 'Money received · Delivered' }).waitFor()
      await alicePage
        .getByText(/Attempts of delivery/)
        .first()
        .click()
      await alicePage
        .getByText(/answered 200/)
        .first()
        .waitFor()
      await shoot(alicePage, 'webhook')

      // Deleting the savings wallet (confirmed) sweeps it into her primary wallet.
      step('Deleting the savings wallet (confirmed) ')
      await go(alicePage, 'Wallets')
      await alicePage.getByRole('button', { name: `Delete wallet ${savings}` }).click()
      await alicePage.getByRole('dialog').getByText('Everything it holds moves to your primary wallet').waitFor()
      await shoot(alicePage, 'confirm-delete')
      await confirmDialog(alicePage, 'Delete wallet')
      await alicePage
        .getByRole('status')
        .filter({ hasText: `Wallet ${savings} deleted` })
        .waitFor()
      await go(alicePage, 'Balances')
      // 100 − 5 − 3 − 20 back in primary, then the savings wallet's 20 + 2 + 1 − 1 (the tip) swept in.
      step('100 − 5 − 3 − 20 back in primary, then t')
      await alicePage.getByRole('row', { name: /gold 94 / }).waitFor()
      await shoot(alicePage, 'balances')

      // Signing out everywhere ends her other session too: it returns to sign-in with a message.
      step('Signing out everywhere ends her other se')
      const aliceElsewhere = await open()
      await signIn(aliceElsewhere, alice)
      await go(aliceElsewhere, 'History')
      await aliceElsewhere.getByText('Live: new transactions appear by themselves.').waitFor()
      await go(alicePage, 'Account')
      await shoot(alicePage, 'account')
      await alicePage.getByRole('button', { name: 'Sign out everywhere' }).click()
      await confirmDialog(alicePage, 'Sign out everywhere')
      await alicePage.getByText('You are signed out everywhere.').waitFor()
      // The other device, left on History, is taken back to sign-in by its live stream, which the
      // service ends with the session: well before the stream's 15 s keep-alive check would.
      await aliceElsewhere.getByRole('heading', { level: 1, name: 'Sign in' }).waitFor({ timeout: 10_000 })
      await aliceElsewhere.getByText('Your session has ended. Please sign in again.').waitFor()
      assert.equal(await aliceElsewhere.getByRole('heading', { name: 'History' }).count(), 0, 'no history left on screen')

      // The operator reads the journal and runs the verification.
      step('The operator reads the journal and runs ')
      await go(operator, 'Journal')
      await operator.getByText(`From mint to ${alice}`).first().waitFor()
      await shoot(operator, 'operator-journal')
      await go(operator, 'Overview')
      await operator.getByRole('row', { name: /gold/ }).waitFor()
      await shoot(operator, 'operator-overview')
      await go(operator, 'Verification')
      await operator.getByRole('button', { name: 'Run the check' }).click()
      await operator.getByText('The ledger is consistent.').waitFor()
      await shoot(operator, 'operator-verification')
      await operator.getByRole('button', { name: 'Sign out' }).click()
      await operator.getByRole('heading', { level: 1, name: 'Operator sign-in' }).waitFor()

      for (const page of [operator, alicePage, bobPage, aliceElsewhere]) {
        assert.equal(await page.locator('script:not([src])').count(), 0, 'no inline script')
      }
      assert.deepEqual(
        watches.flatMap((w) => w.problems),
        [],
      )
    }

    it('holds its Content-Security-Policy: no inline script runs, no request leaves the origin', async () => {
      const page = await open()
      const response = await page.goto(`${origin}/console/`)
      assert.match(String(response?.headers()['content-security-policy']), /script-src 'self'/)
      await page.getByRole('heading', { level: 1, name: 'Sign in' }).waitFor()
      // A script the page did not ship is refused by the browser.
      const violations: string[] = []
      page.on('console', (message) => violations.push(message.text()))
      const ran = await page.evaluate(() => {
        const script = document.createElement('script')
        script.textContent = 'window.injected = true'
        document.body.append(script)
        return (window as unknown as { injected?: boolean }).injected === true
      })
      assert.equal(ran, false, 'an inline script ran')
      assert.ok(
        violations.some((text) => /Content Security Policy/i.test(text)),
        violations.join(' | '),
      )
      watches.pop()
    })

    it('sends with the keyboard alone, with visible focus', async () => {
      const page = await open()
      await page.goto(`${origin}/console/`)
      await page.getByRole('heading', { level: 1, name: 'Sign in' }).waitFor()
      const typeInto = async (label: string, text: string) => {
        const seen: string[] = []
        for (let tab = 0; tab < 40; tab++) {
          await page.keyboard.press('Tab')
          const focused = await page.evaluate(() => {
            const element = document.activeElement as unknown as { labels?: { textContent: string }[]; textContent: string } | null
            return element?.labels?.[0]?.textContent ?? element?.textContent ?? ''
          })
          seen.push(focused)
          if (focused === label) {
            const outline = await page.evaluate(() => getComputedStyle(document.activeElement as Element).outlineStyle)
            assert.notEqual(outline, 'none', `no visible focus on ${label}`)
            if (text) await page.keyboard.type(text)
            return
          }
        }
        throw new Error(`Tab never reached ${label}: ${seen.join(' → ')}`)
      }
      await typeInto('Username', bob)
      await typeInto('Password', password)
      await page.keyboard.press('Enter')
      await page.getByRole('heading', { level: 1, name: 'Balances' }).waitFor()
      await typeInto('Send', '')
      await page.keyboard.press('Enter')
      await page.getByRole('heading', { level: 1, name: 'Send' }).waitFor()
      await typeInto('Username', alice)
      await typeInto('Quantity 1', '1')
      await typeInto('Memo (optional)', 'by keyboard')
      await page.keyboard.press('Enter')
      await page
        .getByRole('status')
        .filter({ hasText: `Sent 1 gold to ${alice}` })
        .waitFor()
    })

    it('fits a 360 px phone without horizontal scrolling', async () => {
      const page = await open({ width: 360, height: 740 })
      await signIn(page, bob)
      for (const [link, heading] of [
        ['Balances', 'Balances'],
        ['Send', 'Send'],
        ['History', 'History'],
        ['Batch', 'Batch send'],
        ['Holds', 'Holds'],
        ['Wallets', 'Wallets'],
        ['Sharing', 'Sharing'],
        ['Keys', 'Keys'],
        ['Webhook', 'Webhook'],
        ['Account', 'Account'],
      ]) {
        await go(page, link, heading)
        await page.waitForLoadState('networkidle').catch(() => undefined)
        // A compact top bar: one row, whatever the screen.
        const bar = await page.locator('header.top').boundingBox()
        assert.ok(bar && bar.height <= 72, `the top bar is ${bar?.height} px tall on ${heading}`)
        // The filters are folded, so the first transaction is on the first screen.
        if (heading === 'History') {
          const first = await page.locator('ul.transactions > li').first().boundingBox()
          assert.ok(first && first.y < 740, `the first transaction starts ${first?.y} px down`)
        }
        const width = await page.evaluate(() => document.documentElement.scrollWidth)
        assert.ok(width <= 360, `${heading} is ${width} px wide at 360 px`)
        if (heading === 'History' || heading === 'Send') await shoot(page, `phone-${heading.toLowerCase()}`)
      }
      const operator = await open({ width: 360, height: 740 })
      await operator.goto(`${origin}/console/#/operator`)
      await operator.getByLabel('Admin key').fill(ADMIN_KEY)
      await operator.getByRole('button', { name: 'Sign in' }).click()
      for (const link of ['Overview', 'Assets', 'Wallets', 'Journal', 'Verification']) {
        await go(operator, link)
        const width = await operator.evaluate(() => document.documentElement.scrollWidth)
        assert.ok(width <= 360, `operator ${link} is ${width} px wide at 360 px`)
      }
    })

    it(
      'the rest of the tools: assets managed and burned, access taken and handed over, keys, webhook, account',
      { timeout: 180_000 },
      async () => {
        const operator = await open()
        await operator.goto(`${origin}/console/#/operator`)
        await operator.getByLabel('Admin key').fill(ADMIN_KEY)
        await operator.getByRole('button', { name: 'Sign in' }).click()
        await operator.getByRole('heading', { level: 1, name: 'Overview' }).waitFor()
        // An asset created, renamed, revalued; issued to bob, so it cannot be deleted until burned.
        await go(operator, 'Assets')
        await operator.getByLabel('Asset name').fill('silver')
        await operator.getByLabel('Value each').fill('0.25')
        await operator.getByRole('button', { name: 'Create asset' }).click()
        await operator.getByLabel('New name for silver').fill('argent')
        await operator.getByRole('button', { name: 'Rename' }).nth(1).click()
        await operator.getByText('Renamed to argent.').waitFor()
        await operator.getByLabel('New value of argent').fill('3')
        await operator.getByRole('listitem').filter({ hasText: 'argent' }).getByRole('button', { name: 'Set value' }).click()
        await operator.getByText('Value set to 3.').waitFor()
        await go(operator, 'Wallets')
        await operator.getByLabel('Find a wallet').fill(bob)
        // Only once the search has answered: before it, the list shows every wallet.
        await operator
          .getByRole('listitem')
          .filter({ hasText: `owner ${bob}` })
          .getByRole('link')
          .first()
          .click()
        await operator.getByLabel('Asset to issue').selectOption({ label: 'argent' })
        await operator.getByLabel('Quantity to issue').fill('1234567')
        await operator.getByRole('button', { name: 'Issue', exact: true }).click()
        await operator.getByText('Issued 1,234,567 argent').waitFor()
        await go(operator, 'Assets')
        await operator.getByRole('button', { name: 'Delete asset argent' }).click()
        await confirmDialog(operator, 'Delete asset')
        await operator.getByRole('alert').filter({ hasText: 'cannot be deleted while any wallet holds some of it' }).waitFor()
        await go(operator, 'Wallets')
        await operator.getByLabel('Find a wallet').fill(bob)
        // Only once the search has answered: before it, the list shows every wallet.
        await operator
          .getByRole('listitem')
          .filter({ hasText: `owner ${bob}` })
          .getByRole('link')
          .first()
          .click()
        await operator.getByLabel('Asset to burn').selectOption({ label: 'argent (1,234,567 available)' })
        await operator.getByRole('button', { name: 'Burn', exact: true }).click()
        await operator.getByRole('dialog').getByText('1,234,567 argent leave wallet').waitFor()
        await confirmDialog(operator, 'Burn')
        await operator.getByText('Burned 1,234,567 argent').waitFor()
        await go(operator, 'Assets')
        await operator.getByRole('button', { name: 'Delete asset argent' }).click()
        await confirmDialog(operator, 'Delete asset')
        await operator.getByRole('button', { name: 'Delete asset argent' }).waitFor({ state: 'detached' })

        // Alice (signed in again) shares a new wallet with bob, takes his access away, shares again and hands it over.
        const page = await open()
        await signIn(page, alice)
        const shared = `shared${String.fromCharCode(...[...suffix].map((digit) => 97 + Number(digit)))}`
        await go(page, 'Wallets')
        await page.getByLabel('Address (optional)').fill(shared)
        await page.getByRole('button', { name: 'Create wallet' }).click()
        await page.getByRole('button', { name: `Use wallet ${shared}` }).click()
        await page.locator('.who').getByText(shared).waitFor()
        await go(page, 'Sharing')
        await page.getByText('Nobody else may use this wallet.').waitFor()
        await page.getByLabel('Username to share with').fill(bob)
        await page.getByRole('button', { name: 'Share', exact: true }).click()
        await page.getByRole('button', { name: `Remove ${bob}` }).click()
        await confirmDialog(page, 'Remove access')
        await page.getByText(`${bob} can no longer use this wallet.`).waitFor()
        await page.getByLabel('Username to share with').fill('nosuchuser')
        await page.getByRole('button', { name: 'Share', exact: true }).click()
        await page.getByRole('alert').filter({ hasText: 'There is no user with that username.' }).waitFor()
        await page.getByLabel('Username to share with').fill(bob)
        await page.getByRole('button', { name: 'Share', exact: true }).click()
        await page.getByLabel('New owner').selectOption({ label: bob })
        await page.getByRole('button', { name: 'Hand over' }).click()
        await confirmDialog(page, 'Hand over')
        await page.getByText(`${bob} now owns wallet ${shared}.`).waitFor()
        await page.getByText('You are a user of it').waitFor()

        // Keys: two made, all revoked at once (confirmed).
        await go(page, 'Keys')
        for (const name of ['one', 'two']) {
          await page.getByLabel('Key name').fill(name)
          await page.getByRole('button', { name: 'Create key' }).click()
          await page.getByRole('heading', { level: 3, name: name }).waitFor()
        }
        await page.getByRole('button', { name: 'Revoke all keys' }).click()
        await confirmDialog(page, 'Revoke all keys')
        await page.getByText('This wallet has no keys.').waitFor()

        // Webhook: a delivery sent again, then the webhook removed (confirmed).
        await go(page, 'Wallets')
        await page
          .getByRole('button', { name: /^Use wallet [a-z]+$/ })
          .first()
          .click()
        await page.locator('.who').getByText('(primary)').waitFor()
        await go(page, 'Webhook')
        await page.getByLabel('Webhook address').fill('ftp://example.com/hook')
        await page.getByRole('button', { name: 'Set webhook' }).click()
        await page.getByRole('alert').filter({ hasText: 'http:// or https://' }).waitFor()
        await page.getByLabel('Webhook address').fill(`${receiver.url}/second`)
        await page.getByRole('button', { name: 'Set webhook' }).click()
        await page.locator('code.token').waitFor()
        const before = receiver.requests.length
        await send(page, 'Username', bob, '1')
        await receiver.waitFor(before + 1, 10_000)
        await go(page, 'Webhook')
        await page.getByRole('heading', { name: 'Money sent · Delivered' }).waitFor()
        await page
          .getByRole('button', { name: /^Deliver \d+ again$/ })
          .first()
          .click()
        await page.getByText(/will be attempted again now/).waitFor()
        await receiver.waitFor(before + 2, 10_000)
        await page.getByRole('button', { name: 'Remove webhook' }).click()
        await confirmDialog(page, 'Remove webhook')
        await page.getByText('No webhook is set.').waitFor()

        // Account: a second session, on a phone, ended from here; the username and the password changed.
        const other = await open({ width: 360, height: 740 }, ANDROID_CHROME)
        await signIn(other, alice)
        await go(page, 'Account')
        // Each session is named by its browser and system, so a person can tell which one to end.
        await page.getByRole('heading', { name: /^This device: Chrome on / }).waitFor()
        await page.getByRole('heading', { name: 'Chrome on Android' }).waitFor()
        await shoot(page, 'account-sessions')
        await page.getByRole('button', { name: /^End session: Chrome on Android, last used / }).click()
        await page.getByText('Session ended: Chrome on Android.').waitFor()
        await page.getByRole('heading', { name: 'Chrome on Android' }).waitFor({ state: 'detached' })
        await other.evaluate(() => {
          location.hash = '#/history'
        })
        await other.getByText('Your session has ended. Please sign in again.').waitFor()
        await page.getByLabel('New password', { exact: true }).fill('short')
        await page.getByRole('button', { name: 'Change password' }).click()
        await page.getByRole('alert').filter({ hasText: 'A password is 8 to 32 characters long.' }).waitFor()
        await page.getByLabel('New password', { exact: true }).fill('a better password')
        await page.getByLabel('Repeat the new password').fill('a better password')
        await page.getByRole('button', { name: 'Change password' }).click()
        await page.getByText('Your password is changed.').waitFor()
        await page.getByLabel('New username').fill(`${alice}x`)
        await page.getByRole('button', { name: 'Change username' }).click()
        await page.getByText(`Your username is now ${alice}x.`).waitFor()
        await page.locator('.who').getByText(`${alice}x`).waitFor()
        await page.getByRole('button', { name: 'Sign out of this session' }).click()
        await page.getByText('You are signed out.').waitFor()
        await page.getByLabel('Username').fill(`${alice}x`)
        await page.getByLabel('Password').fill(password)
        await page.getByRole('button', { name: 'Sign in' }).click()
        await page.getByRole('alert').filter({ hasText: 'Wrong username or password.' }).waitFor()
        await page.getByLabel('Password').fill('a better password')
        await page.getByRole('button', { name: 'Sign in' }).click()
        await page.getByRole('heading', { level: 1, name: 'Balances' }).waitFor()
        await shoot(page, 'balances-after')
        assert.deepEqual(
          watches.flatMap((w) => w.problems),
          [],
        )
      },
    )

    it('stays within its budget: at most 60 KB of gzipped JavaScript', async () => {
      const dist = path.resolve('console', 'dist', 'assets')
      const scripts = fs.readdirSync(dist).filter((file) => file.endsWith('.js'))
      const gzipped = scripts.reduce((sum, file) => sum + zlib.gzipSync(fs.readFileSync(path.join(dist, file)), { level: 9 }).length, 0)
      console.log(`console JavaScript: ${scripts.length} file(s), ${(gzipped / 1024).toFixed(1)} KB gzipped`)
      assert.ok(gzipped <= 60 * 1024, `${gzipped} bytes gzipped`)
    })
  },
)
