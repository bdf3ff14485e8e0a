import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import type { Database } from '../../src/db/database.ts'
import { batchedWrites } from '../../src/db/coalesce.ts'
import { nowIso } from '../../src/db/dialect.ts'
import { findAssetByName, insertAsset, updateAsset } from '../../src/ledger/assets.repository.ts'
import { findWalletByIdShared } from '../../src/wallets/wallets.repository.ts'
import { openTestDatabase, STORAGE } from '../helpers/app.ts'

/** The statements sent through Kysely from now until `restore` (on SQLite, lookups go straight to the driver). */
function countStatements(database: Database): string[] & { restore: () => void } {
  const executeQuery = database.db.executeQuery.bind(database.db)
  const statements = Object.assign([] as string[], { restore: () => (database.db.executeQuery = executeQuery) })
  database.db.executeQuery = ((query: Parameters<typeof executeQuery>[0]) => {
    statements.push('sql' in query ? query.sql : query.compile().sql)
    return executeQuery(query)
  }) as typeof executeQuery
  return statements
}

describe(`coalesced lookups (${STORAGE})`, () => {
  let database: Database

  before(async () => {
    database = (await openTestDatabase()).database
  })
  after(async () => {
    await database.close()
  })

  it('answers each lookup of a turn with its own key past 256 keys of a kind; on PostgreSQL the turn takes two statements', async () => {
    const gold = await insertAsset(database.db, 'manygold', 1)
    const names = [...Array.from({ length: 300 }, (_, i) => `missing${i}`), 'MANYGOLD', 'manygold']
    const statements = countStatements(database)
    try {
      const found = await Promise.all([...names.map((name) => findAssetByName(database.db, name)), findWalletByIdShared(database.db, 1)])
      assert.deepEqual(found.slice(0, 300), Array(300).fill(undefined))
      assert.equal(found[300]?.id, gold.id)
      assert.equal(found[301]?.id, gold.id)
      assert.equal(found[302], undefined, 'the mint wallet is no recipient')
      if (STORAGE === 'postgres') assert.equal(statements.length, 2)
    } finally {
      statements.restore()
    }
  })

  it('PostgreSQL: fails every lookup of a failing statement with its error, and the next turn reads again', async (context) => {
    if (STORAGE !== 'postgres') return context.skip('SQLite looks each key up at once, on the driver')
    const gold = await insertAsset(database.db, 'failgold', 1)
    const executeQuery = database.db.executeQuery.bind(database.db)
    database.db.executeQuery = (() => Promise.reject(new Error('storage down'))) as typeof executeQuery
    try {
      const results = await Promise.allSettled([
        findAssetByName(database.db, 'failgold'),
        findWalletByIdShared(database.db, 1),
        findAssetByName(database.db, 'other'),
      ])
      assert.deepEqual(
        results.map((result) => (result.status === 'rejected' ? (result.reason as Error).message : 'fulfilled')),
        ['storage down', 'storage down', 'storage down'],
      )
    } finally {
      database.db.executeQuery = executeQuery
    }
    assert.equal((await findAssetByName(database.db, 'failgold'))?.id, gold.id)
  })

  it('PostgreSQL: past 256 keys of a kind, a failing statement fails only the lookups it holds', async (context) => {
    if (STORAGE !== 'postgres') return context.skip('SQLite looks each key up at once, on the driver')
    const gold = await insertAsset(database.db, 'halfgold', 1)
    const executeQuery = database.db.executeQuery.bind(database.db)
    let calls = 0
    database.db.executeQuery = ((query: Parameters<typeof executeQuery>[0]) =>
      ++calls === 1 ? Promise.reject(new Error('storage down')) : executeQuery(query)) as typeof executeQuery
    try {
      const names = [...Array.from({ length: 256 }, (_, i) => `absent${i}`), 'halfgold']
      const results = await Promise.allSettled(names.map((name) => findAssetByName(database.db, name)))
      assert.equal(calls, 2)
      assert.ok(
        results.slice(0, 256).every((result) => result.status === 'rejected' && (result.reason as Error).message === 'storage down'),
      )
      assert.deepEqual(results[256], { status: 'fulfilled', value: gold })
    } finally {
      database.db.executeQuery = executeQuery
    }
  })

  it('never answers from a transaction still open: a lookup made meanwhile sees what it committed, or nothing of it if it rolled back', async () => {
    const gold = await insertAsset(database.db, 'lookupgold', 1)
    const lookups: Promise<unknown>[] = []
    // Renamed inside a transaction that rolls back: a lookup started while it is open must not find the new name.
    await database.db
      .transaction()
      .execute(async (trx) => {
        await updateAsset(trx, gold.id, { name: 'lookupsilver' })
        lookups.push(findAssetByName(database.db, 'lookupsilver'), findAssetByName(database.db, 'lookupgold'))
        await new Promise((resolve) => setTimeout(resolve, 50))
        throw new Error('roll back')
      })
      .catch(() => undefined)
    const [renamed, original] = await Promise.all(lookups)
    assert.equal(renamed, undefined)
    assert.equal((original as { id: number } | undefined)?.id, gold.id)
    // The same rename committed: a lookup started while it was open finds it, as a lookup after the commit would.
    let during: Promise<unknown> | undefined
    await database.db.transaction().execute(async (trx) => {
      await updateAsset(trx, gold.id, { name: 'lookupsilver' })
      during = findAssetByName(database.db, 'lookupsilver')
    })
    if (STORAGE === 'sqlite') assert.equal(((await during) as { id: number } | undefined)?.id, gold.id)
    else await during
    assert.equal((await findAssetByName(database.db, 'lookupsilver'))?.id, gold.id)
    assert.equal(await findAssetByName(database.db, 'lookupgold'), undefined)
  })

  it('lookups of different kinds in one turn answer as each alone would; on PostgreSQL they share one statement', async () => {
    const gold = await insertAsset(database.db, 'turngold', 2.5)
    const silver = await insertAsset(database.db, 'turnsilver', 1)
    const user = (
      await database.db
        .insertInto('users')
        .values({ username: 'turnuser', username_key: 'turnuser', password_hash: 'x', primary_wallet_id: null, created_at: nowIso() })
        .returning('id')
        .executeTakeFirstOrThrow()
    ).id
    const wallet = (
      await database.db
        .insertInto('wallets')
        .values({ address: 'turnwalletaddressxxxxxxxxxxxxxxxxx', user_id: user, created_at: nowIso(), deleted_at: null })
        .returning('id')
        .executeTakeFirstOrThrow()
    ).id
    const alone = [
      await findAssetByName(database.db, 'TurnGold'),
      await findAssetByName(database.db, 'turnsilver'),
      await findAssetByName(database.db, 'nothing'),
      await findWalletByIdShared(database.db, Number(wallet)),
      await findWalletByIdShared(database.db, 1),
    ]
    const statements = countStatements(database)
    try {
      const together = await Promise.all([
        findAssetByName(database.db, 'TurnGold'),
        findAssetByName(database.db, 'turnsilver'),
        findAssetByName(database.db, 'nothing'),
        findWalletByIdShared(database.db, Number(wallet)),
        findWalletByIdShared(database.db, 1),
      ])
      assert.deepEqual(together, alone)
      assert.equal(together[0]?.id, gold.id)
      assert.equal(together[0]?.value, 2.5)
      assert.equal(together[1]?.id, silver.id)
      assert.equal(together[3]?.id, Number(wallet))
      assert.equal(together[3]?.user_id, Number(user))
      // The mint wallet (no user) is no recipient.
      assert.equal(together[4], undefined)
      if (STORAGE === 'postgres') assert.equal(statements.length, 1)
    } finally {
      statements.restore()
    }
  })

  it('batched writes: the keys given in one turn are written by one call, and each caller waits for it', async () => {
    const writes: number[][] = []
    let written = false
    const touch = batchedWrites(async (_db, keys: number[]) => {
      writes.push(keys)
      await new Promise((resolve) => setTimeout(resolve, 20))
      written = true
    })
    await Promise.all(
      [3, 1, 2, 1].map(async (key) => {
        await touch(database.db, key)
        assert.ok(written, 'no caller goes on before the write that holds its key has ended')
      }),
    )
    assert.deepEqual(writes, [[3, 1, 2]])
    // Nothing is kept: a later turn writes again.
    await touch(database.db, 1)
    assert.deepEqual(writes, [[3, 1, 2], [1]])
  })

  it('batched writes: a failing write fails every caller of its batch with its error, and the next batch is written', async () => {
    let fail = true
    const touch = batchedWrites(async () => {
      if (fail) throw new Error('storage down')
    })
    const results = await Promise.allSettled([touch(database.db, 1), touch(database.db, 2)])
    assert.deepEqual(
      results.map((result) => (result.status === 'rejected' ? (result.reason as Error).message : 'fulfilled')),
      ['storage down', 'storage down'],
    )
    fail = false
    await touch(database.db, 1)
  })
})
