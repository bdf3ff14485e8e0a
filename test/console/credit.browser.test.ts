import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import type { Page } from 'playwright-core'
import { ADMIN_KEY, type TestApp } from '../helpers/app.ts'
import { available, CHROMIUM, consoleBrowser, shoot } from '../helpers/browser.ts'
import { createAsset, createUser, issue, setCredit, transfer, type TestUser } from '../helpers/factories.ts'

/**
 * Credit in Chromium, by role and label: the operator sets a wallet's credit limit on its page,
 * lowers it below what is owed and removes it (each asking first where the debt stays), with C000
 * and bad input refused in words; the holder reads "owes 30 gold" with "can owe up to 100" on
 * Balances and in every picker, and C001 on deleting a wallet that owes; 1280 and 360 px; axe in
 * light and dark. Skipped without a browser unless REQUIRE_BROWSER=1.
 */

describe('the console in a browser: credit', { skip: !available && `no browser at ${CHROMIUM}` }, () => {
  let t: TestApp
  const suffix = `${process.pid % 10000}`
  const b = consoleBrowser()
  const { watches, open, signIn, go, confirmDialog, send } = b
  let gold: { id: number; name: string }
  let points: { id: number; name: string }
  let alice: TestUser
  let bob: TestUser
  let operator: Page
  let dave: TestUser

  before(async () => {
    await b.start()
    t = b.state.t
    gold = await createAsset(t, { name: `gold${suffix}` })
    points = await createAsset(t, { name: `points${suffix}` })
    alice = await createUser(t.app, `alice${suffix}`)
    bob = await createUser(t.app, `bob${suffix}`)
    await issue(t, alice.walletId, gold.id, 20)
    // Points that expire: no wallet can have credit on them (C000).
    const expiring = await t.app.inject({
      method: 'POST',
      url: `/wallets/${bob.walletId}/assets`,
      headers: t.admin,
      payload: { id: points.id, quantity: 5, expires_at: new Date(Date.now() + 86_400_000).toISOString() },
    })
    assert.equal(expiring.statusCode, 201, expiring.body)
  })

  after(() => b.stop())

  async function operatorOn(page: Page, user: TestUser): Promise<void> {
    await page.goto(`${b.state.origin}/console/#/operator`)
    await page.getByLabel('Admin key').fill(ADMIN_KEY)
    await page.getByRole('button', { name: 'Sign in' }).click()
    await go(page, 'Wallets')
    await page.getByLabel('Find a wallet').fill(user.username)
    await page.getByRole('link', { name: user.address }).click()
    await page.getByRole('heading', { level: 1, name: `Wallet ${user.address}` }).waitFor()
  }

  async function setLimit(page: Page, asset: string, limit: string): Promise<void> {
    await page.getByLabel('Asset to give credit on').selectOption({ label: asset })
    await page.getByLabel('Credit limit').fill(limit)
    await page.getByRole('button', { name: 'Set credit limit' }).click()
  }

  /** Alice's holding of gold as the service has it. */
  async function aliceGold(): Promise<{ quantity: number; credit_limit: number }> {
    const response = await t.app.inject({ method: 'GET', url: '/wallet/assets', headers: alice.auth })
    return response.json().find((holding: { asset: { name: string } }) => holding.asset.name === gold.name)
  }

  it('1280 px: the operator gives credit; refusals in words', { timeout: 120_000 }, async () => {
    operator = await open()
    await operatorOn(operator, alice)
    await operator.getByText('No credit on any asset.').waitFor()

    await setLimit(operator, gold.name, 'lots')
    await operator.getByRole('alert').filter({ hasText: 'A credit limit is a whole number, 0 or more.' }).waitFor()
    await setLimit(operator, points.name, '50')
    await operator
      .getByRole('alert')
      .filter({ hasText: `${points.name} has been issued with an expiry date, and credit and expiring units do not mix` })
      .waitFor()
    await operator.getByRole('alert').getByText('code C000').waitFor()

    await setLimit(operator, gold.name, '100')
    await operator
      .getByRole('status')
      .filter({ hasText: `Credit set: ${alice.address} can owe up to 100 ${gold.name}.` })
      .waitFor()
    await operator.locator('ul.credit').getByText(`Can owe up to 100 ${gold.name}`).waitFor()
    await operator.locator('ul.holdings-list').getByText('can owe up to 100').waitFor()
    assert.deepEqual(await aliceGold(), { ...(await aliceGold()), quantity: 20, credit_limit: 100 })
    await shoot(operator, 'operator-credit')
  })

  it('1280 px: the holder spends into credit and reads what it owes, on Balances and in the pickers', { timeout: 120_000 }, async () => {
    const page = await open()
    await signIn(page, alice.username)
    const row = page.getByRole('row', { name: new RegExp(`^${gold.name}`) })
    await row.getByText('can owe up to 100').waitFor()
    await row.getByRole('cell', { name: '120', exact: true }).waitFor()

    await go(page, 'Send')
    const picker = page.getByLabel('Asset 1')
    await picker.locator('option:checked', { hasText: `${gold.name} (120 available)` }).waitFor({ state: 'attached' })
    await send(page, 'Username', bob.username, '50')

    await go(page, 'Balances')
    await row.getByRole('cell', { name: 'owes 30', exact: true }).waitFor()
    await row.getByRole('cell', { name: '70', exact: true }).waitFor()
    await page.getByText(`This wallet owes 30 ${gold.name}; it can owe up to 100.`).waitFor()
    await shoot(page, 'balances-owes')

    await go(page, 'Send')
    await page
      .getByLabel('Asset 1')
      .locator('option:checked', { hasText: `${gold.name} (owes 30, 70 available)` })
      .waitFor({ state: 'attached' })
    await go(page, 'Holds')
    await page
      .getByLabel('Asset to hold')
      .locator('option:checked', { hasText: `${gold.name} (owes 30, 70 available)` })
      .waitFor({ state: 'attached' })
    assert.deepEqual(await aliceGold(), { ...(await aliceGold()), quantity: -30 })
  })

  it('1280 px: lowered below the debt and removed, each asked first; the holder reads it', { timeout: 120_000 }, async () => {
    await operator.reload()
    await operator.getByRole('heading', { level: 1, name: `Wallet ${alice.address}` }).waitFor()
    await operator.locator('ul.holdings-list').getByText(`owes 30 ${gold.name}`).waitFor()
    await operator.locator('ul.credit').getByText(`owes 30 ${gold.name}`).waitFor()

    // Asked first; "Cancel" changes nothing.
    await setLimit(operator, gold.name, '10')
    const dialog = operator.getByRole('dialog', { name: `Lower the credit of ${gold.name} below what is owed?` })
    await dialog.getByText(`${alice.address} owes 30 ${gold.name}, more than the new limit of 10`).waitFor()
    await dialog.getByRole('button', { name: 'Cancel' }).click()
    assert.equal((await aliceGold()).credit_limit, 100)
    await operator.getByRole('button', { name: 'Set credit limit' }).click()
    await confirmDialog(operator, 'Lower the limit')
    await operator
      .getByRole('status')
      .filter({ hasText: `Credit set: ${alice.address} can owe up to 10 ${gold.name}.` })
      .waitFor()

    const page = await open()
    await signIn(page, alice.username)
    await page
      .getByText(`This wallet owes 30 ${gold.name}, more than the 10 it may owe now: it can spend no ${gold.name} until it owes less.`)
      .waitFor()

    await operator.getByRole('button', { name: `Remove credit of ${gold.name}` }).click()
    await operator
      .getByRole('dialog', { name: `Remove the credit of ${gold.name}?` })
      .getByText('it keeps the debt')
      .waitFor()
    await confirmDialog(operator, 'Remove credit')
    await operator
      .getByRole('status')
      .filter({ hasText: `Credit of ${gold.name} removed from ${alice.address}.` })
      .waitFor()
    await operator.getByText('No credit on any asset.').waitFor()
    await operator.locator('ul.holdings-list').getByText(`owes 30 ${gold.name}`).waitFor()
    // Nothing it owes can be burned: the asset is not offered.
    assert.equal(await operator.getByLabel('Asset to burn').count(), 0)
    assert.equal((await aliceGold()).credit_limit, 0)
    await shoot(operator, 'operator-credit-removed')

    await page.reload()
    await page.getByText(`This wallet owes 30 ${gold.name} and has no credit on it any more`).waitFor()
    // Paid back: the debt is gone.
    await transfer(t, bob, alice.username, { [gold.name]: 30 })
    await page.reload()
    await page.getByRole('heading', { level: 1, name: 'Balances' }).waitFor()
    await page.getByText('This wallet holds nothing yet.').waitFor()
    assert.deepEqual(
      watches.flatMap((w) => w.problems),
      [],
    )
  })

  it('a wallet that owes is not deleted: C001 in words', { timeout: 90_000 }, async () => {
    const carol = await createUser(t.app, `carol${suffix}`)
    const made = await t.app.inject({ method: 'POST', url: '/user/wallets', headers: carol.auth, payload: {} })
    assert.equal(made.statusCode, 201, made.body)
    const tab = made.json()
    await setCredit(t, tab.id, gold.id, 40)
    const switched = await t.app.inject({ method: 'PUT', url: '/user/session/wallet', headers: carol.auth, payload: { wallet_id: tab.id } })
    assert.equal(switched.statusCode, 200, switched.body)
    await transfer(t, carol, bob.username, { [gold.name]: 15 })

    const page = await open()
    await signIn(page, carol.username)
    await go(page, 'Wallets')
    await page.getByRole('button', { name: `Delete wallet ${tab.address}` }).click()
    await confirmDialog(page, 'Delete wallet')
    await page.getByRole('alert').filter({ hasText: 'This wallet owes on credit. Pay the debt back before deleting it.' }).waitFor()
    await page.getByRole('alert').getByText('code C001').waitFor()
    const still = await t.app.inject({ method: 'GET', url: `/admin/wallets/${tab.id}`, headers: t.admin })
    assert.equal(still.json().wallet.deleted, false)
  })

  it('360 px: what is owed reads on a phone, and the operator gives credit there', { timeout: 120_000 }, async () => {
    dave = await createUser(t.app, `dave${suffix}`)
    await issue(t, dave.walletId, gold.id, 5)
    const phoneOperator = await open({ width: 360, height: 740 })
    await operatorOn(phoneOperator, dave)
    await setLimit(phoneOperator, gold.name, '1 000')
    await phoneOperator
      .getByRole('status')
      .filter({ hasText: `Credit set: ${dave.address} can owe up to 1,000 ${gold.name}.` })
      .waitFor()
    assert.ok(await phoneOperator.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth), 'no horizontal scroll')
    await shoot(phoneOperator, 'phone-operator-credit')
    await transfer(t, dave, bob.username, { [gold.name]: 25 })

    const phone = await open({ width: 360, height: 740 })
    await signIn(phone, dave.username)
    await phone.getByText(`This wallet owes 20 ${gold.name}; it can owe up to 1,000.`).waitFor()
    await phone.getByText('owes 20', { exact: true }).waitFor()
    assert.ok(await phone.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth), 'no horizontal scroll')
    await shoot(phone, 'phone-balances-owes')
  })

  it('reads well in light and dark: no serious axe violation where credit shows', { timeout: 120_000 }, async () => {
    const balances = await b.axeInEachScheme(async (page) => {
      await signIn(page, dave.username)
      await page.getByText('owes 20', { exact: true }).waitFor()
    })
    const operatorPage = await b.axeInEachScheme(async (page) => {
      await operatorOn(page, dave)
      await page.locator('ul.credit').getByText(`owes 20 ${gold.name}`).waitFor()
    })
    assert.deepEqual([...balances, ...operatorPage], [])
  })
})
