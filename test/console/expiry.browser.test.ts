import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import type { Page } from 'playwright-core'
import { ADMIN_KEY, type TestApp } from '../helpers/app.ts'
import { available, CHROMIUM, consoleBrowser, shoot } from '../helpers/browser.ts'
import { createAsset, createUser, type TestUser } from '../helpers/factories.ts'

/**
 * Expiring units in Chromium: the operator issues with an end date, the holder reads "12 expire on
 * 3 March" on Balances (1280 and 360 px), and once the service's clock is moved past the end date
 * History and the journal say the units expired, in words. Skipped without a browser unless REQUIRE_BROWSER=1.
 */

const DAY = 86_400_000

describe('the console in a browser: expiring units', { skip: !available && `no browser at ${CHROMIUM}` }, () => {
  let t: TestApp
  let offset = 0
  const clock = () => new Date(Date.now() + offset).toISOString()
  const suffix = `${process.pid % 10000}`
  const b = consoleBrowser()
  const { watches, open, signIn, go } = b
  let points: { id: number; name: string }
  let erin: TestUser
  let operator: Page
  let expiresAt: Date

  before(async () => {
    // The service's clock is the one the test moves; the expiry job runs every second.
    await b.start({ HOLD_EXPIRY_INTERVAL_MS: '500' }, { clock })
    t = b.state.t
    points = await createAsset(t, { name: `points${suffix}` })
    erin = await createUser(t.app, `erin${suffix}`)
  })

  after(() => b.stop())

  /** "March 3", or "Mar 3, 2027" when not this year: as the console writes an expiry's day, in en-US. */
  function expiryDay(date: Date): string {
    return date.getFullYear() === new Date().getFullYear()
      ? new Intl.DateTimeFormat('en-US', { day: 'numeric', month: 'long' }).format(date)
      : new Intl.DateTimeFormat('en-US', { dateStyle: 'medium' }).format(date)
  }

  /** A moment as a `datetime-local` input takes it, in the browser's (and this process's) time zone. */
  function localMinute(date: Date): string {
    return new Date(date.getTime() - date.getTimezoneOffset() * 60_000).toISOString().slice(0, 16)
  }

  it('1280 px: the operator issues with an end date; the holder reads what expires and when', { timeout: 120_000 }, async () => {
    operator = await open()
    await operator.goto(`${b.state.origin}/console/#/operator`)
    await operator.getByLabel('Admin key').fill(ADMIN_KEY)
    await operator.getByRole('button', { name: 'Sign in' }).click()
    await go(operator, 'Wallets')
    await operator.getByLabel('Find a wallet').fill(erin.username)
    await operator.getByRole('link', { name: erin.address }).click()
    await operator.getByRole('heading', { level: 1, name: `Wallet ${erin.address}` }).waitFor()
    await operator.getByLabel('Asset to issue').selectOption({ label: points.name })

    // An end date less than a minute ahead is refused, in words, and nothing is issued.
    await operator.getByLabel('Quantity to issue').fill('12')
    await operator.getByLabel('Expires (optional)').fill(localMinute(new Date()))
    await operator.getByRole('button', { name: 'Issue', exact: true }).click()
    await operator.getByRole('alert').filter({ hasText: 'Some of what you entered is not valid.' }).waitFor()

    expiresAt = new Date(Date.now() + 3 * DAY)
    expiresAt.setHours(10, 0, 0, 0)
    await operator.getByLabel('Expires (optional)').fill(localMinute(expiresAt))
    await operator.getByRole('button', { name: 'Issue', exact: true }).click()
    await operator
      .getByRole('status')
      .filter({ hasText: `Issued 12 ${points.name} to ${erin.address}, expiring on ${expiryDay(expiresAt)}.` })
      .waitFor()
    await operator.getByLabel('Quantity to issue').fill('30')
    await operator.getByRole('button', { name: 'Issue', exact: true }).click()
    await operator
      .getByRole('status')
      .filter({ hasText: `Issued 30 ${points.name} to ${erin.address}.` })
      .waitFor()
    await shoot(operator, 'operator-issue-expiring')
    const issued = await t.app.inject({ method: 'GET', url: '/wallet/assets', headers: erin.auth })
    assert.deepEqual(issued.json().find((holding: { asset: { name: string } }) => holding.asset.name === points.name).expiring, [
      { quantity: 12, expires_at: expiresAt.toISOString() },
    ])

    const page = await open()
    await signIn(page, erin.username)
    const row = page.getByRole('row', { name: new RegExp(`^${points.name}`) })
    await row.getByText(`12 expire on ${expiryDay(expiresAt)}`).waitFor()
    await row.getByRole('cell', { name: '42', exact: true }).waitFor()
    await shoot(page, 'balances-expiring')
    assert.deepEqual(
      watches.flatMap((w) => w.problems),
      [],
    )
  })

  it('360 px: what expires reads on a phone', { timeout: 60_000 }, async () => {
    const phone = await open({ width: 360, height: 740 })
    await signIn(phone, erin.username)
    await phone.getByText(`12 expire on ${expiryDay(expiresAt)}`).waitFor()
    assert.ok(await phone.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth), 'no horizontal scroll')
    await shoot(phone, 'phone-balances-expiring')
  })

  it(
    'after the end date: the units are gone from the balances, and History and the journal say they expired',
    { timeout: 120_000 },
    async () => {
      const page = await open()
      await signIn(page, erin.username)
      await page.getByText(`12 expire on ${expiryDay(expiresAt)}`).waitFor()
      // The service's clock moves past the end date: the expiry is written, and the balances follow live.
      offset = expiresAt.getTime() - Date.now() + 60_000
      const row = page.getByRole('row', { name: new RegExp(`^${points.name}`) })
      await row.getByRole('cell', { name: '30', exact: true }).waitFor({ timeout: 30_000 })
      assert.equal(await page.getByText(/ expire on /).count(), 0)

      await go(page, 'History')
      const expiry = page.getByRole('rowgroup').filter({ hasText: 'Expired, back to mint' })
      await expiry.getByText(`−12 ${points.name}`).waitFor()
      await b.openDetails(expiry)
      await expiry.getByRole('region').getByText('Expired, back to mint').first().waitFor()
      await shoot(page, 'history-expired')
      const phone = await open({ width: 360, height: 740 })
      await signIn(phone, erin.username)
      await go(phone, 'History')
      // On a phone, compact rows: the kind in words beside the amount.
      await phone.getByRole('listitem').filter({ hasText: 'Expired, back to mint' }).getByText(`−12 ${points.name}`).waitFor()
      await shoot(phone, 'phone-history-expired')

      await go(operator, 'Journal')
      await operator.getByRole('rowgroup').filter({ hasText: 'Expired, back to mint' }).filter({ hasText: points.name }).first().waitFor()
      assert.deepEqual(
        watches.flatMap((w) => w.problems),
        [],
      )
    },
  )
})
