import assert from 'node:assert/strict'
import fs from 'node:fs'
import { after, before, describe, it } from 'node:test'
import { sql } from 'kysely'
import type { Database } from '../../src/db/database.ts'
import { inTransaction, insertRows, rowsWrite, runWrites } from '../../src/db/dialect.ts'
import { openTestDatabase, STORAGE } from '../helpers/app.ts'

/**
 * `rowsWrite`, `insertRows` and `runWrites` (db/dialect.ts), the statements of every batch the ledger writes:
 * one `unnest` statement on PostgreSQL, one prepared statement run once per row on SQLite. Both
 * must store the same values with the same types, and give back what `returning` names.
 */
describe(`row writes (${STORAGE})`, () => {
  let database: Database
  let dataDir: string

  const COLUMNS = [
    ['id', 'bigint'],
    ['quantity', 'bigint'],
    ['label', 'text'],
  ] as const

  before(async () => {
    ;({ database, dataDir } = await openTestDatabase())
    await sql`create table row_writes (id bigint primary key, quantity bigint not null, label text)`.execute(database.db)
  })
  after(async () => {
    await database.close()
    fs.rmSync(dataDir, { recursive: true, force: true })
  })

  const insert = (rows: unknown[][]) =>
    inTransaction(database, (trx) =>
      runWrites(trx, [
        rowsWrite(
          trx,
          COLUMNS,
          rows,
          (r) =>
            sql`insert into row_writes (id, quantity, label) select id, quantity, label from ${r} where true on conflict (id) do nothing`,
          'id',
        ),
      ]),
    )

  /** The rows stored from id `from` are these; on SQLite integer columns hold integers, not reals (as `json_each` gave them). */
  const assertStoredFrom = async (from: number, rows: unknown[][]) => {
    const stored = await sql<{
      id: number
      quantity: number
      label: string | null
    }>`select id, quantity, label from row_writes where id >= ${from} order by id`.execute(database.db)
    assert.deepEqual(
      stored.rows.map((row) => [Number(row.id), Number(row.quantity), row.label]),
      rows,
    )
    if (STORAGE !== 'sqlite') return
    const types = await sql<{
      types: string
    }>`select group_concat(distinct typeof(id) || '/' || typeof(quantity)) as types from row_writes where id >= ${from}`.execute(
      database.db,
    )
    assert.equal(types.rows[0].types, 'integer/integer')
  }

  it('stores integers as integers and text as given (quotes, backslashes, new lines, NUL-free unicode, null)', async () => {
    const labels = ['plain', 'with "quotes" and \\backslashes\\', 'two\nlines\ttab', 'ünïcode ✓ 🪙', '', null]
    const rows = labels.map((label, i) => [i + 1, 9_007_199_254_740_991 - i, label])
    const [returned] = await insert(rows)
    assert.deepEqual(
      returned.map((row) => Number(row.id)).sort((a, b) => a - b),
      [1, 2, 3, 4, 5, 6],
    )
    await assertStoredFrom(0, rows)
  })

  it('gives back only the rows a conflict let through, and writes nothing for no rows', async () => {
    const [returned] = await insert([
      [1, 5, 'again'],
      [7, 5, 'new'],
    ])
    assert.deepEqual(
      returned.map((row) => Number(row.id)),
      [7],
    )
    assert.deepEqual(await insert([]), [[]])
    const count = await sql<{ count: number | string }>`select count(*) as count from row_writes`.execute(database.db)
    assert.equal(Number(count.rows[0].count), 7)
  })

  it('inserts plain rows, in chunks and one by one, with the types rowsWrite gives them', async () => {
    // 4 + 16 + 64 + 256 rows and 3 more: every chunk size and the single-row statement.
    const rows = Array.from({ length: 343 }, (_, i) => [1_000 + i, 9_007_199_254_740_991 - i, i % 7 === 0 ? null : `row "${i}" ✓`])
    await inTransaction(database, (trx) => runWrites(trx, [insertRows(trx, 'row_writes', COLUMNS, rows)]))
    await assertStoredFrom(1_000, rows)
  })

  it('inserts each row once when a chunk size runs several times in one write', async () => {
    // 2 × 256 + 64 + 16 + 2 × 4: the parameters of one chunk size are refilled between runs.
    const rows = Array.from({ length: 600 }, (_, i) => [5_000 + i, i * 3, i % 5 === 0 ? null : `chunked ${i}`])
    await inTransaction(database, (trx) => runWrites(trx, [insertRows(trx, 'row_writes', COLUMNS, rows)]))
    await assertStoredFrom(5_000, rows)
  })

  it(
    'refuses, on SQLite, a statement that binds a value of its own (one text must serve every row)',
    { skip: STORAGE !== 'sqlite' },
    async () => {
      await assert.rejects(
        inTransaction(database, (trx) =>
          runWrites(trx, [
            rowsWrite(
              trx,
              COLUMNS,
              [[100, 1, 'x']],
              (r) => sql`insert into row_writes (id, quantity, label) select id, quantity + ${1}, label from ${r}`,
            ),
          ]),
        ),
        /literals for every value but the rows/,
      )
      const count = await sql<{ count: number | string }>`select count(*) as count from row_writes where id = 100`.execute(database.db)
      assert.equal(Number(count.rows[0].count), 0)
    },
  )
})
