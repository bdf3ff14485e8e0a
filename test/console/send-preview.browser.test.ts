import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import type { Page } from 'playwright-core'
import type { TestApp } from '../helpers/app.ts'
import { available, CHROMIUM, consoleBrowser, shoot } from '../helpers/browser.ts'
import { createAsset, createUser, issue, setCredit, type TestUser } from '../helpers/factories.ts'

/**
 * Send's preview in Chromium, by role and label: before the person presses Send, what the wallet
 * will hold after the transfer ("After this you will hold"), from a dry run of the very request:
 * into credit ("owes 30"), refused in words when it would be, and nothing moved by looking; then
 * the real send. 1280 and 360 px; axe in light and dark. Skipped without a browser unless REQUIRE_BROWSER=1.
 */

describe('the console in a browser: what Send will leave', { skip: !available && `no browser at ${CHROMIUM}` }, () => {
  let t: TestApp
  const suffix = `${process.pid % 10000}`
  const b = consoleBrowser()
  const { watches, open, signIn, go } = b
  let gold: { id: number; name: string }
  let silver: { id: number; name: string }
  let alice: TestUser
  let bob: TestUser

  before(async () => {
    await b.start()
    t = b.state.t
    gold = await createAsset(t, { name: `gold${suffix}` })
    silver = await createAsset(t, { name: `silver${suffix}` })
    alice = await createUser(t.app, `alice${suffix}`)
    bob = await createUser(t.app, `bob${suffix}`)
    await issue(t, alice.walletId, gold.id, 100)
    await issue(t, alice.walletId, silver.id, 10)
    await setCredit(t, alice.walletId, gold.id, 50)
  })

  after(() => b.stop())

  /** Alice's wallet as the service has it: its holdings and how many transactions it has. */
  async function aliceState(): Promise<{ holdings: unknown; transactions: number }> {
    const holdings = await t.app.inject({ method: 'GET', url: '/wallet/assets', headers: alice.auth })
    const transactions = await t.app.inject({ method: 'GET', url: '/wallet/transactions', headers: alice.auth })
    return { holdings: holdings.json(), transactions: transactions.json().length }
  }

  function preview(page: Page) {
    return page.getByRole('region', { name: 'After this you will hold' })
  }

  /** The preview's row of an asset: its name, now, after. */
  async function row(page: Page, asset: string, now: string, then: string): Promise<void> {
    const line = preview(page).getByRole('row', { name: new RegExp(`^${asset}`) })
    await line.getByRole('cell', { name: now, exact: true }).first().waitFor()
    await line.getByRole('cell', { name: then, exact: true }).last().waitFor()
    assert.deepEqual(await line.getByRole('cell').allTextContents(), [now, then])
  }

  it(
    '1280 px: what the wallet will hold, before Send; into credit; refused in words; nothing moved by looking',
    { timeout: 120_000 },
    async () => {
      const page = await open()
      await signIn(page, alice.username)
      await go(page, 'Send')
      const untouched = await aliceState()
      assert.equal(await preview(page).count(), 0, 'no preview of an empty form')

      await page.getByLabel('Username', { exact: true }).fill(bob.username)
      await page.getByLabel('Asset 1').selectOption(gold.name)
      await page.getByLabel('Quantity 1').fill('30')
      await row(page, gold.name, '100', '70')
      await preview(page).getByText('can owe up to 50').waitFor()
      await page.getByRole('button', { name: 'Add another asset' }).click()
      await page.getByLabel('Asset 2').selectOption(silver.name)
      await page.getByLabel('Quantity 2').fill('4')
      await row(page, silver.name, '10', '6')

      // Into credit: the holding after reads as what is owed.
      await page.getByLabel('Quantity 1').fill('130')
      await row(page, gold.name, '100', 'owes 30')
      await shoot(page, 'send-preview')

      // Past the credit: the dry run's refusal, in words.
      await page.getByLabel('Quantity 1').fill('151')
      await preview(page).getByText('As things stand, this would be refused:').waitFor()
      await preview(page).getByText('There is not enough in this wallet for that.').waitFor()
      assert.equal(await preview(page).getByRole('table').count(), 0)
      // An invalid form asks nothing.
      await page.getByLabel('Quantity 1').fill('1.5')
      await preview(page).waitFor({ state: 'detached' })
      assert.deepEqual(await aliceState(), untouched, 'looking moves nothing')

      await page.getByLabel('Quantity 1').fill('130')
      await row(page, gold.name, '100', 'owes 30')
      await page.getByRole('button', { name: 'Send', exact: true }).click()
      await page
        .getByRole('status')
        .filter({ hasText: `Sent 130 ${gold.name}, 4 ${silver.name} to ${bob.username}` })
        .waitFor()
      await preview(page).waitFor({ state: 'detached' })
      const sent = await aliceState()
      assert.equal(sent.transactions, untouched.transactions + 1)
      // The holdings are read again after the send: the choice's label follows once they arrive.
      await page
        .getByLabel('Asset 1')
        .locator('option:checked', { hasText: `${gold.name} (owes 30, 20 available)` })
        .waitFor({ state: 'attached' })
      assert.deepEqual(
        watches.flatMap((w) => w.problems),
        [],
      )
    },
  )

  it('360 px: the preview reads on a phone', { timeout: 90_000 }, async () => {
    const phone = await open({ width: 360, height: 740 })
    await signIn(phone, alice.username)
    await go(phone, 'Send')
    await phone.getByLabel('Username', { exact: true }).fill(bob.username)
    await phone.getByLabel('Asset 1').selectOption(gold.name)
    await phone.getByLabel('Quantity 1').fill('15')
    await row(phone, gold.name, 'owes 30', 'owes 45')
    assert.ok(await phone.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth), 'no horizontal scroll')
    await shoot(phone, 'phone-send-preview')
  })

  it('reads well in light and dark: no serious axe violation on Send with its preview', { timeout: 90_000 }, async () => {
    const found = await b.axeInEachScheme(async (page) => {
      await signIn(page, alice.username)
      await go(page, 'Send')
      await page.getByLabel('Username', { exact: true }).fill(bob.username)
      await page.getByLabel('Asset 1').selectOption(silver.name)
      await page.getByLabel('Quantity 1').fill('1')
      await row(page, silver.name, '6', '5')
    })
    assert.deepEqual(found, [])
  })
})
