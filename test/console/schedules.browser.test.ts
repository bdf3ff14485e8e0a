import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import axeCore from 'axe-core'
import type { Page } from 'playwright-core'
import { ADMIN_KEY, type TestApp } from '../helpers/app.ts'
import { available, CHROMIUM, consoleBrowser, shoot } from '../helpers/browser.ts'
import { createAsset, createUser, issue, type TestUser } from '../helpers/factories.ts'

/**
 * Scheduled payments in Chromium, by role and label: a monthly payment made in words and read back
 * ("every month on the 1st at 09:00 AM, Europe/Paris"), its next runs, paused, resumed and
 * cancelled; runs that paid and runs refused, in words, live; the operator's schedules in
 * trouble; a phone at 360 px; axe in light and dark. Skipped without a browser unless REQUIRE_BROWSER=1.
 */

const DAY = 86_400_000

describe('the console in a browser: scheduled payments', { skip: !available && `no browser at ${CHROMIUM}` }, () => {
  let t: TestApp
  const suffix = `${process.pid % 10000}`
  const b = consoleBrowser()
  const { watches, open, signIn, go, confirmDialog } = b
  let gold: { id: number; name: string }
  let alice: TestUser
  let bob: TestUser
  let troubled = 0

  before(async () => {
    await b.start()
    t = b.state.t
    gold = await createAsset(t, { name: `gold${suffix}` })
    alice = await createUser(t.app, `alice${suffix}`)
    bob = await createUser(t.app, `bob${suffix}`)
    await issue(t, alice.walletId, gold.id, 25)
    await issue(t, bob.walletId, gold.id, 100)
  })

  after(() => b.stop())

  /** Fills the form's recipient, asset and quantity. */
  async function payTo(page: Page, username: string, quantity: string, memo = ''): Promise<void> {
    await page.getByLabel('Pay to a').selectOption({ label: 'Username' })
    await page.getByLabel('Username', { exact: true }).fill(username)
    await page.getByLabel('Asset', { exact: true }).selectOption(gold.name)
    await page.getByLabel('Quantity', { exact: true }).fill(quantity)
    await page.getByLabel('Memo (optional)').fill(memo)
  }

  async function scheduled(page: Page): Promise<number> {
    const done = await page.getByRole('status').filter({ hasText: 'Scheduled payment ' }).textContent()
    return Number(/Scheduled payment (\d+):/.exec(done ?? '')?.[1])
  }

  /** The wall clock of an instant in a zone: "1 09:00" (day of the month, 24-hour time). */
  function wall(iso: string, zone: string): string {
    const parts = Object.fromEntries(
      new Intl.DateTimeFormat('en-US', { timeZone: zone, day: 'numeric', hour: '2-digit', minute: '2-digit', hourCycle: 'h23' })
        .formatToParts(new Date(iso))
        .map((part) => [part.type, part.value]),
    )
    return `${parts.day} ${parts.hour}:${parts.minute}`
  }

  async function noSideScroll(page: Page): Promise<void> {
    assert.ok(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth), 'no horizontal scroll')
  }

  it('1280 px: a monthly payment in words, its next runs, paused, resumed and cancelled', { timeout: 150_000 }, async () => {
    const page = await open()
    await signIn(page, alice.username)
    await go(page, 'Schedules', 'Scheduled payments')
    await page.getByText('No scheduled payments yet.').waitFor()

    // Refused before anything is sent: a first payment in the past; then by the service, in words: no such user.
    await payTo(page, bob.username, '10', 'allowance')
    await page.getByLabel('Repeats').selectOption({ label: 'Every month' })
    await page.getByLabel('First payment').fill('2020-01-01T09:00')
    await page.getByRole('button', { name: 'Schedule payment' }).click()
    await page.getByRole('alert').filter({ hasText: 'The first payment is in the past: choose now or a later time.' }).waitFor()
    const now = new Date()
    const next = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1))
    const month = `${next.getUTCFullYear()}-${String(next.getUTCMonth() + 1).padStart(2, '0')}`
    await page.getByLabel('First payment').fill(`${month}-01T09:00`)
    await page.getByLabel('Time zone').selectOption('Europe/Paris')
    await page.getByLabel('Ends').selectOption({ label: 'After a number of payments' })
    await page.getByLabel('Number of payments').fill('12')
    // The calendar is read back in a sentence before it is saved.
    const monthName = new Intl.DateTimeFormat('en-US', { month: 'long', timeZone: 'UTC' }).format(next)
    const sentence = `Every month on the 1st at 09:00 AM, Europe/Paris, from ${monthName} 1, ${next.getUTCFullYear()}, 12 times`
    await page.getByText(`Runs: ${sentence}.`).waitFor()
    await page.getByLabel('Username', { exact: true }).fill(`nosuchuser${suffix}`)
    await page.getByRole('button', { name: 'Schedule payment' }).click()
    await page.getByRole('alert').filter({ hasText: 'There is no user with that username.' }).waitFor()
    await page.getByLabel('Username', { exact: true }).fill(bob.username)
    await page.getByRole('button', { name: 'Schedule payment' }).click()
    const id = await scheduled(page)
    await page
      .getByRole('status')
      .filter({ hasText: `Scheduled payment ${id}: 10 ${gold.name} to ${bob.username}. ${sentence}.` })
      .waitFor()
    // At 1280 px the list is a table: the payment, its calendar, its next run, its runs, its status.
    const row = page
      .getByRole('table', { name: 'Scheduled payments, newest first' })
      .getByRole('row')
      .filter({ hasText: `${id}` })
    await row.getByText(sentence).waitFor()
    await row.getByText('Not run yet').waitFor()
    await row.getByText('Active', { exact: true }).waitFor()
    await shoot(page, 'schedules')

    // Its page: what and when, and the next five runs, each the 1st at 09:00 in Paris, summer or winter.
    await row.getByRole('link', { name: `Scheduled payment ${id}` }).click()
    await page.getByRole('heading', { level: 1, name: `Scheduled payment ${id}` }).waitFor()
    const upcoming = page.getByRole('region', { name: 'Next runs' })
    await upcoming.getByRole('listitem').nth(4).waitFor()
    const runs = await upcoming.locator('time').evaluateAll((times) => times.map((time) => time.getAttribute('datetime') as string))
    assert.equal(runs.length, 5)
    assert.deepEqual(
      runs.map((run) => wall(run, 'Europe/Paris')),
      runs.map(() => '1 09:00'),
    )
    const answered = await t.app.inject({ method: 'GET', url: `/wallet/schedules/${id}/upcoming?count=5`, headers: alice.auth })
    assert.deepEqual(runs, answered.json().runs)
    await upcoming.getByText('in Europe/Paris time').waitFor()
    await page.getByRole('region', { name: 'Runs so far' }).getByText('It has not run yet.').waitFor()
    await shoot(page, 'schedule-detail')

    // Paused: nothing ahead; resumed: the next run again; cancelled (confirmed) for good.
    await page.getByRole('button', { name: 'Pause', exact: true }).click()
    await page
      .getByRole('status')
      .filter({ hasText: `Scheduled payment ${id} is paused` })
      .waitFor()
    await upcoming.getByText('No runs ahead: it is not active.').waitFor()
    await page.getByRole('definition').filter({ hasText: 'Paused' }).waitFor()
    await page.getByRole('button', { name: 'Resume' }).click()
    await page
      .getByRole('status')
      .filter({ hasText: `Scheduled payment ${id} is active again; next run ` })
      .waitFor()
    await upcoming.getByRole('listitem').nth(4).waitFor()
    await page.getByRole('button', { name: 'Cancel schedule' }).click()
    await page.getByRole('dialog').getByText('It never runs again.').waitFor()
    await confirmDialog(page, 'Cancel schedule')
    await page
      .getByRole('status')
      .filter({ hasText: `Scheduled payment ${id} is cancelled.` })
      .waitFor()
    await page.getByRole('definition').filter({ hasText: 'Cancelled' }).waitFor()
    assert.equal(await page.getByRole('button', { name: /^(Pause|Resume|Cancel schedule)$/ }).count(), 0)
    // The list's filter by status, as a chip.
    await page.getByRole('link', { name: 'All scheduled payments' }).click()
    await b.openFilters(page)
    await page.getByLabel('Status', { exact: true }).selectOption({ label: 'Active' })
    await page.getByText('No scheduled payments match this filter.').waitFor()
    await page.getByRole('button', { name: 'Remove filter Status: Active' }).click()
    await page.getByRole('link', { name: `Scheduled payment ${id}` }).waitFor()
    assert.deepEqual(
      watches.flatMap((w) => w.problems),
      [],
    )
  })

  it(
    '1280 px: runs paid and refused, in words and live; paused after three refusals; the operator sees it',
    { timeout: 150_000 },
    async () => {
      const page = await open()
      await signIn(page, alice.username)
      const history = await open()
      await signIn(history, alice.username)
      await go(history, 'History')
      await history.getByText('Live: new transactions appear by themselves.').waitFor()
      await go(page, 'Schedules', 'Scheduled payments')
      await payTo(page, bob.username, '10', 'daily')
      await page.getByLabel('Repeats').selectOption({ label: 'Every day' })
      await page.getByLabel('Time zone').selectOption('UTC')
      await page.getByLabel('First payment').fill(new Date(Date.now() + 3 * 60_000).toISOString().slice(0, 16))
      await page.getByLabel('Ends').selectOption({ label: 'Never (until cancelled)' })
      await page.getByRole('button', { name: 'Schedule payment' }).click()
      const id = await scheduled(page)
      troubled = id
      await page
        .getByRole('status')
        .getByRole('link', { name: `Scheduled payment ${id}` })
        .click()
      await page.getByRole('heading', { level: 1, name: `Scheduled payment ${id}` }).waitFor()
      await page.getByText('Live: new transactions appear by themselves.').waitFor()

      // As if the service had been down for five days: the five due runs catch up, in order. Alice
      // holds 25: two pay, three are refused, and three refusals in a row pause it.
      const row = await t.database.db
        .selectFrom('schedules')
        .select(['start_at', 'next_run_at'])
        .where('id', '=', id)
        .executeTakeFirstOrThrow()
      const back = (iso: string | null) => (iso === null ? null : new Date(Date.parse(iso) - 5 * DAY).toISOString())
      await t.database.db
        .updateTable('schedules')
        .set({ start_at: back(row.start_at) as string, next_run_at: back(row.next_run_at) })
        .where('id', '=', id)
        .execute()
      const facts = page.locator('dl.facts')
      await facts.getByText('5 runs: 2 paid, 3 refused').waitFor({ timeout: 30_000 })
      await facts.getByText('Paused', { exact: true }).waitFor()
      await page.getByText('Paused after its runs were refused. Make sure the wallet holds enough, then resume it.').waitFor()
      const runs = page.getByRole('region', { name: 'Runs so far' })
      await runs.getByText('3 runs were refused in all.').waitFor()
      // Each run in words, the latest first: three refused, then two that paid.
      const refused = runs.getByRole('listitem').filter({ hasText: /refused, nothing moved/ })
      await refused.nth(2).waitFor()
      assert.equal(await refused.count(), 3)
      assert.equal(await refused.filter({ hasText: 'There is not enough in this wallet for that.' }).count(), 3)
      await refused.first().getByText(`wallet holds 5 of ${gold.name}, 10 requested`, { exact: false }).waitFor()
      assert.equal(
        await runs
          .getByRole('listitem')
          .filter({ hasText: `paid 10 ${gold.name} to ${bob.username} (transaction ` })
          .count(),
        2,
      )
      assert.equal(await page.getByText('(code ').count(), 0, 'a refusal is said in words, not as a code')
      await shoot(page, 'schedule-refused')
      // History, open all along, followed the runs live (the schedule's own events did not stop it).
      await history.getByText(`New: sent 10 ${gold.name} to ${bob.username}.`).waitFor()
      await history.getByText('Live: new transactions appear by themselves.').waitFor()

      // The operator sees it among the schedules in trouble, and why, in words.
      const operator = await open()
      await operator.goto(`${b.state.origin}/console/#/operator`)
      await operator.getByLabel('Admin key').fill(ADMIN_KEY)
      await operator.getByRole('button', { name: 'Sign in' }).click()
      await go(operator, 'Schedules', 'Schedules in trouble')
      const card = operator.getByRole('listitem').filter({ hasText: `schedule ${id} ` })
      await card.getByText(`Wallet ${alice.walletId}: 10 ${gold.name} to ${bob.username}`).waitFor()
      await card.getByText('Paused', { exact: true }).waitFor()
      await card.getByText('There is not enough in this wallet for that.').waitFor()
      await card.getByText('Every day at ').waitFor()
      await shoot(operator, 'operator-schedules')
      await card.getByRole('link', { name: `Wallet ${alice.walletId}` }).click()
      await operator.getByRole('heading', { level: 1, name: `Wallet ${alice.address}` }).waitFor()

      // Funded again, alice resumes it: the next run is the next day's from now on, none of the missed ones.
      await issue(t, alice.walletId, gold.id, 100)
      await page.getByRole('button', { name: 'Resume' }).click()
      await page
        .getByRole('status')
        .filter({ hasText: `Scheduled payment ${id} is active again; next run ` })
        .waitFor()
      await page.getByRole('region', { name: 'Next runs' }).getByRole('listitem').nth(4).waitFor()
      const resumed = await t.app.inject({ method: 'GET', url: `/wallet/schedules/${id}`, headers: alice.auth })
      assert.equal(resumed.json().runs, 5)
      assert.ok(Date.parse(resumed.json().next_run_at) > Date.now())
      assert.deepEqual(
        watches.flatMap((w) => w.problems),
        [],
      )
    },
  )

  it('360 px: a one-off payment scheduled and read on a phone; the operator’s list too', { timeout: 120_000 }, async () => {
    const phone = await open({ width: 360, height: 740 })
    await signIn(phone, bob.username)
    await go(phone, 'Schedules', 'Scheduled payments')
    await payTo(phone, alice.username, '7', 'once')
    await phone.getByLabel('Repeats').selectOption({ label: 'Only once' })
    await phone.getByLabel('Time zone').selectOption('America/New_York')
    assert.equal(await phone.getByLabel('Ends').count(), 0, 'a one-off has no end to choose')
    const first = new Date(Date.now() + 2 * DAY)
    const wallClock = new Intl.DateTimeFormat('sv-SE', { timeZone: 'America/New_York', dateStyle: 'short' }).format(first)
    await phone.getByLabel('First payment').fill(`${wallClock}T18:30`)
    const day = new Intl.DateTimeFormat('en-US', { dateStyle: 'long', timeZone: 'UTC' }).format(new Date(`${wallClock}T12:00:00Z`))
    await phone.getByText(`Runs: Once, on ${day} at 06:30 PM, America/New_York.`).waitFor()
    await phone.getByRole('button', { name: 'Schedule payment' }).click()
    const id = await scheduled(phone)
    await noSideScroll(phone)
    // On a phone the list is compact rows, not a table.
    assert.equal(await phone.getByRole('table').count(), 0)
    const item = phone.getByRole('listitem').filter({ hasText: `Scheduled payment ${id}: 7 ${gold.name} to ${alice.username}` })
    await item.getByText(`Once, on ${day} at 06:30 PM, America/New_York.`).waitFor()
    await item.getByText(/^Next run /).waitFor()
    await shoot(phone, 'phone-schedules')
    await item.getByRole('link', { name: `Scheduled payment ${id}` }).click()
    await phone.getByRole('heading', { level: 1, name: `Scheduled payment ${id}` }).waitFor()
    const upcoming = phone.getByRole('region', { name: 'Next runs' })
    await upcoming.getByRole('listitem').first().waitFor()
    assert.equal(await upcoming.getByRole('listitem').count(), 1)
    await noSideScroll(phone)
    await shoot(phone, 'phone-schedule-detail')

    const operator = await open({ width: 360, height: 740 })
    await operator.goto(`${b.state.origin}/console/#/operator`)
    await operator.getByLabel('Admin key').fill(ADMIN_KEY)
    await operator.getByRole('button', { name: 'Sign in' }).click()
    await go(operator, 'Schedules', 'Schedules in trouble')
    await operator
      .getByRole('listitem')
      .filter({ hasText: `schedule ${troubled} ` })
      .waitFor()
    await noSideScroll(operator)
    await shoot(operator, 'phone-operator-schedules')
    assert.deepEqual(
      watches.flatMap((w) => w.problems),
      [],
    )
  })

  it('reads well in light and dark: no serious axe violation on the schedule screens', { timeout: 120_000 }, async () => {
    type AxeResult = { violations: { id: string; impact: string; nodes: { target: string[] }[] }[] }
    const check = async (page: Page, where: string): Promise<string[]> => {
      await page.waitForFunction(() => !document.querySelector('.loading'))
      await page.evaluate(axeCore.source)
      const found = await page.evaluate(async () => {
        const axe = (window as unknown as { axe: { run: (context: Document, options: object) => Promise<AxeResult> } }).axe
        const result = await axe.run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] } })
        return result.violations
          .filter((violation) => violation.impact === 'serious' || violation.impact === 'critical')
          .map((violation) => `${violation.id} at ${violation.nodes.map((node) => node.target.join(' ')).join(', ')}`)
      })
      return found.map((violation) => `${where}: ${violation}`)
    }
    const found: string[] = []
    for (const colorScheme of ['light', 'dark'] as const) {
      const context = await b.state.browser.newContext({ viewport: { width: 1280, height: 900 }, locale: 'en-US', colorScheme })
      b.contexts.push(context)
      const page = await context.newPage()
      await signIn(page, alice.username)
      await go(page, 'Schedules', 'Scheduled payments')
      found.push(...(await check(page, `${colorScheme} schedules`)))
      await page
        .getByRole('link', { name: `Scheduled payment ${troubled}` })
        .first()
        .click()
      await page.getByRole('heading', { level: 1, name: `Scheduled payment ${troubled}` }).waitFor()
      found.push(...(await check(page, `${colorScheme} schedule`)))
      await page.goto(`${b.state.origin}/console/#/operator`)
      await page.getByLabel('Admin key').fill(ADMIN_KEY)
      await page.getByRole('button', { name: 'Sign in' }).click()
      await go(page, 'Schedules', 'Schedules in trouble')
      found.push(...(await check(page, `${colorScheme} operator schedules`)))
    }
    assert.deepEqual(found, [])
  })
})
