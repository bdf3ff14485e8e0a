import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import axeCore from 'axe-core'
import type { Page } from 'playwright-core'
import type { TestApp } from '../helpers/app.ts'
import { available, CHROMIUM, consoleBrowser, shoot } from '../helpers/browser.ts'
import { createAsset, createUser, issue, transfer, type TestUser } from '../helpers/factories.ts'

/**
 * Balance alerts in Chromium, by role and label: "tell me when gold drops below 100" set in words,
 * its state seen, the crossing and the way back announced live, a refusal in words, a phone at
 * 360 px, axe in light and dark. Skipped without a browser unless REQUIRE_BROWSER=1.
 */

describe('the console in a browser: balance alerts', { skip: !available && `no browser at ${CHROMIUM}` }, () => {
  let t: TestApp
  const suffix = `${process.pid % 10000}`
  const b = consoleBrowser()
  const { watches, open, signIn, go } = b
  let gold: { id: number; name: string }
  let carol: TestUser
  let dan: TestUser

  before(async () => {
    await b.start()
    t = b.state.t
    gold = await createAsset(t, { name: `gold${suffix}` })
    await createAsset(t, { name: `silver${suffix}` })
    carol = await createUser(t.app, `carol${suffix}`)
    dan = await createUser(t.app, `dan${suffix}`)
    await issue(t, carol.walletId, gold.id, 150)
  })

  after(() => b.stop())

  async function add(page: Page, direction: 'below' | 'above', line: string): Promise<void> {
    await page.getByLabel('Tell me when what I can spend of').selectOption(gold.name)
    await page.getByLabel('Goes').selectOption(direction)
    await page.getByLabel('The line').fill(line)
    await page.getByRole('button', { name: 'Add alert' }).click()
  }

  it(
    '1280 px: an alert set in words, its state, the crossing and the way back live, a refusal in words',
    { timeout: 150_000 },
    async () => {
      const page = await open()
      await signIn(page, carol.username)
      await go(page, 'Alerts', 'Balance alerts')
      await page.getByText('No alerts yet.').waitFor()
      await page.getByText('Live: new transactions appear by themselves.').waitFor()
      await page.getByLabel('Tell me when what I can spend of').selectOption(gold.name)
      await page.getByText('150 available to spend').first().waitFor()

      // A line that is no number is refused before anything is sent.
      await add(page, 'below', 'ten')
      await page.getByRole('alert').filter({ hasText: 'The line is a whole number of 0 or more.' }).waitFor()
      await add(page, 'below', '100')
      await page
        .getByRole('status')
        .filter({ hasText: `Alert added: tell me when ${gold.name} drops below 100.` })
        .waitFor()
      const alert = page.getByRole('listitem').filter({ hasText: `Tell me when ${gold.name} drops below 100` })
      await alert.getByText('At or above 100', { exact: true }).waitFor()
      await alert.getByText('150 available to spend').waitFor()

      // Carol pays 60 elsewhere: what she can spend drops below the line, and the screen says so at once.
      await transfer(t, carol, dan.username, { [gold.name]: 60 })
      await page
        .getByRole('status')
        .filter({ hasText: `Alert: ${gold.name} dropped below 100 (90 available to spend).` })
        .waitFor()
      await alert.getByText('Below 100 now', { exact: true }).waitFor()
      await alert.getByText('90 available to spend').waitFor()
      await shoot(page, 'alerts')
      // Back above the line: said too, and the alert is armed again.
      await transfer(t, dan, carol.username, { [gold.name]: 20 })
      await page
        .getByRole('status')
        .filter({ hasText: `${gold.name} is back at or above 100 (110 available to spend).` })
        .waitFor()
      await alert.getByText('At or above 100', { exact: true }).waitFor()

      // Another, above a line; then the service's limit of 20, said in words.
      await add(page, 'above', '1000')
      await page
        .getByRole('status')
        .filter({ hasText: `Alert added: tell me when ${gold.name} rises above 1,000.` })
        .waitFor()
      await page
        .getByRole('listitem')
        .filter({ hasText: `Tell me when ${gold.name} rises above 1,000` })
        .getByText('At or below 1,000', { exact: true })
        .waitFor()
      for (let n = 0; n < 18; n++) {
        const made = await t.app.inject({
          method: 'POST',
          url: '/wallet/monitors',
          headers: carol.auth,
          payload: { asset: gold.name, below: n },
        })
        assert.equal(made.statusCode, 201, made.body)
      }
      await add(page, 'below', '5')
      await page.getByRole('alert').filter({ hasText: 'A wallet can have at most 20 alerts. Delete one before adding another.' }).waitFor()
      await page.getByRole('button', { name: 'Add alert', disabled: true }).waitFor()
      await page.getByText('A wallet has at most 20 alerts.').waitFor()

      // Deleted by its own named button.
      await page.getByRole('button', { name: `Delete alert: Tell me when ${gold.name} rises above 1,000` }).click()
      await page
        .getByRole('status')
        .filter({ hasText: `Alert deleted: tell me when ${gold.name} rises above 1,000.` })
        .waitFor()
      assert.equal(await page.getByRole('listitem').filter({ hasText: `rises above 1,000` }).count(), 0)
      await page.getByRole('button', { name: 'Add alert', disabled: false }).waitFor()
      assert.deepEqual(
        watches.flatMap((w) => w.problems),
        [],
      )
    },
  )

  it('360 px: alerts on a phone, no horizontal scroll', { timeout: 120_000 }, async () => {
    const phone = await open({ width: 360, height: 740 })
    await signIn(phone, dan.username)
    await go(phone, 'Alerts', 'Balance alerts')
    await add(phone, 'below', '1')
    await phone
      .getByRole('status')
      .filter({ hasText: `Alert added: tell me when ${gold.name} drops below 1.` })
      .waitFor()
    const alert = phone.getByRole('listitem').filter({ hasText: `Tell me when ${gold.name} drops below 1` })
    await alert.getByText('At or above 1', { exact: true }).waitFor()
    await transfer(t, dan, carol.username, { [gold.name]: 40 })
    await phone
      .getByRole('status')
      .filter({ hasText: `Alert: ${gold.name} dropped below 1 (0 available to spend).` })
      .waitFor()
    await alert.getByText('Below 1 now', { exact: true }).waitFor()
    assert.ok(await phone.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth), 'no horizontal scroll')
    await shoot(phone, 'phone-alerts')
    assert.deepEqual(
      watches.flatMap((w) => w.problems),
      [],
    )
  })

  it('reads well in light and dark: no serious axe violation on the alerts screen', { timeout: 120_000 }, async () => {
    type AxeResult = { violations: { id: string; impact: string; nodes: { target: string[] }[] }[] }
    const found: string[] = []
    for (const colorScheme of ['light', 'dark'] as const) {
      const context = await b.state.browser.newContext({ viewport: { width: 1280, height: 900 }, locale: 'en-US', colorScheme })
      b.contexts.push(context)
      const page = await context.newPage()
      await signIn(page, carol.username)
      await go(page, 'Alerts', 'Balance alerts')
      await page.getByRole('listitem').first().waitFor()
      await page.evaluate(axeCore.source)
      const violations = await page.evaluate(async () => {
        const axe = (window as unknown as { axe: { run: (context: Document, options: object) => Promise<AxeResult> } }).axe
        const result = await axe.run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] } })
        return result.violations
          .filter((violation) => violation.impact === 'serious' || violation.impact === 'critical')
          .map((violation) => `${violation.id} at ${violation.nodes.map((node) => node.target.join(' ')).join(', ')}`)
      })
      found.push(...violations.map((violation) => `${colorScheme}: ${violation}`))
    }
    assert.deepEqual(found, [])
  })
})
