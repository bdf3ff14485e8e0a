import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import type { Transaction } from '../../src/ledger/ledger.types.ts'
import { buildTestApp, runExpiryJobs, STORAGE, type TestApp } from '../helpers/app.ts'
import { createAsset, createUser, issue, readHoldings, type TestUser } from '../helpers/factories.ts'

const HOUR = 3_600_000
const NEVER = '~never'

/** A wallet's units by expiry instant (`NEVER` for units that never expire), as a simple model keeps them. */
type Units = Map<string, number>

/** Seeded random numbers, so a failure can be run again (the seed is in the test's name). */
function random(seed: number) {
  let state = seed >>> 0
  return (below: number) => {
    state = (state * 1_664_525 + 1_013_904_223) >>> 0
    return state % below
  }
}

const SEED = Number(process.env.EXPIRY_SEED ?? 20261128)

/**
 * Random issuances with expiries, transfers and refunds from concurrent clients, holds placed,
 * captured and voided, and the ledger's clock moved past expiries (with and without the expiry
 * job running): afterwards every wallet holds exactly what a model that spends the soonest
 * expiring units first computes, by expiry.
 */
describe(`expiring units against a model (${STORAGE})`, () => {
  let t: TestApp
  let offset = 0
  const clock = () => new Date(Date.now() + offset).toISOString()

  before(async () => {
    t = await buildTestApp({ HOLD_EXPIRY_INTERVAL_MS: '0' }, { clock })
  })
  after(async () => t.close())

  it(`holds what the model computes, seed ${SEED}`, async () => {
    const next = random(SEED)
    const points = await createAsset(t)
    const users: TestUser[] = []
    for (let i = 0; i < 4; i++) users.push(await createUser(t.app))
    const byWallet = new Map(users.map((user) => [user.walletId, user]))
    const model = new Map<number, Units>(users.map((user) => [user.walletId, new Map()]))
    /** What each pending hold reserves, soonest first, and its sender. */
    const holds = new Map<number, { from: number; parts: [string, number][] }>()
    const issued = new Map<number, string>()
    let lastId = 0

    const reserved = (walletId: number, instant: string) =>
      [...holds.values()]
        .filter((hold) => hold.from === walletId)
        .reduce((sum, hold) => sum + (hold.parts.find(([at]) => at === instant)?.[1] ?? 0), 0)
    const add = (walletId: number, instant: string, quantity: number) => {
      const units = model.get(walletId)
      if (!units) return
      units.set(instant, (units.get(instant) ?? 0) + quantity)
      if (units.get(instant) === 0) units.delete(instant)
    }
    /** The free, unexpired units a spend of `quantity` takes at `now`: soonest first, those that never expire last. */
    const soonest = (walletId: number, quantity: number, now: string): [string, number][] => {
      const parts: [string, number][] = []
      let left = quantity
      for (const instant of [...(model.get(walletId)?.keys() ?? [])].sort()) {
        if (instant !== NEVER && instant <= now) continue
        const take = Math.min(left, (model.get(walletId)?.get(instant) ?? 0) - reserved(walletId, instant))
        if (take > 0) parts.push([instant, take])
        left -= Math.max(take, 0)
      }
      assert.equal(left, 0, `the ledger spent ${quantity} that the model does not find free in wallet ${walletId}`)
      return parts
    }
    const move = (from: number, to: number, parts: [string, number][]) => {
      for (const [instant, quantity] of parts) {
        add(from, instant, -quantity)
        add(to, instant, quantity)
      }
    }

    /** Applies every transaction committed since the last call, in id order, to the model. */
    async function replay() {
      const response = await t.app.inject({
        method: 'GET',
        url: `/admin/transactions?limit=100${lastId > 0 ? `&after=${lastId}` : ''}`,
        headers: t.admin,
      })
      assert.equal(response.statusCode, 200, response.body)
      const found = (response.json() as Transaction[]).sort((a, b) => a.id - b.id)
      for (const transaction of found) {
        lastId = transaction.id
        const { quantity } = transaction.assets[0]
        const from = transaction.sending_wallet_id
        const to = transaction.receiving_wallet_id
        if (transaction.kind === 'issuance') move(0, to, [[issued.get(transaction.id) ?? NEVER, quantity]])
        else if (transaction.kind === 'expiry') {
          // What has expired and no hold reserves, soonest first.
          let left = quantity
          for (const instant of [...(model.get(from)?.keys() ?? [])].filter((at) => at !== NEVER && at <= transaction.created_at).sort()) {
            const take = Math.min(left, (model.get(from)?.get(instant) ?? 0) - reserved(from, instant))
            if (take > 0) add(from, instant, -take)
            left -= Math.max(take, 0)
          }
          assert.equal(left, 0, `expiry ${transaction.id} took units the model does not find expired`)
        } else if (transaction.kind === 'capture') {
          const hold = holds.get(transaction.hold_id ?? 0)
          assert.ok(hold, `capture ${transaction.id} of a hold the model does not know`)
          holds.delete(transaction.hold_id ?? 0)
          let left = quantity
          const parts: [string, number][] = []
          for (const [instant, held] of hold.parts) {
            const take = Math.min(left, held)
            if (take > 0) parts.push([instant, take])
            left -= take
          }
          move(from, to, parts)
        } else move(from, to, soonest(from, quantity, transaction.created_at))
      }
    }

    async function send(from: TestUser, to: TestUser, quantity: number) {
      const response = await t.app.inject({
        method: 'POST',
        url: '/wallet/transactions',
        headers: from.auth,
        payload: { recipient: to.username, assets: { [points.name]: quantity } },
      })
      assert.ok([201, 400].includes(response.statusCode), response.body)
      return response.statusCode === 201 ? (response.json() as Transaction) : undefined
    }

    const received: Transaction[] = []
    for (let round = 0; round < 6; round++) {
      // Issuances, some expiring within hours, some never.
      for (const user of users) {
        const hours = [0, 1, 2, 3, 5][next(5)]
        const expiresAt = hours === 0 ? undefined : new Date(Date.now() + offset + hours * HOUR).toISOString()
        const issuance = await issue(t, user.walletId, points.id, 5 + next(20), expiresAt)
        issued.set(issuance.id, expiresAt ?? NEVER)
      }
      await replay()
      // Transfers and refunds from concurrent clients.
      const requests: Promise<unknown>[] = []
      for (let i = 0; i < 12; i++) {
        const from = users[next(users.length)]
        const to = users[(users.indexOf(from) + 1 + next(users.length - 1)) % users.length]
        requests.push(send(from, to, 1 + next(8)).then((sent) => sent && received.push(sent)))
      }
      for (let i = 0; i < 3 && received.length > 0; i++) {
        const original = received[next(received.length)]
        const refunder = byWallet.get(original.receiving_wallet_id) as TestUser
        requests.push(
          t.app.inject({
            method: 'POST',
            url: `/wallet/transactions/${original.id}/refund`,
            headers: refunder.auth,
            payload: { assets: { [points.name]: 1 } },
          }),
        )
      }
      await Promise.all(requests)
      await replay()
      // Holds: placed now, some captured in part, some voided, some left pending past the clock's move.
      for (const from of users) {
        const to = users[(users.indexOf(from) + 1) % users.length]
        const placed = await t.app.inject({
          method: 'POST',
          url: '/wallet/holds',
          headers: from.auth,
          payload: { recipient: to.username, assets: { [points.name]: 1 + next(6) }, expires_in: 86_400 },
        })
        if (placed.statusCode !== 201) continue
        const hold = placed.json()
        holds.set(hold.id, { from: from.walletId, parts: soonest(from.walletId, hold.assets[0].quantity, hold.created_at) })
        const fate = next(3)
        if (fate === 0) {
          const capture = await t.app.inject({
            method: 'POST',
            url: `/wallet/holds/${hold.id}/capture`,
            headers: from.auth,
            payload: { assets: { [points.name]: 1 } },
          })
          assert.equal(capture.statusCode, 201, capture.body)
          await replay()
        } else if (fate === 1) {
          const voided = await t.app.inject({ method: 'POST', url: `/wallet/holds/${hold.id}/void`, headers: to.auth })
          assert.equal(voided.statusCode, 200, voided.body)
          holds.delete(hold.id)
        }
      }
      // Time passes; the expiry job runs in some rounds only: reads must agree either way.
      offset += next(4) * HOUR
      if (next(2) === 0) await runExpiryJobs(t, clock)
      await replay()
      await compare()
    }
    // The job's last run writes every expiry due; the model agrees before and after it.
    await runExpiryJobs(t, clock)
    await replay()
    await compare()

    /** Every wallet's holding as the API reads it against the model: units that count now, by expiry. */
    async function compare() {
      const now = clock()
      for (const user of users) {
        const holding = (await readHoldings(t, user)).find((h) => h.asset.id === points.id)
        const counting = [...(model.get(user.walletId) ?? new Map())]
          .map(([instant, quantity]): [string, number] => [
            instant,
            instant === NEVER || instant > now ? quantity : reserved(user.walletId, instant),
          ])
          .filter(([, quantity]) => quantity > 0)
          .sort(([a], [b]) => (a < b ? -1 : 1))
        const total = counting.reduce((sum, [, quantity]) => sum + quantity, 0)
        assert.equal(holding?.quantity ?? 0, total, `wallet ${user.walletId} at ${now}`)
        assert.deepEqual(
          holding?.expiring ?? [],
          counting.filter(([instant]) => instant !== NEVER).map(([expires_at, quantity]) => ({ quantity, expires_at })),
          `wallet ${user.walletId} by expiry at ${now}`,
        )
      }
    }
  })
})
