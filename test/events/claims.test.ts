import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { ClaimPlan, leaseCountChange, READ_AHEAD, type ClaimInput, type DueDelivery } from '../../src/events/claims.ts'

/** The arithmetic of a claim, with plain numbers: no database, no clock. */

const due = (walletId: number, count: number, firstId: number): DueDelivery[] =>
  Array.from({ length: count }, (_, i) => ({
    id: firstId + i,
    wallet_id: walletId,
    next_attempt_at: `2026-01-01T00:00:${String(i).padStart(2, '0')}Z`,
  }))

function plan(input: Partial<ClaimInput> & Pick<ClaimInput, 'due'>): ClaimPlan {
  return new ClaimPlan({
    turn: 0,
    free: 256,
    concurrency: 256,
    leased: new Map(),
    held: new Map(),
    limit: () => 128,
    allowance: () => Number.POSITIVE_INFINITY,
    ...input,
  })
}

/** Runs a plan as the worker does, `rows` standing for what the database holds due per origin. */
function run(claim: ClaimPlan, rows: Record<string, DueDelivery[]>, load = new Map<number, number>()) {
  const asks = []
  const taken: Record<string, number[]> = {}
  for (let ask = claim.next(); ask; ask = claim.next()) {
    asks.push(ask)
    const perWallet = new Map<number, number>()
    const found = rows[ask.origin].filter((row) => {
      const seen = (perWallet.get(row.wallet_id) ?? 0) + 1
      perWallet.set(row.wallet_id, seen)
      return seen <= ask.perWallet
    })
    taken[ask.origin] = claim.take(ask, found, load).map((row) => row.id)
  }
  return { asks, taken }
}

describe('ClaimPlan: how many deliveries each origin may take in one claim', () => {
  it("gives each origin what its limit leaves once every instance's leases are counted", () => {
    const claim = plan({
      due: [
        { origin: 'a', wallets: 1 },
        { origin: 'b', wallets: 1 },
      ],
      limit: (origin) => (origin === 'a' ? 10 : 4),
      leased: new Map([['a', 7]]),
    })
    const { asks, taken } = run(claim, { a: due(1, 50, 1), b: due(2, 50, 100) })
    assert.deepEqual(
      asks.map((ask) => [ask.origin, ask.slots]),
      [
        ['a', 3],
        ['b', 4],
      ],
    )
    assert.deepEqual(taken.a, [1, 2, 3])
    // Both left due deliveries behind because of their limits: both may grow.
    assert.deepEqual([...claim.pressed].sort(), ['a', 'b'])
    assert.deepEqual([...claim.waiting].sort(), ['a', 'b'])
  })

  it('passes over an origin at its limit or with its circuit open, noting which may grow and which waits', () => {
    const claim = plan({
      due: [
        { origin: 'full', wallets: 1 },
        { origin: 'open', wallets: 1 },
        { origin: 'free', wallets: 1 },
      ],
      limit: () => 4,
      leased: new Map([['full', 4]]),
      allowance: (origin) => (origin === 'open' ? 0 : Number.POSITIVE_INFINITY),
    })
    const { asks } = run(claim, { free: due(1, 2, 1) })
    assert.deepEqual(
      asks.map((ask) => ask.origin),
      ['free'],
    )
    assert.ok(claim.pressed.has('full'), 'an origin at its limit is pressed')
    assert.ok(claim.waiting.has('full'), 'and its deliveries wait for slots')
    assert.ok(!claim.waiting.has('open'), 'an open circuit waits for its pause, not for slots')
    assert.ok(!claim.pressed.has('free') && !claim.waiting.has('free'), 'an origin that took all that was due is neither')
  })

  it("shares the instance's slots fairly: a slow origin holding most of them leaves the others their share", () => {
    // 16 slots, 14 held by a slow origin with more due: the fast one still gets its half.
    const claim = plan({
      due: [
        { origin: 'slow', wallets: 1 },
        { origin: 'fast', wallets: 1 },
      ],
      free: 2,
      concurrency: 16,
      held: new Map([['slow', 14]]),
    })
    const { asks } = run(claim, { slow: due(1, 50, 1), fast: due(2, 50, 100) })
    assert.deepEqual(
      asks.map((ask) => [ask.origin, ask.slots]),
      [['fast', 2]],
    )
  })

  it('stops at the free slots, and rotates which origin goes first with the turn', () => {
    const origins = [
      { origin: 'a', wallets: 1 },
      { origin: 'b', wallets: 1 },
      { origin: 'c', wallets: 1 },
    ]
    const rows = { a: due(1, 5, 1), b: due(2, 5, 10), c: due(3, 5, 20) }
    const first = run(plan({ due: origins, free: 4, turn: 0 }), rows)
    assert.deepEqual(
      first.asks.map((ask) => ask.origin),
      ['a'],
    )
    assert.equal(first.taken.a.length, 4)
    const second = run(plan({ due: origins, free: 4, turn: 1 }), rows)
    assert.deepEqual(
      second.asks.map((ask) => ask.origin),
      ['b'],
    )
    assert.deepEqual(
      run(plan({ due: origins, free: 4, turn: 5 }), rows).asks.map((ask) => ask.origin),
      ['c'],
    )
  })

  it('reads a few deliveries per wallet, and claims again at once when a wallet had more than was read', () => {
    // 8 slots over 4 wallets: READ_AHEAD × 8 / 4 per wallet, at most the slots.
    const claim = plan({ due: [{ origin: 'a', wallets: 4 }], free: 8, concurrency: 8, limit: () => 8 })
    const first = claim.next()
    assert.deepEqual(first, { origin: 'a', slots: 8, perWallet: Math.min(8, (READ_AHEAD * 8) / 4) })

    // One wallet with a long backlog, 100 wallets: one row each is read, so fewer than the slots may be found.
    const wide = plan({ due: [{ origin: 'a', wallets: 100 }], free: 8, concurrency: 8, limit: () => 8 })
    const ask = wide.next()
    assert.equal(ask?.perWallet, 1)
    const taken = wide.take(ask as NonNullable<typeof ask>, due(1, 1, 1), new Map())
    assert.equal(taken.length, 1)
    assert.equal(wide.lookAgain, true, 'a wallet had as many as were read, and slots are left: look again')
    assert.equal(wide.next(), undefined)
  })

  it("shares an origin's slots among its wallets by their attempts in flight", () => {
    const claim = plan({ due: [{ origin: 'a', wallets: 2 }], free: 4, concurrency: 4, limit: () => 4 })
    const { taken } = run(claim, { a: [...due(1, 10, 1), ...due(2, 10, 100)] }, new Map([[1, 3]]))
    // Wallet 1 has 3 in flight: wallet 2 takes three slots before wallet 1 gets another.
    assert.deepEqual(taken.a, [100, 101, 102, 1])
  })
})

