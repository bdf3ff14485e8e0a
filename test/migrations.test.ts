import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, before, describe, it } from 'node:test'
import SQLite from 'better-sqlite3'
import { sql } from 'kysely'
import { openSqlite, SQLITE_PAGE_SIZE, type Db } from '../src/db/database.ts'
import { migrateTo, migrateToLatest, MIGRATION_NAMES } from '../src/db/migrate.ts'
import { readEventsAfter } from '../src/events/events.repository.ts'
import { verifyLedger } from '../src/ledger/verify.ts'
import { buildTestApp, STORAGE, type TestApp } from './helpers/app.ts'
import { createUser } from './helpers/factories.ts'

/** A numeric SQLite setting of `db`'s connection. */
async function pragma(db: Db, name: string): Promise<number> {
  const { rows } = await sql.raw<Record<string, number>>(`pragma ${name}`).execute(db)
  return Object.values(rows[0])[0]
}

/** Migrations that change data must keep what clients already saw, byte for byte. */
describe(`migrations (${STORAGE})`, () => {
  let t: TestApp

  before(async () => {
    t = await buildTestApp()
  })
  after(async () => {
    await t.close()
  })

  it('new SQLite files get the page size chosen for the ledger\'s writes', { skip: STORAGE !== 'sqlite' && 'SQLite only' }, async () => {
    // SQLite's default is 4096.
    assert.equal(await pragma(t.database.db, 'page_size'), SQLITE_PAGE_SIZE)
  })

  it('an existing SQLite file keeps its page size, and a server\'s commits checkpoint only past 40 MB of log either way', { skip: STORAGE !== 'sqlite' && 'SQLite only' }, async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'coffer-pages-'))
    const older = path.join(dir, 'older.sqlite')
    const made = new SQLite(older)
    made.pragma('journal_mode = WAL')
    made.close()
    for (const [file, pageSize] of [
      [older, 4096],
      [path.join(dir, 'new.sqlite'), SQLITE_PAGE_SIZE],
    ] as const) {
      const database = openSqlite(file, { backgroundCheckpoints: true })
      assert.equal(await pragma(database.db, 'page_size'), pageSize)
      assert.equal((await pragma(database.db, 'wal_autocheckpoint')) * pageSize, 40 * 1024 * 1024)
      await database.close()
    }
    fs.rmSync(dir, { recursive: true, force: true })
  })

  it('0004 keeps every event payload exactly, down and up again', async () => {
    const asset = (await t.app.inject({ method: 'POST', url: '/assets', headers: t.admin, payload: { name: 'gold', value: 1 } })).json() as { id: number }
    const [alice, bob] = [await createUser(t.app), await createUser(t.app)]
    assert.equal((await t.app.inject({ method: 'POST', url: `/wallets/${alice.walletId}/assets`, headers: t.admin, payload: { id: asset.id, quantity: 10 } })).statusCode, 201)
    // A memo with quotes, a backslash, a newline and non-ASCII text: the body is cut out of the stored payload as text.
    const memo = 'rent "May"\\ \n für Zoë ✓'
    const sent = await t.app.inject({ method: 'POST', url: '/wallet/transactions', headers: alice.auth, payload: { recipient: bob.username, assets: { gold: 3 }, memo } })
    assert.equal(sent.statusCode, 201, sent.body)
    const db = t.database.db
    const before = (await readEventsAfter(db, 0, 100)).rows
    assert.equal(before.length, 3)
    assert.deepEqual(JSON.parse(before[2].payload).data, sent.json())

    await migrateTo(db, '0003_holdings_without_asset_index')
    const stored = await sql<{ id: number; payload: string }>`select id, payload from events order by id`.execute(db)
    assert.deepEqual(
      stored.rows.map((row) => row.payload),
      before.map((event) => event.payload),
    )

    assert.deepEqual(await migrateToLatest(db), MIGRATION_NAMES.slice(MIGRATION_NAMES.indexOf('0004_transaction_body')))
    assert.deepEqual((await readEventsAfter(db, 0, 100)).rows, before)
  })

  it('0005 (PostgreSQL) trades the journal\'s foreign keys for rows that are never deleted, and back', { skip: STORAGE !== 'postgres' && 'PostgreSQL only' }, async () => {
    const asset = (await t.app.inject({ method: 'POST', url: '/assets', headers: t.admin, payload: { name: 'iron', value: 1 } })).json() as { id: number }
    const alice = await createUser(t.app)
    assert.equal((await t.app.inject({ method: 'POST', url: `/wallets/${alice.walletId}/assets`, headers: t.admin, payload: { id: asset.id, quantity: 5 } })).statusCode, 201)
    const db = t.database.db
    const foreignKeys = async () =>
      Number(
        (
          await sql<{ count: string }>`
            select count(*) as count from pg_constraint
            where contype = 'f' and conrelid in ('transactions'::regclass, 'transaction_assets'::regclass, 'events'::regclass)`.execute(db)
        ).rows[0].count,
      )
    const refused = async (statement: string) => {
      await assert.rejects(sql.raw(statement).execute(db), (error: { code?: string; message?: string }) => {
        assert.equal(error.code, '23001', error.message)
        assert.match(String(error.message), /are never deleted/)
        return true
      })
    }

    assert.equal(await foreignKeys(), 0)
    await refused(`delete from wallets where id = ${alice.walletId}`)
    await refused(`delete from assets where id = ${asset.id}`)
    await refused('delete from transactions')
    await refused('truncate transactions')
    assert.equal((await verifyLedger(db)).ok, true)

    await migrateTo(db, '0004_transaction_body')
    assert.equal(await foreignKeys(), 6)
    await assert.rejects(sql`update events set transaction_id = 9999`.execute(db), { code: '23503' })

    assert.deepEqual(await migrateToLatest(db), MIGRATION_NAMES.slice(MIGRATION_NAMES.indexOf('0005_ledger_references')))
    assert.equal(await foreignKeys(), 0)
    await refused('delete from transactions')
  })
})
