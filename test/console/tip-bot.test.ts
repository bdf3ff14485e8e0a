import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { call, CofferError, createCofferClient } from '../../client/index.ts'
import { runTipBot } from '../../examples/tip-bot/tip-bot.ts'
import { buildTestApp, type TestApp } from '../helpers/app.ts'
import { createUser, type TestUser } from '../helpers/factories.ts'

/** The typed client against a running service, through the example tip bot (examples/tip-bot). */
describe('the typed client and the tip bot', () => {
  let t: TestApp
  let baseUrl: string
  let alice: TestUser
  let bot: TestUser
  before(async () => {
    t = await buildTestApp()
    baseUrl = await t.app.listen({ port: 0, host: '127.0.0.1' })
    alice = await createUser(t.app)
    bot = await createUser(t.app)
    const gold = (await t.app.inject({ method: 'POST', url: '/assets', headers: t.admin, payload: { name: 'gold', value: 1 } })).json().id
    for (const user of [alice, bot])
      await t.app.inject({ method: 'POST', url: `/wallets/${user.walletId}/assets`, headers: t.admin, payload: { id: gold, quantity: 50 } })
  })
  let stopBot = () => {}
  after(async () => {
    stopBot()
    await t.close()
  })

  it('types answers and refusals: data on success, a CofferError with the code otherwise', async () => {
    const coffer = createCofferClient({ baseUrl, token: alice.token })
    const holdings = await call(coffer.GET('/wallet/assets'))
    assert.deepEqual(
      holdings.map((holding) => [holding.asset.name, holding.quantity]),
      [['gold', 50]],
    )
    await assert.rejects(
      call(coffer.POST('/wallet/transactions', { body: { recipient: bot.username, assets: { gold: 500 } } })),
      (error: unknown) =>
        error instanceof CofferError && error.code === 'I002' && error.status === 400 && typeof error.requestId === 'string',
    )
    await assert.rejects(
      call(createCofferClient({ baseUrl }).GET('/user/session')),
      (error: unknown) => error instanceof CofferError && error.code === 'A000',
    )
    await assert.rejects(
      call(createCofferClient({ baseUrl: 'http://127.0.0.1:9' }).GET('/healthz')),
      (error: unknown) => error instanceof CofferError && error.code === 'S001' && error.status === 0,
    )
  })

  it('the bot answers each received transfer with one tip, and stops when its key is revoked', async () => {
    const botClient = createCofferClient({ baseUrl, token: bot.token })
    const key = await call(botClient.POST('/wallet/sessions', { body: { name: 'tip bot' } }))
    const lines: string[] = []
    const controller = new AbortController()
    stopBot = () => controller.abort()
    const running = runTipBot({ baseUrl, key: key.token, log: (line) => lines.push(line), signal: controller.signal })
    const waitFor = async (test: () => boolean | Promise<boolean>, what: string) => {
      const deadline = Date.now() + 15_000
      while (!(await test())) {
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; bot said: ${lines.join(' | ')}`)
        await new Promise((resolve) => setTimeout(resolve, 50))
      }
    }
    await waitFor(() => lines.includes('listening for transfers'), 'the bot to listen')
    const coffer = createCofferClient({ baseUrl, token: alice.token })
    const sent = await call(
      coffer.POST('/wallet/transactions', { body: { recipient: bot.username, assets: { gold: 5 }, memo: 'for the bot' } }),
    )
    // Alice received her issuance, then the tip.
    await waitFor(
      async () => (await call(coffer.GET('/wallet/transactions', { params: { query: { direction: 'received' } } }))).length === 2,
      'the tip',
    )
    const [tip] = await call(coffer.GET('/wallet/transactions', { params: { query: { direction: 'received' } } }))
    assert.equal(tip.memo, `thanks for transaction ${sent.id}`)
    assert.deepEqual(
      tip.assets.map((line) => [line.asset.name, line.quantity]),
      [['gold', 1]],
    )
    assert.equal(tip.sending_wallet_id, bot.walletId)
    await call(botClient.DELETE('/wallet/sessions/{sessionid}', { params: { path: { sessionid: String(key.id) } } }))
    // The stream is cut at its next check; the bot's next connection is refused and it returns.
    t.app.server.closeAllConnections()
    await running
    assert.ok(
      lines.some((line) => line.startsWith('the service refused the key (401 A001)')),
      lines.join(' | '),
    )
    assert.equal((await call(coffer.GET('/wallet/assets')))[0].quantity, 46)
  })
})
