import assert from 'node:assert/strict'
import fs from 'node:fs'
import { after, before, describe, it } from 'node:test'
import { sql } from 'kysely'
import type { Database } from '../../src/db/database.ts'
import { ThreadedSequencer } from '../../src/journal/sequencer-thread.ts'
import { resolveSigningKey } from '../../src/secrets/signing-key.ts'
import { openTestDatabase, STORAGE } from '../helpers/app.ts'

/**
 * PostgreSQL's sequencer on its own thread: it positions what commits when told, reads it from the
 * database, leaves no connection behind when stopped, and tells a failed round instead of throwing.
 */
describe(`the journal's sequencer on its own thread (${STORAGE})`, { skip: STORAGE !== 'postgres' }, () => {
  let database: Database
  let url: string
  let dataDir: string
  let wallet: number
  before(async () => {
    const opened = await openTestDatabase()
    ;({ database, dataDir } = opened)
    url = opened.url as string
    const row = await database.db
      .insertInto('wallets')
      .values({ address: 'threaded-writer', user_id: null, created_at: new Date().toISOString(), deleted_at: null })
      .returning('id')
      .executeTakeFirstOrThrow()
    wallet = Number(row.id)
  })
  after(async () => {
    await database.close()
    fs.rmSync(dataDir, { recursive: true, force: true })
  })

  const connections = async () => {
    const { rows } = await sql<{ count: number }>`select count(*)::int as count from pg_stat_activity
      where datname = current_database() and pid <> pg_backend_pid()`.execute(database.db)
    return rows[0].count
  }

  it('positions what commits, read from the database, and closes its connection when stopped', async () => {
    const errors: Error[] = []
    const before = await connections()
    const sequencer = new ThreadedSequencer({
      options: { databaseUrl: url, dataDir, postgresTimeouts: database.opened?.timeouts },
      key: resolveSigningKey(undefined, dataDir),
      checkpointIntervalMs: 100,
      onError: (error) => errors.push(error),
    })
    sequencer.start()
    try {
      const { rows } = await sql<{ id: number }>`insert into transactions (sending_wallet_id, receiving_wallet_id, memo, created_at, kind)
        select 1, ${wallet}, 'threaded ' || n, ${new Date().toISOString()}, 'transfer' from generate_series(1, 25) as n returning id`.execute(
        database.db,
      )
      sequencer.committed()
      const ids = rows.map((row) => Number(row.id))
      for (let tries = 0; ; tries++) {
        const entries = await database.db
          .selectFrom('journal_entries')
          .select(['transaction_id', 'position', 'hash'])
          .where('transaction_id', 'in', ids)
          .orderBy('position')
          .execute()
        if (entries.length === ids.length) {
          assert.deepEqual(
            entries.map((entry) => Number(entry.transaction_id)),
            ids,
          )
          assert.ok(entries.every((entry) => /^[0-9a-f]{64}$/.test(entry.hash)))
          break
        }
        assert.ok(tries < 500, `${entries.length} of ${ids.length} positioned within 5 s`)
        await new Promise((resolve) => setTimeout(resolve, 10))
      }
      assert.ok((await connections()) > before, 'the thread has a connection of its own')
    } finally {
      await sequencer.stop()
    }
    for (let tries = 0; (await connections()) > before; tries++) {
      assert.ok(tries < 100, "the thread's connection is still open a second after it stopped")
      await new Promise((resolve) => setTimeout(resolve, 10))
    }
    assert.deepEqual(errors, [])
  })

  it('tells a failed round and goes on, and stops', async () => {
    const errors: Error[] = []
    const missing = new URL(url)
    missing.pathname = '/coffer_no_such_database'
    const sequencer = new ThreadedSequencer({
      options: { databaseUrl: missing.toString(), dataDir },
      key: resolveSigningKey(undefined, dataDir),
      checkpointIntervalMs: 100,
      onError: (error) => errors.push(error),
    })
    sequencer.start()
    try {
      for (let tries = 0; errors.length < 2; tries++) {
        assert.ok(tries < 500, `${errors.length} failed rounds told within 5 s`)
        await new Promise((resolve) => setTimeout(resolve, 10))
      }
      assert.match(errors[0].message, /coffer_no_such_database|does not exist|storage/i)
    } finally {
      await sequencer.stop()
    }
  })
})
