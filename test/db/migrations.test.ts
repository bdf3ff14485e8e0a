import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, before, describe, it } from 'node:test'
import SQLite from 'better-sqlite3'
import { sql } from 'kysely'
import { openSqlite, SQLITE_PAGE_SIZE, type Db } from '../../src/db/database.ts'
import { migrateTo, migrateToLatest, MIGRATION_NAMES } from '../../src/db/migrate.ts'
import { readEventsAfter } from '../../src/events/events.repository.ts'
import { subtreeHash } from '../../src/journal/merkle.ts'
import { findSigningKey, verifyJournal } from '../../src/journal/verify-journal.ts'
import { verifyLedger } from '../../src/ledger/verify.ts'
import { buildTestApp, journalSettled, STORAGE, type TestApp } from '../helpers/app.ts'
import { createAsset, createUser, fundedUser, sendTransaction, setWebhook, transfer, type TestUser } from '../helpers/factories.ts'
import { startReceiver, waitUntil } from '../helpers/receiver.ts'

/** A numeric SQLite setting of `db`'s connection. */
async function pragma(db: Db, name: string): Promise<number> {
  const { rows } = await sql.raw<Record<string, number>>(`pragma ${name}`).execute(db)
  return Object.values(rows[0])[0]
}

/** What the wallets see of their webhooks: each one's delivery log, its backlog header, and the backlog `GET /wallet/webhook` answers. */
async function webhookViews(t: TestApp, users: TestUser[]): Promise<unknown[]> {
  const seen: unknown[] = []
  for (const user of users) {
    const log = await t.app.inject({ method: 'GET', url: '/wallet/webhook/deliveries', headers: user.auth })
    assert.equal(log.statusCode, 200, log.body)
    seen.push(
      log.json(),
      log.headers['coffer-backlog-pending'],
      (await t.app.inject({ method: 'GET', url: '/wallet/webhook', headers: user.auth })).json().backlog.pending,
    )
  }
  return seen
}

/** Every event the stream's feed reads, without the ids it passes that name none (mint's side of a transaction). */
async function streamed(db: Db, limit: number) {
  return (await readEventsAfter(db, 0, limit)).rows.filter((row) => !row.gap)
}

