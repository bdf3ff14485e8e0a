import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { ADMIN_KEY, type TestApp } from '../helpers/app.ts'
import { available, CHROMIUM, consoleBrowser, shoot } from '../helpers/browser.ts'
import { createAsset, createUser, issue, sendTransaction } from '../helpers/factories.ts'

/**
 * The journal in the console, in Chromium: a holder sees each transaction's proof checked in the
 * browser (Web Crypto, the typed client's checks), a tampered proof refused, and the checkpoint it
 * trusted kept; the operator sees the latest checkpoint with its signature checked. Skipped without
 * a browser unless REQUIRE_BROWSER=1 (CI).
 */
describe('the console in a browser: the journal', { skip: !available && `no browser at ${CHROMIUM}` }, () => {
  let t: TestApp
  let origin: string
  const suffix = `${process.pid % 10000}`
  const b = consoleBrowser()
  const { watches, open, signIn, go, openDetails } = b

  before(async () => {
    await b.start()
    ;({ t, origin } = b.state)
  })

  after(() => b.stop())

  it(
    'shows a transaction proof checked in the browser, refuses a tampered one, and the operator the latest checkpoint',
    { timeout: 180_000 },
    async () => {
      const zinc = await createAsset(t, { name: `zinc${suffix}` })
      const gina = await createUser(t.app, `gina${suffix}`)
      const hugo = await createUser(t.app, `hugo${suffix}`)
      await issue(t, gina.walletId, zinc.id, 50)
      const paid = await sendTransaction(t, gina, { recipient: hugo.username, assets: { [zinc.name]: 7 }, memo: 'proof' })

      // Hugo opens the transaction: its proof checks out in his browser once a checkpoint covers it.
      const page = await open()
      await signIn(page, hugo.username)
      await go(page, 'History')
      const row = page.getByRole('rowgroup').filter({ hasText: `transaction ${paid.id}` })
      await openDetails(row)
      const checked = row.getByText(/^Checked in this browser: entry \d+ of the signed journal \(checkpoint of \d+ transactions, signed /)
      await checked.waitFor()
      await shoot(page, 'history-proof')
      const entry = Number(/entry (\d+)/.exec((await checked.textContent()) ?? '')?.[1])
      // The browser keeps the checkpoint it trusted, covering the transaction.
      const trusted = JSON.parse((await page.evaluate(() => localStorage.getItem('coffer.journal.trusted'))) ?? 'null') as { size: number }
      assert.ok(trusted.size >= entry, `trusted checkpoint of ${trusted.size} covers entry ${entry}`)

      // A proof altered on its way (another hash for the transaction) is refused, in words.
      await page.route(`**/wallet/transactions/${paid.id}/proof`, async (route) => {
        const response = await route.fetch()
        const proof = (await response.json()) as { transaction: { hash: string } }
        proof.transaction.hash = (proof.transaction.hash[0] === '0' ? '1' : '0') + proof.transaction.hash.slice(1)
        await route.fulfill({ response, json: proof })
      })
      await page.reload()
      await page.getByRole('heading', { level: 1, name: 'History' }).waitFor()
      await openDetails(row)
      await row.getByText(new RegExp(`^Does not check out: transaction ${paid.id} is not where its proof places it`)).waitFor()
      assert.equal(await checked.count(), 0)
      await page.unroute(`**/wallet/transactions/${paid.id}/proof`)

      // On a phone the detail says the same.
      const phone = await open({ width: 360, height: 740 })
      await signIn(phone, gina.username)
      await go(phone, 'History')
      const sent = phone.getByRole('listitem').filter({ hasText: `transaction ${paid.id}` })
      await openDetails(sent)
      await sent.getByText(/^Checked in this browser: entry \d+ of the signed journal/).waitFor()

      // The operator sees the latest checkpoint, its signature checked against the journal's key.
      const operator = await open()
      await operator.goto(`${origin}/console/#/operator`)
      await operator.getByLabel('Admin key').fill(ADMIN_KEY)
      await operator.getByRole('button', { name: 'Sign in' }).click()
      await go(operator, 'Journal')
      const checkpoint = operator.getByRole('region', { name: 'Latest signed checkpoint' })
      await checkpoint.getByText('Checked in this browser with the journal’s public key').waitFor()
      const covered = Number(
        (
          (await checkpoint
            .getByText(/^[\d,]+$/)
            .first()
            .textContent()) ?? ''
        ).replace(/,/g, ''),
      )
      assert.ok(covered >= entry, `the latest checkpoint covers ${covered} transactions`)
      await shoot(operator, 'operator-checkpoint')

      assert.deepEqual(
        watches.flatMap((w) => w.problems),
        [],
      )
    },
  )
})
