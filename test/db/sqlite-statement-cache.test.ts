import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import SQLite from 'better-sqlite3'
import { statementCache } from '../../src/db/sqlite-statements.ts'

/** SQLite's prepared statements kept by text (`statementCache`): hot ones survive a stream of one-off texts. */
describe('SQLite statement cache', () => {
  it('prepares a text once and gives the same statement back', () => {
    const sqlite = new SQLite(':memory:')
    const statements = statementCache(sqlite, 4)
    const first = statements.prepare('select 1 as one')
    assert.equal(statements.prepare('select 1 as one'), first)
    assert.deepEqual(first.get(), { one: 1 })
    sqlite.close()
  })

  it('drops the least recently used text, not the first one prepared', () => {
    const sqlite = new SQLite(':memory:')
    const statements = statementCache(sqlite, 3)
    const hot = statements.prepare('select 1')
    const oneOff = new Map<number, unknown>()
    for (let i = 2; i < 50; i++) {
      // A one-off text between two uses of the hot one.
      oneOff.set(i, statements.prepare(`select ${i}`))
      assert.equal(statements.prepare('select 1'), hot, `kept after ${i - 1} one-off texts`)
    }
    // The oldest one-off texts were dropped: preparing one again makes a new statement.
    assert.notEqual(statements.prepare('select 2'), oneOff.get(2))
    assert.equal(statements.prepare('select 1'), hot)
    sqlite.close()
  })

  it('tells whether a transaction is open', () => {
    const sqlite = new SQLite(':memory:')
    const statements = statementCache(sqlite)
    assert.equal(statements.inTransaction(), false)
    sqlite.exec('begin')
    assert.equal(statements.inTransaction(), true)
    sqlite.exec('rollback')
    sqlite.close()
  })
})
