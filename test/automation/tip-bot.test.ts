import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { runTipBot } from '../../examples/tip-bot/tip-bot.ts'
import type { Asset, Transaction } from '../../src/ledger/ledger.types.ts'
import { buildTestAppWithAsset, STORAGE, type TestApp } from '../helpers/app.ts'
import { createUser, fundedUser, issue, readHoldings, transfer, type TestUser } from '../helpers/factories.ts'

/** Waits until `done()` holds, checking every 50 ms; fails after `limitMs`, saying what the bot said. */
async function until(done: () => Promise<boolean>, what: string, lines: string[], limitMs = 30_000): Promise<void> {
  const deadline = Date.now() + limitMs
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; the bot said: ${lines.join(' | ')}`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

/**
 * The example tip bot (examples/tip-bot) with a top-up: it keeps a balance monitor on its float
 * and, when the monitor fires, has its reserve wallet pay it through a capped key of that wallet.
 */
describe(`the tip bot tops itself up when its monitor fires (${STORAGE})`, () => {
  let t: TestApp
  let gold: Asset
  let baseUrl: string
  const controller = new AbortController()

  before(async () => {
    ;({ t, asset: gold } = await buildTestAppWithAsset('gold'))
    baseUrl = await t.app.listen({ port: 0, host: '127.0.0.1' })
  })
  after(async () => {
    controller.abort()
    await t.close()
  })

  async function keyOf(user: TestUser, body: object): Promise<string> {
    const response = await t.app.inject({ method: 'POST', url: '/wallet/sessions', headers: user.auth, payload: body })
    assert.equal(response.statusCode, 201, response.body)
    return response.json().token
  }

  async function spendable(user: TestUser): Promise<number> {
    return (await readHoldings(t, user)).find((holding) => holding.asset.id === gold.id)?.quantity ?? 0
  }

  async function received(user: TestUser): Promise<Transaction[]> {
    const response = await t.app.inject({ method: 'GET', url: '/wallet/transactions?direction=received&limit=100', headers: user.auth })
    assert.equal(response.statusCode, 200, response.body)
    return response.json()
  }

  it('tips until its float drops below the threshold, then is paid once by its reserve, and tips on', async () => {
    const alice = await fundedUser(t, [[gold, 100]])
    const bot = await fundedUser(t, [[gold, 10]])
    const reserve = await createUser(t.app)
    await issue(t, reserve.walletId, gold.id, 1000)
    const botKey = await keyOf(bot, { name: 'tip bot', scopes: ['read', 'send', 'monitor'] })
    // The reserve's key may pay only the bot, and at most 50 gold a day.
    const reserveKey = await keyOf(reserve, {
      name: 'tip bot top-up',
      limits: { recipients: [bot.walletId], per_day: { [gold.name]: 50 } },
    })
    const lines: string[] = []
    const running = runTipBot({
      baseUrl,
      key: botKey,
      tip: 4,
      log: (line) => lines.push(line),
      signal: controller.signal,
      proofWaitMs: 0,
      topUp: { key: reserveKey, to: bot.address, asset: gold.name, below: 5, quantity: 20 },
    })
    await until(async () => lines.includes('listening for transfers'), 'the bot to listen', lines)

    // Each transfer of 1 gold costs the bot a tip of 4: 10 → 7 → 4, below 5 on the second.
    for (const expected of [7, 24]) {
      await transfer(t, alice, bot.username, { [gold.name]: 1 })
      await until(async () => (await spendable(bot)) === expected, `the bot to hold ${expected}`, lines)
    }
    const topUps = (await received(bot)).filter((transaction) => transaction.sending_wallet_id === reserve.walletId)
    assert.deepEqual(
      topUps.map((transaction) => [transaction.memo, transaction.assets[0].quantity]),
      [['tip bot top-up', 20]],
    )
    await until(async () => lines.includes(`topped up 20 ${gold.name} from the reserve`), 'the bot to say so', lines)
    // The monitor is the bot's, made once, back to normal after the top-up.
    const monitors = await t.app.inject({ method: 'GET', url: '/wallet/monitors', headers: bot.auth })
    assert.deepEqual(
      monitors.json().map((monitor: { asset: string; below: number; state: string }) => [monitor.asset, monitor.below, monitor.state]),
      [[gold.name, 5, 'normal']],
    )
    assert.equal(await spendable(reserve), 980)
    controller.abort()
    await running
  })
})
