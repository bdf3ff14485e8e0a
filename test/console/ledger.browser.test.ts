import assert from 'node:assert/strict'
import { text } from 'node:stream/consumers'
import { after, before, describe, it } from 'node:test'
import { ADMIN_KEY, type TestApp } from '../helpers/app.ts'
import { available, CHROMIUM, consoleBrowser, shoot } from '../helpers/browser.ts'
import { createAsset, createUser, issue, sendTransaction } from '../helpers/factories.ts'

/**
 * The console's ledger tools in Chromium: balances at a date, metadata and kinds shown and
 * filtered, a statement, batches, a refund and a correction; then holds placed, captured and
 * voided. Beside `console.browser.test.ts` (a whole day, the CSP, the keyboard, a phone), so each
 * file stays within the test runner's time for one file. Skipped without a browser unless
 * REQUIRE_BROWSER=1 (CI).
 */

describe('the console in a browser: the ledger tools', { skip: !available && `no browser at ${CHROMIUM}` }, () => {
  let t: TestApp
  let origin: string
  const suffix = `${process.pid % 10000}`
  const b = consoleBrowser()
  const { watches, open, signIn, go, openFilters, openDetails, confirmDialog } = b

  before(async () => {
    await b.start()
    ;({ t, origin } = b.state)
  })

  after(() => b.stop())

  it(
    'part two: balances at a date, metadata and kind shown and filtered, a statement downloaded, batches sent, a refund and a reversal',
    { timeout: 180_000 },
    async () => {
      const copper = await createAsset(t, { name: `copper${suffix}` })
      const carol = await createUser(t.app, `carol${suffix}`)
      const dave = await createUser(t.app, `dave${suffix}`)
      await issue(t, carol.walletId, copper.id, 100)
      await sendTransaction(t, carol, {
        recipient: dave.username,
        assets: { [copper.name]: 10 },
        memo: 'order',
        metadata: { order: 'A-1' },
      })
      const page = await open()
      await signIn(page, carol.username)
      const localMinute = (date: Date) => new Date(date.getTime() - date.getTimezoneOffset() * 60_000).toISOString().slice(0, 16)

      // Balances at a date: nothing long ago, 90 copper a minute from now.
      await page.getByLabel('Date and time').fill('2020-01-01T00:00')
      await page.getByRole('button', { name: 'Show balances then' }).click()
      await page.getByText('Nothing then.').waitFor()
      await page.getByLabel('Date and time').fill(localMinute(new Date(Date.now() + 60_000)))
      await page.getByRole('button', { name: 'Show balances then' }).click()
      await page
        .getByRole('table', { name: /on / })
        .getByRole('row', { name: new RegExp(`${copper.name} 90 1`) })
        .waitFor()
      await shoot(page, 'balances-at-date')

      // History: metadata shown; kind and metadata filters; the statement of what they choose.
      await go(page, 'History')
      await page.getByText('order', { exact: true }).first().waitFor()
      await page.getByRole('definition').filter({ hasText: 'A-1' }).waitFor()
      await openFilters(page)
      await page.getByLabel('Kind').selectOption({ label: 'Issuance' })
      await page.getByText('Issuance ·').waitFor()
      await page.getByText('Sent to').waitFor({ state: 'detached' })
      // The active filter shows as a chip that removes it.
      await page.getByRole('button', { name: 'Remove filter Kind: Issuance' }).click()
      await page.getByText('Sent to').first().waitFor()
      assert.equal(await page.getByLabel('Kind').inputValue(), '')
      await page.getByLabel('Metadata key').fill('order')
      await page.getByLabel('Metadata value').fill('A-2')
      await page.getByText('No transactions match these filters.').waitFor()
      await page.getByLabel('Metadata value').fill('A-1')
      await page.getByText(`Sent to ${dave.username}`).waitFor()
      await shoot(page, 'history-filters')
      const [download] = await Promise.all([
        page.waitForEvent('download'),
        page.getByRole('link', { name: 'Download statement (CSV)' }).click(),
      ])
      assert.match(download.suggestedFilename(), /^statement-wallet-\d+-\d{4}-\d{2}-\d{2}\.csv$/)
      // A download's path exists only beside the browser; its stream reaches this process too.
      const statement = (await text(await download.createReadStream())).split('\r\n')
      assert.equal(
        statement[0],
        'id,created_at,kind,direction,counterparty_wallet_address,counterparty_username,asset,quantity,memo,metadata',
      )
      assert.equal(statement.length, 3, statement.join('\n'))
      assert.match(statement[1], new RegExp(`,transfer,sent,[a-z]+,${dave.username},${copper.name},-10,order,"{""order"":""A-1""}"$`))

      // A batch pasted, all or nothing: confirmed, then both sent.
      await go(page, 'Batch', 'Batch send')
      await page
        .getByLabel('Transfers')
        .fill(
          `recipient,asset,quantity,memo\n${dave.username},${copper.name},2,first\n${dave.username},${copper.name},3,"second, with a comma"\n`,
        )
      await page.getByRole('button', { name: 'Send batch' }).click()
      await page
        .getByRole('dialog')
        .getByText('5 ' + copper.name + ' in all')
        .waitFor()
      await confirmDialog(page, 'Send batch')
      await page.getByText('2 of 2 transfers sent.').waitFor()
      // All or nothing with one line too large: nothing is sent, the line is named, and the previous result is gone.
      await page.getByLabel('Transfers').fill(`${dave.username},${copper.name},1\n${dave.username},${copper.name},1000`)
      await page.getByRole('button', { name: 'Send batch' }).click()
      await confirmDialog(page, 'Send batch')
      await page
        .getByRole('alert')
        .filter({ hasText: 'Nothing was sent: line 2 was refused. There is not enough in this wallet for that.' })
        .waitFor()
      assert.equal(await page.getByText('2 of 2 transfers sent.').count(), 0)
      // Each on its own, from an uploaded file: one sent, one refused in words.
      await page.getByLabel('All or nothing').uncheck()
      await page.getByLabel('Or upload a CSV file').setInputFiles({
        name: 'pay.csv',
        mimeType: 'text/csv',
        buffer: Buffer.from(`${dave.username},${copper.name},4,upload\r\nnosuchuser${suffix},${copper.name},1\r\n`),
      })
      await page.getByRole('button', { name: 'Send batch' }).click()
      await confirmDialog(page, 'Send batch')
      await page.getByText('1 of 2 transfers sent.').waitFor()
      await page.getByText('Line 2: not sent. There is no user with that username.').waitFor()
      await shoot(page, 'batch-result')
      const uploaded = Number(/Line 1: sent .* \(transaction (\d+)\)/.exec((await page.locator('main').textContent()) ?? '')?.[1])
      // A line that is not a transfer is refused before anything is sent.
      await page.getByLabel('Transfers').fill(`${dave.username},${copper.name},1.5`)
      await page.getByRole('button', { name: 'Send batch' }).click()
      await page.getByRole('alert').filter({ hasText: 'Line 1: the quantity is a whole number of at least 1.' }).waitFor()
      await go(page, 'Balances')
      await page.getByRole('row', { name: new RegExp(`${copper.name} 81 1`) }).waitFor()

      // Dave refunds part of what carol sent him, from the transaction's detail; confirmed.
      const davePage = await open()
      await signIn(davePage, dave.username)
      await go(davePage, 'History')
      // At 1280 px transactions are a table, each a row group that opens to everything about it.
      const ordered = davePage.getByRole('rowgroup').filter({ hasText: 'A-1' })
      await openDetails(ordered)
      await ordered
        .getByRole('region', { name: /^Transaction \d+$/ })
        .getByText('“order”')
        .waitFor()
      await ordered.getByText(/^Refund transaction \d+$/).click()
      await ordered.getByLabel(`${copper.name} to move back`).fill('11')
      await ordered.getByRole('button', { name: 'Refund', exact: true }).click()
      await ordered.getByRole('alert').filter({ hasText: 'no more can go back' }).waitFor()
      await ordered.getByLabel(`${copper.name} to move back`).fill('3')
      await ordered.getByRole('button', { name: 'Refund', exact: true }).click()
      await davePage.getByRole('dialog').getByText(`Moves back to ${carol.username}: 3 ${copper.name}`).waitFor()
      await shoot(davePage, 'confirm-refund')
      await confirmDialog(davePage, 'Refund')
      await davePage.getByText(`3 ${copper.name} moved back to ${carol.username}`).waitFor()
      // The notice stays while the screen changes from a table to a phone's rows and back.
      for (const width of [360, 1280]) {
        await davePage.setViewportSize({ width, height: 900 })
        await davePage
          .getByRole('region', { name: /^Transaction \d+$/ })
          .getByText(`3 ${copper.name} moved back to ${carol.username}`)
          .waitFor()
      }
      await davePage
        .getByText(/^Refund of transaction \d+ ·/)
        .first()
        .waitFor()
      await ordered.getByText('Partly refunded', { exact: true }).waitFor()
      // Its detail lists the refund.
      await openDetails(ordered)
      await ordered.getByText(new RegExp(`^Refund: transaction \\d+, 3 ${copper.name}, `)).waitFor()
      await shoot(davePage, 'history-refund')
      // What a wallet sent, or anything it did not receive as a transfer, has no refund.
      const refund = davePage.getByRole('rowgroup').filter({ hasText: 'Refund of transaction' })
      await openDetails(refund)
      await refund.getByRole('region').waitFor()
      assert.equal(await refund.getByText(/^Refund transaction/).count(), 0)

      // The operator corrects the uploaded transfer from the journal; then it is marked, and no second correction is offered.
      const operator = await open()
      await operator.goto(`${origin}/console/#/operator`)
      await operator.getByLabel('Admin key').fill(ADMIN_KEY)
      await operator.getByRole('button', { name: 'Sign in' }).click()
      await go(operator, 'Journal')
      const entry = operator
        .getByRole('rowgroup')
        .filter({ hasText: `transaction ${uploaded}` })
        .filter({ hasText: 'upload' })
      await openDetails(entry)
      await entry.getByText(`Correct transaction ${uploaded}`).click()
      await entry.getByLabel('Memo (optional)').fill('sent by mistake')
      await entry.getByRole('button', { name: 'Correct', exact: true }).click()
      await operator.getByRole('dialog').getByText(`Moves back to ${carol.username}: everything of it not yet moved back`).waitFor()
      await confirmDialog(operator, 'Correct')
      const corrected = operator
        .getByRole('rowgroup')
        .filter({ hasText: `transaction ${uploaded}` })
        .filter({ hasText: 'upload' })
      await corrected.getByText(/^(Refunded|Corrected)$/).waitFor()
      // Nothing is left to move back, so the form is gone; what it did is still said beside the transaction.
      await corrected.getByText(new RegExp(`^4 ${copper.name} moved back to ${carol.username} \\(transaction \\d+\\)\\.$`)).waitFor()
      await openDetails(corrected)
      await corrected.getByText(/^(Refund|Correction): transaction \d+, 4 /).waitFor()
      assert.equal(await corrected.getByText(`Correct transaction ${uploaded}`).count(), 0)
      await openFilters(operator)
      await operator.getByLabel('Kind').selectOption({ label: 'Refund or correction' })
      await operator
        .getByText(new RegExp(`^(Refund|Correction) of transaction ${uploaded}`))
        .first()
        .waitFor()
      await shoot(operator, 'operator-reversal')
      await go(page, 'History')
      await go(page, 'Balances')
      // 81 + 3 refunded by dave + 4 reversed by the operator.
      await page.getByRole('row', { name: new RegExp(`${copper.name} 88 1`) }).waitFor()
      assert.deepEqual(
        watches.flatMap((w) => w.problems),
        [],
      )
    },
  )

  it('holds: placed, captured in part and whole, voided by the recipient, held shown in the balances', { timeout: 180_000 }, async () => {
    const tin = await createAsset(t, { name: `tin${suffix}` })
    const erin = await createUser(t.app, `erin${suffix}`)
    const frank = await createUser(t.app, `frank${suffix}`)
    await issue(t, erin.walletId, tin.id, 50)
    const page = await open()
    await signIn(page, erin.username)
    await go(page, 'Holds')
    await page.getByText('No pending holds.').waitFor()
    const place = async (quantity: string, memo: string) => {
      await page.getByLabel('Recipient username').fill(frank.username)
      await page.getByLabel('Asset to hold').selectOption({ index: 0 })
      await page.getByLabel('Quantity to hold').fill(quantity)
      await page.getByLabel('Expires after').selectOption({ label: '1 day' })
      await page.getByLabel('Memo (optional)').fill(memo)
      await page.getByRole('button', { name: 'Place hold' }).click()
      const done = await page
        .getByRole('status')
        .filter({ hasText: `${quantity} ${tin.name} reserved for ${frank.username}` })
        .textContent()
      return Number(/Hold (\d+) placed/.exec(done ?? '')?.[1])
    }
    // Side by side, the asset and its quantity line up.
    const [assetBox, quantityBox] = await Promise.all([
      page.getByLabel('Asset to hold').boundingBox(),
      page.getByLabel('Quantity to hold').boundingBox(),
    ])
    assert.equal(assetBox?.y, quantityBox?.y)
    const partly = await place('10', 'deposit')
    const whole = await place('20', 'escrow')
    // What is held shows beside what the wallet owns.
    await go(page, 'Balances')
    // Owned, reserved by holds, available to spend: one word each, the same on every screen.
    await page.getByRole('row', { name: new RegExp(`${tin.name} 50 30 20 1`) }).waitFor()
    await page.getByRole('columnheader', { name: 'Reserved by holds' }).waitFor()
    await go(page, 'Holds')

    // Part of the first: more than is held is refused before anything is sent, then 4 captured (confirmed).
    const first = page.getByRole('listitem').filter({ hasText: `hold ${partly}` })
    await first.getByText(`Capture part of hold ${partly}`).click()
    await first.getByLabel(`${tin.name} to capture`).fill('11')
    await first.getByRole('button', { name: 'Capture these' }).click()
    await first
      .getByRole('alert')
      .filter({ hasText: `At most 10 ${tin.name} is held.` })
      .waitFor()
    await first.getByLabel(`${tin.name} to capture`).fill('4')
    await first.getByRole('button', { name: 'Capture these' }).click()
    await page.getByRole('dialog').getByText(`4 ${tin.name} go to ${frank.username}`).waitFor()
    // Confirming is the weighty button, and a capture is not styled as a destruction.
    const [confirming, cancelling] = await Promise.all(
      ['Capture', 'Cancel'].map((name) =>
        page
          .getByRole('dialog')
          .getByRole('button', { name })
          .evaluate((button) => getComputedStyle(button).backgroundColor),
      ),
    )
    assert.notEqual(confirming, cancelling)
    assert.doesNotMatch(confirming, /rgb\(164, 22, 26\)/)
    await confirmDialog(page, 'Capture')
    await page
      .getByRole('status')
      .filter({ hasText: `Hold ${partly} captured: 4 ${tin.name} paid` })
      .waitFor()
    // The whole second one; a cancelled confirmation captures nothing.
    await page.getByRole('button', { name: `Capture hold ${whole}` }).click()
    await page.getByRole('dialog').getByRole('button', { name: 'Cancel' }).click()
    await page.getByRole('button', { name: `Capture hold ${whole}` }).click()
    await confirmDialog(page, 'Capture')
    await page
      .getByRole('status')
      .filter({ hasText: `Hold ${whole} captured: 20 ${tin.name} paid` })
      .waitFor()
    const third = await place('7', 'maybe')
    // What may still be held is what is available, in the same word as the balances.
    await page
      .getByLabel('Asset to hold')
      .locator('option', { hasText: `${tin.name} (19 available)` })
      .waitFor({ state: 'attached' })
    // A hold that was captured in part says what was paid and what was released.
    await openFilters(page)
    await page.getByLabel('Status', { exact: true }).selectOption({ label: 'Every status' })
    await page
      .getByRole('listitem')
      .filter({ hasText: `hold ${partly}` })
      .getByText(`4 ${tin.name} paid, 6 ${tin.name} released`)
      .waitFor()
    // Its detail: what it reserved, what of it was paid and what released, both sides and its capture.
    const partlyHold = page.getByRole('listitem').filter({ hasText: `hold ${partly}` })
    await partlyHold.getByRole('button', { name: `Details of hold ${partly}` }).click()
    const holdDetail = partlyHold.getByRole('region', { name: `Hold ${partly}` })
    await holdDetail.waitFor()
    assert.match(
      await holdDetail.innerText(),
      new RegExp(`Reserved\\s+10 ${tin.name}\\s+Paid\\s+4 ${tin.name}\\s+Released\\s+6 ${tin.name}\\s+Placed by\\s+${erin.username}`),
    )
    await holdDetail.getByText(/^transaction \d+$/).waitFor()
    await shoot(page, 'holds')

    // Frank sees it from the other side: he may void it, not capture it.
    const frankPage = await open()
    await signIn(frankPage, frank.username)
    await go(frankPage, 'Holds')
    const held = frankPage.getByRole('listitem').filter({ hasText: `hold ${third}` })
    await held.getByText(`Held for you by ${erin.username}`).waitFor()
    assert.equal(await held.getByRole('button', { name: /^Capture/ }).count(), 0)
    await held.getByRole('button', { name: `Void hold ${third}` }).click()
    await frankPage.getByRole('dialog').getByText(`go back to ${erin.username}`).waitFor()
    await confirmDialog(frankPage, 'Void')
    await frankPage
      .getByRole('status')
      .filter({ hasText: `Hold ${third} voided` })
      .waitFor()
    // The active filter shows as a chip; removing it shows every status.
    await frankPage.getByRole('button', { name: 'Remove filter Status: Pending' }).click()
    await frankPage
      .getByRole('listitem')
      .filter({ hasText: `hold ${third}` })
      .getByText(`Voided: 7 ${tin.name} released`)
      .waitFor()
    await frankPage
      .getByRole('listitem')
      .filter({ hasText: `hold ${whole}` })
      .getByText(`20 ${tin.name} paid`, { exact: true })
      .waitFor()
    await go(frankPage, 'History')
    await frankPage.getByText(`Capture of hold ${whole}`).waitFor()

    // Erin: 50 − 4 − 20, nothing held any more.
    await go(page, 'Balances')
    await page.getByRole('row', { name: new RegExp(`${tin.name} 26 1`) }).waitFor()
    assert.deepEqual(
      watches.flatMap((w) => w.problems),
      [],
    )
  })
})
