import assert from 'node:assert/strict'
import fs from 'node:fs'
import { describe, it } from 'node:test'
import { oncePerTurn, perTurn } from '../../src/db/per-turn.ts'

/** The outcome of each promise: its value, or `error: <message>`. */
async function outcomes<T>(promises: Promise<T>[]): Promise<(T | string)[]> {
  return (await Promise.allSettled(promises)).map((result) =>
    result.status === 'fulfilled' ? result.value : `error: ${(result.reason as Error).message}`,
  )
}

/**
 * The batching that lookups, writes and the commit state share (`src/db/per-turn.ts`); the same
 * on both storages, since it touches no database.
 */
describe('per-turn batching', () => {
  it('runs once for the items of a turn, in the order they came, and answers each caller with its own', async () => {
    const runs: number[][] = []
    const double = perTurn((items: number[]) => {
      runs.push(items)
      return items.map((item) => item * 2)
    })
    const first = [double(3), double(1), double(3)]
    const later = (async () => {
      await Promise.resolve()
      return double(7)
    })()
    assert.deepEqual(runs, [], 'not run while the turn goes on')
    assert.deepEqual(await Promise.all([...first, later]), [6, 2, 6, 14])
    assert.deepEqual(runs, [[3, 1, 3, 7]], "the turn's microtasks included, each item as given")
    // Nothing is kept: the next turn runs again, with its own items only.
    assert.equal(await double(1), 2)
    assert.deepEqual(runs, [[3, 1, 3, 7], [1]])
  })

  it("runs after the I/O callback that handed in the first item, and before the next turn's timers", async () => {
    const runs: string[][] = []
    const record = perTurn((items: string[]) => {
      runs.push(items)
      return items
    })
    const handed = await new Promise<Promise<string>[]>((resolve) =>
      fs.stat('.', () => {
        // In an I/O callback: `setImmediate` comes before any timer, so the timer's item is next turn's.
        const promises = [record('io')]
        queueMicrotask(() => promises.push(record('microtask')))
        setTimeout(() => resolve([...promises, record('timer')]), 0)
      }),
    )
    assert.deepEqual(await Promise.all(handed), ['io', 'microtask', 'timer'])
    assert.deepEqual(runs, [['io', 'microtask'], ['timer']])
  })

  it('sends items that come while a run is running to the next run, and settles each caller once, with its own run', async () => {
    const runs: number[][] = []
    let release: () => void = () => {}
    const released = new Promise<void>((resolve) => (release = resolve))
    let during: Promise<number> | undefined
    const add = perTurn(async (items: number[]) => {
      const run = runs.push(items)
      if (run === 1) {
        during = add(10)
        await released
      }
      return items.map((item) => item + run * 100)
    })
    const first = Promise.all([add(1), add(2)])
    await new Promise((resolve) => setImmediate(resolve))
    const whileWaiting = add(20)
    await new Promise((resolve) => setImmediate(resolve))
    assert.deepEqual(
      runs,
      [
        [1, 2],
        [10, 20],
      ],
      'the second run goes ahead while the first waits',
    )
    assert.equal(
      await Promise.race([first.then(() => 'settled'), new Promise((resolve) => setImmediate(() => resolve('waiting')))]),
      'waiting',
    )
    release()
    assert.deepEqual(await first, [101, 102])
    assert.deepEqual(await Promise.all([during, whileWaiting]), [210, 220])
    assert.deepEqual(
      runs,
      [
        [1, 2],
        [10, 20],
      ],
      'no item run twice',
    )
  })

  it('fails every caller of a run that throws or rejects with its error, one answer that rejects fails its caller alone, and the next turn runs', async () => {
    let mode: 'throw' | 'reject' | 'one' | 'fine' = 'throw'
    const look = perTurn((items: number[]) => {
      if (mode === 'throw') throw new Error('thrown')
      if (mode === 'reject') return Promise.reject(new Error('rejected'))
      return items.map((item) => (mode === 'one' && item === 2 ? Promise.reject(new Error(`statement of ${item} failed`)) : item))
    })
    assert.deepEqual(await outcomes([look(1), look(2)]), ['error: thrown', 'error: thrown'])
    mode = 'reject'
    assert.deepEqual(await outcomes([look(1), look(2)]), ['error: rejected', 'error: rejected'])
    mode = 'one'
    assert.deepEqual(await outcomes([look(1), look(2), look(3)]), [1, 'error: statement of 2 failed', 3])
    mode = 'fine'
    assert.deepEqual(await outcomes([look(1), look(2)]), [1, 2])
  })

  it('reads once a turn for every caller of the turn (oncePerTurn), and again for a caller after the read', async () => {
    let reads = 0
    const read = oncePerTurn(() => ++reads)
    assert.deepEqual(await Promise.all([read(), read(), read()]), [1, 1, 1])
    assert.equal(await read(), 2)
    let fail = true
    const failing = oncePerTurn(async () => {
      if (fail) throw new Error('storage down')
      return 'state'
    })
    assert.deepEqual(await outcomes([failing(), failing()]), ['error: storage down', 'error: storage down'])
    fail = false
    assert.equal(await failing(), 'state')
  })
})