describe("leaseCountChange: a worker's lease counts per origin", () => {
  const until = (s: number) => `2026-01-01T00:00:${String(s).padStart(2, '0')}.000Z`
  const fallbackUntil = () => until(59)

  it('adds what was claimed to what still counts, until the newest lease ends, and writes only what changed', () => {
    const before = new Map([
      ['a', { origin: 'a', leased: 2, leaseUntil: until(10) }],
      ['b', { origin: 'b', leased: 1, leaseUntil: until(5) }],
    ])
    const change = leaseCountChange(
      before,
      new Map([
        ['a', 2],
        ['b', 1],
      ]),
      [
        { origin: 'b', lease_until: until(20) },
        { origin: 'c', lease_until: until(20) },
      ],
      { unsure: false, fallbackUntil },
    )
    assert.deepEqual(change.counts, [
      { origin: 'b', leased: 2, leaseUntil: until(20) },
      { origin: 'c', leased: 1, leaseUntil: until(20) },
    ])
    assert.deepEqual(change.gone, [])
    assert.equal(change.keepOnly, undefined)
    assert.deepEqual(change.after.get('a'), { origin: 'a', leased: 2, leaseUntil: until(10) })
  })

  it('deletes an origin with nothing in flight any more, and rewrites every row when unsure', () => {
    const before = new Map([
      ['a', { origin: 'a', leased: 2, leaseUntil: until(10) }],
      ['b', { origin: 'b', leased: 1, leaseUntil: until(5) }],
    ])
    const quiet = leaseCountChange(before, new Map([['a', 2]]), [], { unsure: false, fallbackUntil })
    assert.deepEqual(quiet.counts, [])
    assert.deepEqual(quiet.gone, ['b'])
    const unsure = leaseCountChange(before, new Map([['a', 2]]), [], { unsure: true, fallbackUntil })
    assert.deepEqual(unsure.counts, [{ origin: 'a', leased: 2, leaseUntil: until(10) }])
    assert.deepEqual(unsure.keepOnly, ['a'])
  })

  it('gives a count without a known lease end the longest a lease taken now lasts', () => {
    const change = leaseCountChange(new Map(), new Map([['a', 1]]), [], { unsure: false, fallbackUntil })
    assert.deepEqual(change.counts, [{ origin: 'a', leased: 1, leaseUntil: until(59) }])
  })
})
