import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import type { Locator, Page } from 'playwright-core'
import type { TestApp } from '../helpers/app.ts'
import { available, CHROMIUM, consoleBrowser, shoot } from '../helpers/browser.ts'
import { createAsset, createUser, issue, type TestUser } from '../helpers/factories.ts'

/**
 * Wallet keys with scopes and limits in Chromium, by role and label: keys made from presets a
 * person understands ("Read only", "Can send up to an amount a day", "Can pay only these wallets")
 * and from scopes and caps chosen one by one; each key's scopes and limits read back in words, and
 * what a key used against its daily cap ("used 40 of 100 gold in the last 24 hours"), live as the
 * key sends; bad input refused in words with no key made; a phone at 360 px; axe in light and dark.
 * Skipped without a browser unless REQUIRE_BROWSER=1.
 */

describe('the console in a browser: wallet keys with scopes and limits', { skip: !available && `no browser at ${CHROMIUM}` }, () => {
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
    await issue(t, alice.walletId, gold.id, 500)
    await issue(t, alice.walletId, silver.id, 50)
  })

  after(() => b.stop())

  /** The keys of alice's wallet as the service has them. */
  async function keys(): Promise<{ name: string; scopes: string[]; limits: Record<string, unknown>; used: Record<string, number> }[]> {
    const response = await t.app.inject({ method: 'GET', url: '/wallet/sessions', headers: alice.auth })
    assert.equal(response.statusCode, 200, response.body)
    return response.json()
  }

  /** Creates a key from the form as it is filled; answers its token, shown once. */
  async function create(page: Page): Promise<string> {
    // The new key's own secret: the previous key's may still be on screen for a moment.
    const name = await page.getByLabel('Key name').inputValue()
    await page.getByRole('button', { name: 'Create key' }).click()
    const secret = page.getByRole('group', { name: `Key “${name || 'unnamed'}” is shown only now` })
    await secret.waitFor()
    return (await secret.locator('code').textContent()) as string
  }

  function card(page: Page, name: string): Locator {
    return page.locator('ul.keys > li').filter({ has: page.getByRole('heading', { level: 3, name, exact: true }) })
  }

  async function noSideScroll(page: Page): Promise<void> {
    assert.ok(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth), 'no horizontal scroll')
  }

  it('1280 px: keys from presets, read back in words, and what a key used against its daily cap, live', { timeout: 150_000 }, async () => {
    const page = await open()
    await signIn(page, alice.username)
    await go(page, 'Keys')
    await page.getByText('This wallet has no keys.').waitFor()

    // Read only: the default choice.
    await page.getByLabel('Key name').fill('dashboard')
    assert.ok(await page.getByLabel('Read only').isChecked())
    await create(page)
    const dashboard = card(page, 'dashboard')
    await dashboard.getByText('Can see balances, history and holds', { exact: true }).waitFor()
    assert.equal(await dashboard.getByText(/No limits/).count(), 0, 'a key that moves nothing has no limits to speak of')

    // Up to an amount a day: gold only; silver may not be sent at all.
    await page.getByLabel('Key name').fill('tip bot')
    await page.getByLabel('Can send up to an amount a day').check()
    await page.getByLabel('Asset it may send 1').selectOption(gold.name)
    await page.getByLabel('Most in 24 hours 1').fill('100')
    const token = await create(page)
    const tipBot = card(page, 'tip bot')
    await tipBot.getByText('Can see balances, history and holds · send and refund', { exact: true }).waitFor()
    await tipBot.getByText(`used 0 of 100 ${gold.name} in the last 24 hours`).waitFor()
    await tipBot.getByText(`May not send ${silver.name}`).waitFor()
    const stored = (await keys()).find((key) => key.name === 'tip bot')
    assert.deepEqual(stored?.scopes, ['read', 'send'])
    assert.deepEqual(stored?.limits, { per_day: { [gold.name]: 100, [silver.name]: 0 } })

    // The bot sends 40 through its key: the screen follows live.
    const sent = await t.app.inject({
      method: 'POST',
      url: '/wallet/transactions',
      headers: { authorization: `Bearer ${token}` },
      payload: { recipient: bob.username, assets: { [gold.name]: 40 } },
    })
    assert.equal(sent.statusCode, 201, sent.body)
    await tipBot.getByText(`used 40 of 100 ${gold.name} in the last 24 hours`).waitFor()
    assert.equal(await tipBot.getByRole('meter', { name: `${gold.name} used in the last 24 hours` }).getAttribute('value'), '40')
    const silverSent = await t.app.inject({
      method: 'POST',
      url: '/wallet/transactions',
      headers: { authorization: `Bearer ${token}` },
      payload: { recipient: bob.username, assets: { [silver.name]: 1 } },
    })
    assert.equal(silverSent.json().code, 'K001')

    // Only these wallets.
    await page.getByLabel('Key name').fill('supplier till')
    await page.getByLabel('Can pay only these wallets').check()
    await page.getByLabel('Wallet ids it may pay').fill(`${bob.walletId}, ${bob.walletId}`)
    await create(page)
    await card(page, 'supplier till').getByText(`Pays only wallet ${bob.walletId}`).waitFor()

    // Scopes and caps chosen one by one.
    await page.getByLabel('Key name').fill('game server')
    await page.getByLabel('Choose what it may do and its limits').check()
    await page.getByLabel('Place, capture and void holds').uncheck()
    await page.getByLabel('Schedule payments').check()
    await page.getByRole('button', { name: 'Add a cap' }).click()
    await page.getByLabel('Asset of cap 1').selectOption(gold.name)
    await page.getByLabel('Most per transfer 1').fill('10')
    await page.getByLabel('Most in 24 hours 1').fill('1 000')
    await shoot(page, 'keys-custom')
    await create(page)
    const server = card(page, 'game server')
    await server.getByText('Can see balances, history and holds · send and refund · schedule payments', { exact: true }).waitFor()
    await server.getByText(`At most 10 ${gold.name} per transfer`).waitFor()
    await server.getByText(`used 0 of 1,000 ${gold.name} in the last 24 hours`).waitFor()
    assert.deepEqual((await keys()).find((key) => key.name === 'game server')?.limits, {
      per_transfer: { [gold.name]: 10 },
      per_day: { [gold.name]: 1000 },
    })

    // Everything a key could do before, without limits, says so.
    await page.getByLabel('Key name').fill('old style')
    await page.getByLabel('Choose what it may do and its limits').check()
    await create(page)
    await card(page, 'old style').getByText('No limits: it may move anything the wallet can spend, to anyone.').waitFor()
    await shoot(page, 'keys')

    // Revoked: gone from the list.
    await card(page, 'old style').getByRole('button', { name: 'Revoke key “old style”' }).click()
    await b.confirmDialog(page, 'Revoke key')
    await page.getByRole('status').filter({ hasText: 'Key “old style” revoked.' }).waitFor()
    assert.equal(await card(page, 'old style').count(), 0)
    assert.deepEqual(
      watches.flatMap((w) => w.problems),
      [],
    )
  })

  it('bad input is refused in words, and no key is made', { timeout: 120_000 }, async () => {
    const page = await open()
    await signIn(page, alice.username)
    await go(page, 'Keys')
    await card(page, 'tip bot').waitFor()
    const before = (await keys()).length
    const refusal = (text: string) => page.getByRole('alert').filter({ hasText: text }).waitFor()

    await page.getByLabel('Key name').fill('broken')
    await page.getByLabel('Can pay only these wallets').check()
    await page.getByRole('button', { name: 'Create key' }).click()
    await refusal('Enter at least one wallet id it may pay.')
    await page.getByLabel('Wallet ids it may pay').fill('12, bob')
    await page.getByRole('button', { name: 'Create key' }).click()
    await refusal('“bob” is not a wallet id: wallet ids are whole numbers like 12.')
    await page.getByLabel('Wallet ids it may pay').fill(Array.from({ length: 101 }, (_, i) => i + 1).join(' '))
    await page.getByRole('button', { name: 'Create key' }).click()
    await refusal('A key may pay at most 100 wallets.')
    // The service's refusal: no such wallet (W000), in this screen's words.
    await page.getByLabel('Wallet ids it may pay').fill('999999')
    await page.getByRole('button', { name: 'Create key' }).click()
    await refusal('A wallet it may pay does not exist or was deleted: check the wallet ids. No key was created.')
    await page.getByRole('alert').getByText('code W000').waitFor()

    await page.getByLabel('Can send up to an amount a day').check()
    await page.getByRole('button', { name: 'Create key' }).click()
    await refusal(`Enter the most it may send of ${gold.name} in 24 hours.`)
    await page.getByLabel('Most in 24 hours 1').fill('-5')
    await page.getByRole('button', { name: 'Create key' }).click()
    await refusal(`The most in 24 hours of ${gold.name} is a whole number, 0 or more.`)
    await page.getByRole('button', { name: 'Add another asset' }).click()
    await page.getByLabel('Asset it may send 2').selectOption(gold.name)
    await page.getByLabel('Most in 24 hours 1').fill('5')
    await page.getByLabel('Most in 24 hours 2').fill('5')
    await page.getByRole('button', { name: 'Create key' }).click()
    await refusal(`${gold.name} is on two lines: put it on one.`)
    await page.getByRole('button', { name: 'Remove limit 2' }).click()

    // An asset deleted since the screen was opened: the service's I001, in words.
    const copper = await createAsset(t, { name: `copper${suffix}` })
    await page.reload()
    await page.getByRole('heading', { level: 1, name: 'Keys' }).waitFor()
    await page.getByLabel('Key name').fill('broken')
    await page.getByLabel('Can send up to an amount a day').check()
    await page.getByLabel('Asset it may send 1').selectOption(copper.name)
    await page.getByLabel('Most in 24 hours 1').fill('5')
    const deleted = await t.app.inject({ method: 'DELETE', url: `/assets/${copper.id}`, headers: t.admin })
    assert.equal(deleted.statusCode, 204, deleted.body)
    await page.getByRole('button', { name: 'Create key' }).click()
    await refusal('A limit names an asset that does not exist (any more). No key was created.')

    await page.getByLabel('Choose what it may do and its limits').check()
    for (const scope of ['See balances, history and holds', 'Send and refund', 'Place, capture and void holds'])
      await page.getByLabel(scope).uncheck()
    await page.getByRole('button', { name: 'Create key' }).click()
    await refusal('Tick at least one thing the key may do.')
    await page.getByLabel('Send and refund').check()
    await page.getByRole('button', { name: 'Add a cap' }).click()
    await page.getByRole('button', { name: 'Create key' }).click()
    await refusal('Line 1 has no cap: enter the most per transfer, the most in 24 hours, or both.')
    await page.getByLabel('Most per transfer 1').fill('1.5')
    await page.getByRole('button', { name: 'Create key' }).click()
    await refusal(`The most per transfer of ${gold.name} is a whole number, 0 or more.`)
    await shoot(page, 'keys-refused')

    assert.equal((await keys()).length, before, 'no key was made')
  })

  it('360 px: a key made and read on a phone', { timeout: 90_000 }, async () => {
    const phone = await open({ width: 360, height: 740 })
    await signIn(phone, alice.username)
    await go(phone, 'Keys')
    await card(phone, 'tip bot').getByText(`used 40 of 100 ${gold.name} in the last 24 hours`).waitFor()
    await phone.getByLabel('Key name').fill('phone bot')
    await phone.getByLabel('Choose what it may do and its limits').check()
    await phone.getByRole('button', { name: 'Add a cap' }).click()
    await phone.getByLabel('Most in 24 hours 1').fill('25')
    await noSideScroll(phone)
    await shoot(phone, 'phone-keys-custom')
    await create(phone)
    await card(phone, 'phone bot').getByText(`used 0 of 25 ${gold.name} in the last 24 hours`).waitFor()
    await noSideScroll(phone)
    await shoot(phone, 'phone-keys')
  })

  it('reads well in light and dark: no serious axe violation on the keys screen', { timeout: 90_000 }, async () => {
    const found = await b.axeInEachScheme(async (page) => {
      await signIn(page, alice.username)
      await go(page, 'Keys')
      await card(page, 'tip bot').waitFor()
      await page.getByLabel('Choose what it may do and its limits').check()
      await page.getByRole('button', { name: 'Add a cap' }).click()
    })
    assert.deepEqual(found, [])
  })
})