/** The indexes of `webhook_deliveries`, by name. */
async function deliveryIndexes(db: Db): Promise<string[]> {
  return STORAGE === 'postgres'
    ? (
        await sql<{ name: string }>`select indexname as name from pg_indexes where tablename = 'webhook_deliveries' order by 1`.execute(db)
      ).rows.map((row) => row.name)
    : (
        await sql<{
          name: string
        }>`select name from sqlite_master where type = 'index' and tbl_name = 'webhook_deliveries' and sql is not null order by 1`.execute(
          db,
        )
      ).rows.map((row) => row.name)
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

  it("new SQLite files get the page size chosen for the ledger's writes", { skip: STORAGE !== 'sqlite' && 'SQLite only' }, async () => {
    // SQLite's default is 4096.
    assert.equal(await pragma(t.database.db, 'page_size'), SQLITE_PAGE_SIZE)
  })

  it(
    "an existing SQLite file keeps its page size, and a server's commits checkpoint only past 40 MB of log either way",
    { skip: STORAGE !== 'sqlite' && 'SQLite only' },
    async () => {
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
    },
  )

  it('0004 keeps every event payload exactly, down and up again', async () => {
    const asset = (
      await t.app.inject({ method: 'POST', url: '/assets', headers: t.admin, payload: { name: 'gold', value: 1 } })
    ).json() as { id: number }
    const [alice, bob] = [await createUser(t.app), await createUser(t.app)]
    assert.equal(
      (
        await t.app.inject({
          method: 'POST',
          url: `/wallets/${alice.walletId}/assets`,
          headers: t.admin,
          payload: { id: asset.id, quantity: 10 },
        })
      ).statusCode,
      201,
    )
    // A memo with quotes, a backslash, a newline and non-ASCII text: the body is cut out of the stored payload as text.
    const memo = 'rent "May"\\ \n für Zoë ✓'
    const sent = await t.app.inject({
      method: 'POST',
      url: '/wallet/transactions',
      headers: alice.auth,
      payload: { recipient: bob.username, assets: { gold: 3 }, memo },
    })
    assert.equal(sent.statusCode, 201, sent.body)
    const db = t.database.db
    const before = await streamed(db, 100)
    assert.equal(before.length, 3)
    assert.deepEqual(JSON.parse(before[2].payload).data, sent.json())

    await migrateTo(db, '0003_holdings_without_asset_index')
    const stored = await sql<{ id: number; payload: string }>`select id, payload from events order by id`.execute(db)
    // Before 0008 the data carried no kind or metadata, which 0008 adds at the end of it, nor the
    // journal's position and hash, which 0015 adds after them.
    assert.deepEqual(
      stored.rows.map((row) => row.payload),
      before.map((event) => event.payload.replace(/,"kind":"[a-z]+","metadata":\{\},"position":null,"hash":null\}\}$/, '}}')),
    )

    assert.deepEqual(await migrateToLatest(db), MIGRATION_NAMES.slice(MIGRATION_NAMES.indexOf('0004_transaction_body')))
    assert.deepEqual(await streamed(db, 100), before)
  })

  it(
    "0005 (PostgreSQL) trades the journal's foreign keys for rows that are never deleted, and back",
    { skip: STORAGE !== 'postgres' && 'PostgreSQL only' },
    async () => {
      const asset = (
        await t.app.inject({ method: 'POST', url: '/assets', headers: t.admin, payload: { name: 'iron', value: 1 } })
      ).json() as { id: number }
      const alice = await createUser(t.app)
      assert.equal(
        (
          await t.app.inject({
            method: 'POST',
            url: `/wallets/${alice.walletId}/assets`,
            headers: t.admin,
            payload: { id: asset.id, quantity: 5 },
          })
        ).statusCode,
        201,
      )
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
    },
  )
  it('0008 gives old transactions their kind from their sides, and their stored answers kind and metadata', async () => {
    const asset = (
      await t.app.inject({ method: 'POST', url: '/assets', headers: t.admin, payload: { name: 'copper', value: 1 } })
    ).json() as { id: number }
    const [alice, bob] = [await createUser(t.app), await createUser(t.app)]
    const issued = await t.app.inject({
      method: 'POST',
      url: `/wallets/${alice.walletId}/assets`,
      headers: t.admin,
      payload: { id: asset.id, quantity: 10 },
    })
    assert.equal(issued.statusCode, 201, issued.body)
    // A transfer whose memo is a sweep's, from a wallet that is not deleted: still a transfer.
    const headers = { ...alice.auth, 'idempotency-key': 'k-0008' }
    const sent = await t.app.inject({
      method: 'POST',
      url: '/wallet/transactions',
      headers,
      payload: { recipient: bob.username, assets: { copper: 4 }, memo: 'wallet deleted' },
    })
    assert.equal(sent.statusCode, 201, sent.body)
    assert.equal(sent.json().kind, 'transfer')
    assert.equal(
      (await t.app.inject({ method: 'DELETE', url: `/wallets/${alice.walletId}/assets/${asset.id}?quantity=1`, headers: t.admin }))
        .statusCode,
      204,
    )
    // A second wallet of bob's, funded, then deleted: its holdings swept to his primary wallet.
    const created = await t.app.inject({ method: 'POST', url: '/user/wallets', headers: bob.auth, payload: {} })
    assert.equal(created.statusCode, 201, created.body)
    const spare = created.json() as { id: number }
    assert.equal(
      (await t.app.inject({ method: 'POST', url: `/wallets/${spare.id}/assets`, headers: t.admin, payload: { id: asset.id, quantity: 2 } }))
        .statusCode,
      201,
    )
    assert.equal(
      (await t.app.inject({ method: 'PUT', url: '/user/session/wallet', headers: bob.auth, payload: { wallet_id: spare.id } })).statusCode,
      200,
    )
    assert.equal((await t.app.inject({ method: 'DELETE', url: '/wallet', headers: bob.auth })).statusCode, 204)

    const db = t.database.db
    const journal = async () =>
      (await t.app.inject({ method: 'GET', url: `/admin/transactions?wallet=${alice.walletId}&limit=100`, headers: t.admin })).json() as {
        id: number
        kind: string
      }[]
    const kinds = async () =>
      (await sql<{ id: number; kind: string }>`select id, kind from transactions order by id`.execute(db)).rows.map((row) => [
        Number(row.id),
        row.kind,
      ])
    const bodies = async () =>
      (await sql<{ body: string }>`select body from transactions order by id`.execute(db)).rows.map((row) => row.body)
    const events = await streamed(db, 1000)
    // The journal's positions and hashes follow the commits within a second; compared once given.
    await journalSettled(db)
    const [kindsBefore, bodiesBefore, journalBefore] = [await kinds(), await bodies(), await journal()]
    assert.deepEqual(
      kindsBefore.slice(-5).map(([, kind]) => kind),
      ['issuance', 'transfer', 'burn', 'issuance', 'sweep'],
    )

    await migrateTo(db, '0007_retention_and_shared_limits')
    const columns = (await sql<{ body: string }>`select body from transactions order by id`.execute(db)).rows
    assert.ok(columns.every((row) => !row.body.includes('"kind"')))
    await migrateToLatest(db)
    // The upgrade positions the history again in id order: the same positions and hashes.
    await journalSettled(db)
    assert.deepEqual(await kinds(), kindsBefore)
    assert.deepEqual(await bodies(), bodiesBefore)
    assert.deepEqual(await streamed(db, 1000), events)
    assert.deepEqual(await journal(), journalBefore)
    // The stored answer of the Idempotency-Key too.
    const replayed = await t.app.inject({
      method: 'POST',
      url: '/wallet/transactions',
      headers,
      payload: { recipient: bob.username, assets: { copper: 4 }, memo: 'wallet deleted' },
    })
    assert.equal(replayed.headers['idempotent-replayed'], 'true')
    assert.deepEqual(replayed.json(), sent.json())
    assert.deepEqual(replayed.json().metadata, {})
    assert.equal((await verifyLedger(db)).ok, true)
  })

  it('0012 drops what no reader of the deliveries uses, and back, with deliveries present; the log answers as before', async () => {
    // An app of its own: a failed delivery waits an hour for its retry, so nothing moves while the schema does.
    const own = await buildTestApp({ WEBHOOK_RETRY_SCHEDULE: '3600' })
    const receiver = await startReceiver((request) => ({ status: request.path === '/fails' ? 500 : 200 }))
    try {
      const db = own.database.db
      const asset = (
        await own.app.inject({ method: 'POST', url: '/assets', headers: own.admin, payload: { name: 'tin', value: 1 } })
      ).json() as { id: number }
      const [alice, bob, carol] = [await createUser(own.app), await createUser(own.app), await createUser(own.app)]
      assert.equal(
        (
          await own.app.inject({
            method: 'POST',
            url: `/wallets/${alice.walletId}/assets`,
            headers: own.admin,
            payload: { id: asset.id, quantity: 10 },
          })
        ).statusCode,
        201,
      )
      await setWebhook(own, bob, `${receiver.url}/works`)
      await setWebhook(own, carol, `${receiver.url}/fails`)
      for (const to of [bob, carol, bob]) await transfer(own, alice, to.username, { tin: 1 })
      const statuses = async () =>
        (await db.selectFrom('webhook_deliveries').select(['id', 'status', 'attempts']).orderBy('id').execute()).map(
          (row) => `${row.id} ${row.status} ${row.attempts}`,
        )
      // Bob's two delivered, carol's tried once and pending until its retry.
      await waitUntil(
        async () => {
          const rows = await statuses()
          return rows.length === 3 && rows.every((row) => row.endsWith(' 1'))
        },
        10_000,
        'every delivery to be attempted once',
      )
      const stored = await statuses()
      assert.equal(stored.filter((row) => row.includes(' delivered ')).length, 2)
      assert.equal(stored.filter((row) => row.includes(' pending ')).length, 1)
      const views = () => webhookViews(own, [bob, carol])
      const indexes = () => deliveryIndexes(db)
      const foreignKeys = async () =>
        STORAGE === 'postgres'
          ? Number(
              (
                await sql<{
                  count: string
                }>`select count(*) as count from pg_constraint where contype = 'f' and conrelid = 'webhook_deliveries'::regclass`.execute(
                  db,
                )
              ).rows[0].count,
            )
          : (await sql`pragma foreign_key_list(webhook_deliveries)`.execute(db)).rows.length
      // `webhook_deliveries_leased` went in 0014 (below).
      const kept = ['webhook_deliveries_event', 'webhook_deliveries_pending', 'webhook_deliveries_wallet']
      const seen = await views()

      assert.deepEqual(
        (await indexes()).filter((name) => !name.endsWith('_pkey')),
        kept,
      )
      // SQLite keeps the wallet's; the event's went in 0041, as a derived event has no row.
      assert.equal(await foreignKeys(), STORAGE === 'postgres' ? 0 : 1)

      await migrateTo(db, '0011_webhook_origins')
      assert.deepEqual(
        (await indexes()).filter((name) => !name.endsWith('_pkey')),
        [...kept, 'webhook_deliveries_due', 'webhook_deliveries_leased'].sort(),
      )
      assert.equal(await foreignKeys(), 2)
      assert.deepEqual(await statuses(), stored)

      assert.deepEqual(await migrateToLatest(db), MIGRATION_NAMES.slice(MIGRATION_NAMES.indexOf('0012_lean_webhook_deliveries')))
      assert.deepEqual(
        (await indexes()).filter((name) => !name.endsWith('_pkey')),
        kept,
      )
      assert.equal(await foreignKeys(), STORAGE === 'postgres' ? 0 : 1)
      assert.deepEqual(await statuses(), stored)
      assert.deepEqual(await views(), seen)

      // The worker finds what is queued next, with the index it used gone.
      await transfer(own, alice, bob.username, { tin: 1 })
      await receiver.waitForEvents(3)
      // What the foreign keys checked, `coffer verify` checks: an event a delivery names is a row or a transaction's.
      const [first] = await db.selectFrom('webhook_deliveries').select(['id', 'event_id']).orderBy('id').limit(1).execute()
      await sql`update webhook_deliveries set event_id = 999999999 where id = ${first.id}`.execute(db)
      const report = await verifyLedger(db)
      assert.deepEqual(report.problems, ['1 webhook_deliveries rows name a missing event in event_id'])
      await sql`update webhook_deliveries set event_id = ${first.event_id} where id = ${first.id}`.execute(db)
      assert.equal((await verifyLedger(db)).ok, true)
    } finally {
      await receiver.close()
      await own.close()
    }
  })
  it('0014 counts leases per worker and origin instead of indexing them, and back, with deliveries leased and pending; the log answers as before', async () => {
    // A failed delivery waits an hour for its retry; a hanging receiver holds the other under its lease.
    const own = await buildTestApp({ WEBHOOK_RETRY_SCHEDULE: '3600', WEBHOOK_TIMEOUT_MS: '60000' })
    const receiver = await startReceiver((request) =>
      request.path === '/hangs' ? { hang: true } : { status: request.path === '/fails' ? 500 : 200 },
    )
    try {
      const db = own.database.db
      const asset = (
        await own.app.inject({ method: 'POST', url: '/assets', headers: own.admin, payload: { name: 'tin', value: 1 } })
      ).json() as { id: number }
      const [alice, bob, carol, dave] = [
        await createUser(own.app),
        await createUser(own.app),
        await createUser(own.app),
        await createUser(own.app),
      ]
      assert.equal(
        (
          await own.app.inject({
            method: 'POST',
            url: `/wallets/${alice.walletId}/assets`,
            headers: own.admin,
            payload: { id: asset.id, quantity: 10 },
          })
        ).statusCode,
        201,
      )
      await setWebhook(own, bob, `${receiver.url}/works`)
      await setWebhook(own, carol, `${receiver.url}/fails`)
      await setWebhook(own, dave, `${receiver.url}/hangs`)
      for (const to of [bob, carol, dave]) await transfer(own, alice, to.username, { tin: 1 })
      const statuses = async () =>
        (await db.selectFrom('webhook_deliveries').select(['id', 'status', 'attempts', 'lease_until']).orderBy('id').execute()).map(
          (row) => `${row.id} ${row.status} ${row.attempts} ${row.lease_until === null ? 'free' : 'leased'}`,
        )
      await waitUntil(
        async () => {
          const rows = await statuses()
          return (
            rows.length === 3 &&
            rows.filter((row) => row.endsWith(' 1 free')).length === 2 &&
            rows.some((row) => row.endsWith(' pending 0 leased'))
          )
        },
        10_000,
        'two deliveries attempted once, the third in flight',
      )
      const stored = await statuses()
      const views = () => webhookViews(own, [bob, carol, dave])
      const seen = await views()
      const indexes = () => deliveryIndexes(db)
      const countsTable = async () =>
        STORAGE === 'postgres'
          ? Number(
              (await sql<{ count: string }>`select count(*) as count from pg_tables where tablename = 'webhook_lease_counts'`.execute(db))
                .rows[0].count,
            )
          : (await sql`select name from sqlite_master where type = 'table' and name = 'webhook_lease_counts'`.execute(db)).rows.length
      const fillfactor = async () =>
        STORAGE === 'postgres'
          ? (
              await sql<{
                options: string[] | null
              }>`select reloptions as options from pg_class where relname = 'webhook_deliveries'`.execute(db)
            ).rows[0].options
          : null
      const kept = ['webhook_deliveries_event', 'webhook_deliveries_pending', 'webhook_deliveries_wallet']
      assert.deepEqual(
        (await indexes()).filter((name) => !name.endsWith('_pkey')),
        kept,
      )
      assert.deepEqual(await fillfactor(), STORAGE === 'postgres' ? ['fillfactor=90'] : null)
      // The worker's count of the attempt in flight.
      assert.deepEqual(
        (await db.selectFrom('webhook_lease_counts').select(['origin', 'leased']).execute()).map((row) => [row.origin, Number(row.leased)]),
        [[new URL(receiver.url).origin, 1]],
      )

      await migrateTo(db, '0013_page_label_generation')
      assert.deepEqual(
        (await indexes()).filter((name) => !name.endsWith('_pkey')),
        [...kept, 'webhook_deliveries_leased'].sort(),
      )
      assert.equal(await countsTable(), 0)
      assert.deepEqual(await fillfactor(), null)
      assert.deepEqual(await statuses(), stored)

      assert.deepEqual(await migrateToLatest(db), MIGRATION_NAMES.slice(MIGRATION_NAMES.indexOf('0014_webhook_lease_counts')))
      assert.deepEqual(
        (await indexes()).filter((name) => !name.endsWith('_pkey')),
        kept,
      )
      assert.equal(await countsTable(), 1)
      assert.deepEqual(await fillfactor(), STORAGE === 'postgres' ? ['fillfactor=90'] : null)
      assert.deepEqual(await statuses(), stored)
      assert.deepEqual(await views(), seen)

      // The worker goes on: what is queued next is delivered, and its count written again.
      await transfer(own, alice, bob.username, { tin: 1 })
      await receiver.waitForEvents(4)
      assert.equal((await verifyLedger(db)).ok, true)
    } finally {
      await receiver.close()
      await own.close()
    }
  })

  it('0031 stores the key-only ledger tables without rowid on SQLite, and back, every row kept; verify holds', async () => {
    const db = t.database.db
    const asset = await createAsset(t, { name: 'lean' })
    const alice = await fundedUser(t, [[asset, 10]])
    const bob = await createUser(t.app)
    for (let i = 0; i < 3; i++)
      await sendTransaction(t, alice, { recipient: bob.username, assets: { lean: 1 }, metadata: { order: `o${i}` } })
    await journalSettled(db)
    const tables = ['running_balances', 'transaction_metadata', 'journal_nodes']
    const rows = async () => {
      const all: Record<string, unknown[]> = {}
      // The journal's subtrees below 16 leaves are stored below 0039 only.
      const only = (table: string) => (table === 'journal_nodes' ? sql`where level >= 4` : sql``)
      for (const table of tables)
        all[table] = (await sql`select * from ${sql.table(table)} ${only(table)} order by 1, 2, 3`.execute(db)).rows
      return all
    }
    const withoutRowid = async () =>
      STORAGE === 'postgres'
        ? []
        : (await sql<{ name: string }>`select name from pragma_table_list where wr = 1 order by name`.execute(db)).rows
            .map((row) => row.name)
            .filter((name) => tables.includes(name))
    const stored = await rows()
    assert.ok(stored.running_balances.length >= 8 && stored.transaction_metadata.length >= 9, JSON.stringify(stored))
    assert.deepEqual(await withoutRowid(), STORAGE === 'postgres' ? [] : [...tables].sort())

    await migrateTo(db, '0026_session_user_agents')
    assert.deepEqual(await withoutRowid(), [])
    assert.deepEqual(await rows(), stored)
    await migrateToLatest(db)
    assert.deepEqual(await withoutRowid(), STORAGE === 'postgres' ? [] : [...tables].sort())
    assert.deepEqual(await rows(), stored)
    const verified = await verifyLedger(db)
    assert.ok(verified.ok, verified.problems.join('\n'))
  })

  it('0038 drops the unique index of event ids, and back, every event and delivery kept; the stream answers as before', async () => {
    const db = t.database.db
    const receiver = await startReceiver(() => ({ status: 200 }))
    try {
      const asset = await createAsset(t, { name: 'evtidx' })
      const alice = await fundedUser(t, [[asset, 10]])
      const bob = await createUser(t.app)
      await setWebhook(t, bob, `${receiver.url}/hook`)
      for (let i = 0; i < 3; i++) await transfer(t, alice, bob.username, { evtidx: 1 })
      await receiver.waitForEvents(3)
      const events = async () => (await sql<Record<string, unknown>>`select * from events order by id`.execute(db)).rows
      const deliveries = async () => (await sql`select id, event_id, wallet_id from webhook_deliveries order by id`.execute(db)).rows
      const uniqueIndexes = async () =>
        STORAGE === 'postgres'
          ? Number(
              (
                await sql<{
                  count: string
                }>`select count(*) as count from pg_constraint where contype = 'u' and conrelid = 'events'::regclass`.execute(db)
              ).rows[0].count,
            )
          : (await sql`select name from pragma_index_list('events') where origin = 'u'`.execute(db)).rows.length
      const stream = async () => await streamed(db, 1000)
      const stored = { deliveries: await deliveries(), stream: await stream() }
      assert.ok(stored.stream.length >= 6 && stored.deliveries.length >= 3, JSON.stringify(stored))
      assert.equal(await uniqueIndexes(), 0)

      // Down past 0041, the derived events are written as rows: the same ids, public ids and payloads.
      await migrateTo(db, '0032_retention_state')
      assert.equal(await uniqueIndexes(), 1)
      const rows = await events()
      assert.deepEqual(
        rows.map((row) => [Number(row.id), row.event_id]),
        stored.stream.map((event) => [event.id, JSON.parse(event.payload).id]),
      )
      assert.deepEqual(await deliveries(), stored.deliveries)
      await migrateToLatest(db)
      assert.equal(await uniqueIndexes(), 0)
      assert.deepEqual({ deliveries: await deliveries(), stream: await stream() }, stored)
      assert.deepEqual(await events(), rows)

      // Ids go on after the largest ever used, a webhook is delivered, and the references hold.
      await transfer(t, alice, bob.username, { evtidx: 1 })
      await receiver.waitForEvents(4)
      const after = await stream()
      assert.ok(after[after.length - 1].id > stored.stream[stored.stream.length - 1].id)
      const ids = after.map((event) => JSON.parse(event.payload).id)
      assert.equal(new Set(ids).size, ids.length)
      const verified = await verifyLedger(db)
      assert.ok(verified.ok, verified.problems.join('\n'))
    } finally {
      await receiver.close()
    }
  })

  it("0039 keeps only the journal's subtrees of 16 leaves or more, and back as the tree of the entries; verify holds", async () => {
    const db = t.database.db
    const asset = await createAsset(t, { name: 'upper' })
    const alice = await fundedUser(t, [[asset, 40]])
    const bob = await createUser(t.app)
    for (let i = 0; i < 17; i++) await transfer(t, alice, bob.username, { upper: 1 })
    await journalSettled(db)
    const nodes = async () =>
      (
        await sql<{ level: number; idx: number; hash: string }>`select level, idx, hash from journal_nodes order by level, idx`.execute(db)
      ).rows.map((row) => `${Number(row.level)}:${Number(row.idx)}:${row.hash}`)
    const stored = await nodes()
    assert.ok(stored.length > 0 && stored.every((node) => Number(node.split(':')[0]) >= 4), stored.join(' '))

    await migrateTo(db, '0038_event_ids_unindexed')
    // Every complete subtree of 2 to 8 leaves again, as the tree of the entries' hashes.
    const hashes = (await db.selectFrom('journal_entries').select('hash').orderBy('position').execute()).map((row) =>
      Buffer.from(row.hash, 'hex'),
    )
    const lower: string[] = []
    for (let level = 1; level < 4; level++)
      for (let idx = 0; (idx + 1) * 2 ** level <= hashes.length; idx++)
        lower.push(`${level}:${idx}:${subtreeHash(hashes.slice(idx * 2 ** level, (idx + 1) * 2 ** level)).toString('hex')}`)
    assert.deepEqual(await nodes(), [...lower, ...stored])
    await migrateToLatest(db)
    assert.deepEqual(await nodes(), stored)
    const verified = await verifyJournal(db, findSigningKey(t.config.signingKey, t.config.dataDir))
    assert.ok(verified.ok, verified.problems.join('\n'))
  })

  it('0040 positions what the queue held at the upgrade, then finds waiting transactions by their writer; and back', async () => {
    const db = t.database.db
    const asset = await createAsset(t, { name: 'writer' })
    const alice = await fundedUser(t, [[asset, 10]])
    const bob = await createUser(t.app)
    await transfer(t, alice, bob.username, { writer: 1 })
    await journalSettled(db)
    await migrateTo(db, '0039_journal_upper_nodes')
    // Committed while the queue was how waiting transactions were found: queued by its trigger, not positioned yet.
    const queued = await sendTransaction(t, alice, { recipient: bob.username, assets: { writer: 1 } })
    if (STORAGE === 'postgres') {
      const { rows } = await sql<{ n: number }>`select count(*) as n from journal_pending where transaction_id = ${queued.id}`.execute(db)
      assert.equal(Number(rows[0].n), 1)
    }
    await migrateToLatest(db)
    await transfer(t, alice, bob.username, { writer: 1 })
    await journalSettled(db)
    const verified = await verifyJournal(db, findSigningKey(t.config.signingKey, t.config.dataDir))
    assert.ok(verified.ok, verified.problems.join('\n'))
  })
})
