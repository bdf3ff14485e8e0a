import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { buildTestApp, type TestApp } from '../helpers/app.ts'
import { createUser } from '../helpers/factories.ts'

describe('service smoke', () => {
  let t: TestApp
  before(async () => {
    t = await buildTestApp()
  })
  after(async () => {
    await t.close()
  })

  it('registers, issues and sends', async () => {
    const alice = await createUser(t.app)
    const bob = await createUser(t.app)
    const asset = await t.app.inject({ method: 'POST', url: '/assets', headers: t.admin, payload: { name: 'gold', value: 1 } })
    assert.equal(asset.statusCode, 201)
    const issued = await t.app.inject({
      method: 'POST',
      url: `/wallets/${alice.walletId}/assets`,
      headers: t.admin,
      payload: { id: asset.json().id, quantity: 10 },
    })
    assert.equal(issued.statusCode, 201)
    const sent = await t.app.inject({
      method: 'POST',
      url: '/wallet/transactions',
      headers: alice.auth,
      payload: { recipient: bob.username, assets: { gold: 4 } },
    })
    assert.equal(sent.statusCode, 201, sent.body)
    const holdings = await t.app.inject({ method: 'GET', url: '/wallet/assets', headers: bob.auth })
    assert.deepEqual(holdings.json(), [
      { asset: { id: asset.json().id, name: 'gold', value: 1 }, quantity: 4, held: 0, credit_limit: 0, expiring: [] },
    ])
  })
})
