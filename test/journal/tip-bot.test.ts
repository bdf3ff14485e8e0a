import assert from 'node:assert/strict'
import { generateKeyPairSync } from 'node:crypto'
import { after, before, describe, it } from 'node:test'
import type { Checkpoint } from '../../client/journal.ts'
import { runTipBot } from '../../examples/tip-bot/tip-bot.ts'
import { buildTestApp, STORAGE, type TestApp } from '../helpers/app.ts'
import { createAsset, createWalletKey, fundedUser, sendTransaction, type TestUser } from '../helpers/factories.ts'

/** Waits until `done()` holds, checking every 50 ms; fails after `limitMs`. */
async function until(done: () => boolean, what: string, limitMs = 60_000): Promise<void> {
  const deadline = Date.now() + limitMs
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

/**
 * The example tip bot (examples/tip-bot) checks the journal's proof of every transaction its wallet
 * receives with the typed client, keeps the checkpoint it trusted, and says so when a proof does not
 * check out (here: under a public key that is not the journal's).
 */
describe(`the tip bot checks each received transaction's proof (${STORAGE})`, () => {
  let t: TestApp
  let baseUrl: string
  let alice: TestUser
  let bot: TestUser
  let key: string

  before(async () => {
    t = await buildTestApp({ CHECKPOINT_INTERVAL_MS: '100' })
    baseUrl = await t.app.listen({ port: 0, host: '127.0.0.1' })
    const gold = await createAsset(t, { name: 'gold' })
    alice = await fundedUser(t, [[gold, 1000]])
    bot = await fundedUser(t, [[gold, 100]])
    key = (await createWalletKey(t, bot.auth, 'tip bot')).token
  })
  after(() => t.close())

  it('checks the proof of every transfer it receives, keeps the checkpoint it trusted, and tips the sender', async () => {
    const lines: string[] = []
    const trusted: Checkpoint[] = []
    const controller = new AbortController()
    const running = runTipBot({
      baseUrl,
      key,
      signal: controller.signal,
      log: (line) => lines.push(line),
      onTrusted: (checkpoint) => trusted.push(checkpoint),
    })
    await until(() => lines.includes('listening for transfers'), 'the bot to listen')
    const sent: number[] = []
    for (let i = 0; i < 3; i++) sent.push((await sendTransaction(t, alice, { recipient: bot.username, assets: { gold: 5 } })).id)
    const checked = (id: number) => lines.some((line) => line.startsWith(`transaction ${id} is at position `))
    await until(
      () => sent.every(checked) && sent.every((id) => lines.includes(`tipped ${alice.username} for transaction ${id}`)),
      'the checks',
    )
    controller.abort()
    await running
    assert.deepEqual(
      lines.filter((line) => /PROOF FAILED|could not/.test(line)),
      [],
    )
    assert.ok(trusted.length > 0)
    assert.ok((trusted.at(-1) as Checkpoint).size >= sent.length)
  })

  it('reports a proof that does not check out under the key it trusts', async () => {
    const lines: string[] = []
    const controller = new AbortController()
    const jwk = generateKeyPairSync('ed25519').publicKey.export({ format: 'jwk' })
    const otherKey = Buffer.from(jwk.x as string, 'base64url').toString('base64')
    const running = runTipBot({ baseUrl, key, publicKey: otherKey, signal: controller.signal, log: (line) => lines.push(line) })
    await until(() => lines.includes('listening for transfers'), 'the bot to listen')
    const id = (await sendTransaction(t, alice, { recipient: bot.username, assets: { gold: 1 } })).id
    await until(() => lines.some((line) => line.startsWith(`PROOF FAILED for transaction ${id}:`)), 'the failed check')
    controller.abort()
    await running
  })
})
