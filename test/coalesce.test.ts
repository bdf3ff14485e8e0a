import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import type { Database } from '../src/db/database.ts'
import { coalesced } from '../src/db/coalesce.ts'
import { openTestDatabase, STORAGE } from './helpers/app.ts'

describe(`coalesced lookups (${STORAGE})`, () => {
  let database: Database

  before(async () => {
    database = (await openTestDatabase()).database
  })
  after(async () => {
    await database.close()
  })

  it('answers each caller with its own key; on PostgreSQL, concurrent lookups share one query', async () => {
    const batches: number[][] = []
    const lookup = coalesced(database.db, async (keys: number[]) => {
      batches.push(keys)
      return new Map(keys.filter((key) => key % 2 === 0).map((key) => [key, `value ${key}`]))
    })
    const answers = await Promise.all([1, 2, 3, 4, 4].map((key) => lookup(key)))
    assert.deepEqual(answers, [undefined, 'value 2', undefined, 'value 4', 'value 4'])
    if (STORAGE === 'postgres') assert.deepEqual(batches, [[1, 2, 3, 4]])
    else assert.equal(batches.length, 5)
    // Nothing is cached: a later lookup of the same key reads again.
    assert.equal(await lookup(2), 'value 2')
    assert.equal(batches.length, STORAGE === 'postgres' ? 2 : 6)
  })

  it('fails every lookup of a failing query with its error', async () => {
    const lookup = coalesced(database.db, async (): Promise<Map<number, string>> => {
      throw new Error('storage down')
    })
    const results = await Promise.allSettled([lookup(1), lookup(2)])
    assert.deepEqual(
      results.map((result) => (result.status === 'rejected' ? (result.reason as Error).message : 'fulfilled')),
      ['storage down', 'storage down'],
    )
  })
})
