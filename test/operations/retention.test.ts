import assert from 'node:assert/strict'
import crypto from 'node:crypto'
import { after, before, describe, it } from 'node:test'
import { ConfigError, loadConfig } from '../../src/config.ts'
import { openDatabase } from '../../src/db/database.ts'
import { verifyLedger } from '../../src/ledger/verify.ts'
import { pruneOnce, type RetentionPolicy } from '../../src/operations/retention.ts'
import { STORAGE, buildTestApp, type TestApp } from '../helpers/app.ts'
import { allEvents } from '../helpers/events.ts'
import { createUser, type TestUser } from '../helpers/factories.ts'
import { startReceiver, waitUntil, type Receiver } from '../helpers/receiver.ts'

const DAY = 86_400_000
/** Everything older than 30 days goes: events, ended deliveries, idempotency keys; sessions by their expiry only. */
const POLICY: RetentionPolicy = { eventRetentionDays: 30, idempotencyRetentionHours: 30 * 24, sessionIdleDays: 0 }

type Snapshot = Record<'events' | 'deliveries' | 'attempts' | 'keys' | 'sessions' | 'transactions' | 'lines' | 'holdings', string[]>

describe(`retention on ${STORAGE}`, () => {
  let t: TestApp
  let receiver: Receiver
  let alice: TestUser
  let bob: TestUser
  let carol: TestUser
  /** The cutoff: what was written before it is old, what after it is recent. */
  let cutoff: number
  let old: Snapshot
  let all: Snapshot

  async function snapshot(): Promise<Snapshot> {
    const db = t.database.db
    const ids = (rows: { id: number | string }[]) => rows.map((row) => String(row.id)).sort()
    return {
      // Events as the stream reads them: rows, and those derived from transactions that keep their body.
      events: ids(await allEvents(db)),
      deliveries: ids(await db.selectFrom('webhook_deliveries').select('id').execute()),
      attempts: ids(await db.selectFrom('webhook_attempts').select('id').execute()),
      keys: (await db.selectFrom('idempotency_keys').select(['wallet_id', 'key']).execute())
        .map((row) => `${row.wallet_id}/${row.key}`)
        .sort(),
      sessions: ids(await db.selectFrom('user_sessions').select('id').execute()),
      transactions: ids(await db.selectFrom('transactions').select('id').execute()),
      lines: (await db.selectFrom('transaction_assets').select(['transaction_id', 'asset_id', 'quantity']).execute())
        .map((row) => JSON.stringify(row))
        .sort(),
      holdings: (await db.selectFrom('holdings').selectAll().execute()).map((row) => JSON.stringify(row)).sort(),
    }
  }

  async function send(from: TestUser, to: TestUser, key: string) {
    const sent = await t.app.inject({
      method: 'POST',
      url: '/wallet/transactions',
      headers: { ...from.auth, 'idempotency-key': key },
      payload: { recipient: to.username, assets: { keep: 1 } },
    })
    assert.equal(sent.statusCode, 201, sent.body)
  }

  before(async () => {
    // One attempt then a retry an hour later: a delivery that fails stays pending.
    t = await buildTestApp({ WEBHOOK_RETRY_SCHEDULE: '3600' })
    receiver = await startReceiver((request) => ({ status: request.path === '/carol' ? 500 : 200 }))
    alice = await createUser(t.app)
    bob = await createUser(t.app)
    carol = await createUser(t.app)
    for (const [user, path] of [
      [bob, '/bob'],
      [carol, '/carol'],
    ] as const) {
      const set = await t.app.inject({
        method: 'PUT',
        url: '/wallet/webhook',
        headers: user.auth,
        payload: { webhook: `${receiver.url}${path}` },
      })
      assert.equal(set.statusCode, 200, set.body)
    }
    const asset = await t.app.inject({ method: 'POST', url: '/assets', headers: t.admin, payload: { name: 'keep', value: 1 } })
    await t.app.inject({
      method: 'POST',
      url: `/wallets/${alice.walletId}/assets`,
      headers: t.admin,
      payload: { id: asset.json().id, quantity: 100 },
    })
    // The old part: transfers to bob (delivered) and carol (still pending after its failed attempt).
    for (let i = 0; i < 3; i++) await send(alice, bob, `old-bob-${i}`)
    await send(alice, carol, 'old-carol')
    await receiver.waitFor(4, 10_000)
    await waitUntil(
      async () =>
        (await t.database.db.selectFrom('webhook_deliveries').select('id').where('status', '=', 'delivered').execute()).length === 3,
      10_000,
      'bob deliveries settled',
    )
    await waitUntil(
      async () => (await t.database.db.selectFrom('webhook_attempts').select('id').execute()).length === 4,
      10_000,
      'four attempts logged',
    )
    old = await snapshot()
    await new Promise((resolve) => setTimeout(resolve, 20))
    cutoff = Date.now()
    await new Promise((resolve) => setTimeout(resolve, 20))
    // The recent part.
    await createUser(t.app)
    for (let i = 0; i < 2; i++) await send(alice, bob, `new-bob-${i}`)
    await receiver.waitFor(6, 10_000)
    await waitUntil(
      async () =>
        (await t.database.db.selectFrom('webhook_deliveries').select('id').where('status', '=', 'delivered').execute()).length === 5,
      10_000,
      'recent deliveries settled',
    )
    all = await snapshot()
  })
  after(async () => {
    await receiver.close()
    await t.close()
  })

  it('removes exactly the old operational records, keeps a pending delivery with its event, and never the journal', async () => {
    const pendingDelivery = await t.database.db
      .selectFrom('webhook_deliveries')
      .select(['id', 'event_id'])
      .where('status', '=', 'pending')
      .executeTakeFirstOrThrow()
    const report = await pruneOnce(t.database, POLICY, cutoff + 30 * DAY)
    assert.ok(report)
    const now = await snapshot()
    const minus = (from: string[], gone: string[]) => from.filter((id) => !gone.includes(id))
    const keptOld = (list: string[], keep: string[]) => list.filter((id) => keep.includes(id))
    assert.deepEqual(now.deliveries, minus(all.deliveries, minus(old.deliveries, [String(pendingDelivery.id)])))
    // The pending delivery's transaction keeps its body, and so both its events (derived from it).
    const pendingTransaction = Math.floor(Number(pendingDelivery.event_id) / 2)
    const pendingEvents = old.events.filter((id) => Math.floor(Number(id) / 2) === pendingTransaction)
    assert.equal(pendingEvents.length, 2)
    assert.deepEqual(now.events, minus(all.events, minus(old.events, pendingEvents)))
    assert.deepEqual(now.keys, minus(all.keys, old.keys))
    assert.deepEqual(now.sessions, minus(all.sessions, old.sessions))
    // The pending delivery keeps its one attempt; the delivered ones' attempts are gone.
    assert.equal(now.attempts.length, all.attempts.length - old.attempts.length + 1)
    assert.deepEqual(keptOld(now.events, old.events), pendingEvents)
    assert.deepEqual(
      { transactions: now.transactions, lines: now.lines, holdings: now.holdings },
      { transactions: all.transactions, lines: all.lines, holdings: all.holdings },
    )
    assert.deepEqual(report, {
      webhookAttempts: old.attempts.length - 1,
      webhookDeliveries: old.deliveries.length - 1,
      // Only event rows count here: a transaction's events go with its body.
      events: 0,
      // Every old transaction but the last (its event waits for the pending delivery) loses the body its events were sent with.
      transactionBodies: old.transactions.length - 1,
      idempotencyKeys: old.keys.length,
      keyUses: 0,
      userSessions: old.sessions.length,
      rateLimitWindows: 0,
    })
    const withBody = (await t.database.db.selectFrom('transactions').select('id').where('body', 'is not', null).execute())
      .map((row) => String(row.id))
      .sort()
    assert.deepEqual(withBody, [...minus(all.transactions, old.transactions), String(pendingTransaction)].sort())
    const verified = await verifyLedger(t.database.db)
    assert.ok(verified.ok, verified.problems.join('\n'))
    // The history still shows every transaction as it was answered.
    const history = await t.app.inject({ method: 'GET', url: `/admin/transactions?wallet=${bob.walletId}&limit=100`, headers: t.admin })
    assert.equal(history.statusCode, 200, history.body)
    assert.equal(history.json().length, 5)
    // A second run finds nothing more to do.
    assert.deepEqual(Object.values((await pruneOnce(t.database, POLICY, cutoff + 30 * DAY)) ?? {}), [0, 0, 0, 0, 0, 0, 0, 0])
  })

  it('a stream resumed from a Last-Event-ID older than what is kept restarts from the oldest event kept', async () => {
    const base = await t.app.listen({ port: 0, host: '127.0.0.1' })
    const kept = (await allEvents(t.database.db)).filter((event) => event.wallet_id === bob.walletId).map((event) => String(event.id))
    const controller = new AbortController()
    // Bob's old session is gone with the old records: he logs in again.
    const login = await t.app.inject({
      method: 'POST',
      url: `/users/${bob.username}/sessions`,
      payload: { password: bob.password, return_token: true },
    })
    const response = await fetch(`${base}/wallet/events`, {
      headers: { authorization: `Bearer ${login.json().token}`, 'last-event-id': '1' },
      signal: controller.signal,
    })
    assert.equal(response.status, 200)
    let text = ''
    const reader = response.body!.getReader()
    const decoder = new TextDecoder()
    while ((text.match(/^id: /gm) ?? []).length < kept.length) text += decoder.decode((await reader.read()).value, { stream: true })
    controller.abort()
    assert.deepEqual(
      [...text.matchAll(/^id: (\d+)$/gm)].map((match) => match[1]),
      kept,
    )
  })

  it('refuses retention settings out of range with one line naming the variable', () => {
    for (const [name, value, pattern] of [
      ['IDEMPOTENCY_RETENTION_HOURS', '23', /IDEMPOTENCY_RETENTION_HOURS must be between 24 and 87600, got 23/],
      ['EVENT_RETENTION_DAYS', '0', /EVENT_RETENTION_DAYS must be between 1 and 3650, got 0/],
      ['EVENT_RETENTION_DAYS', 'thirty', /EVENT_RETENTION_DAYS must be a whole number/],
    ] as const) {
      assert.throws(
        () => loadConfig({ [name]: value }),
        (error: Error) => error instanceof ConfigError && pattern.test(error.message) && !error.message.includes('\n'),
      )
    }
    assert.equal(loadConfig({}).eventRetentionDays, 30)
    assert.equal(loadConfig({}).idempotencyRetentionHours, 168)
  })
})

// SQLite serialises writers across processes with its one write lock; several connections of one
// process would block each other's thread, so this is the PostgreSQL case (the advisory lock).
describe('retention run by several instances at once', { skip: STORAGE !== 'postgres' && 'PostgreSQL only' }, () => {
  it('removes every old record once, whichever instance runs it, and each run counts what it removed', async () => {
    const t = await buildTestApp()
    try {
      // Several rounds: how the instances' batches interleave differs from one to the next (an
      // instance that opens its connection later may take the turn between another's batches,
      // which then stops). A run that stopped so still reports the rows it removed before.
      const user = await createUser(t.app)
      for (let round = 0; round < 20; round++) {
        // Sessions as logins write them (a login hashes a password: too slow for many rounds).
        const at = new Date().toISOString()
        const rows = Array.from({ length: 3 }, () => ({
          user_id: user.id,
          wallet_id: user.walletId,
          token_hash: crypto.randomBytes(32).toString('hex'),
          created_at: at,
          last_used_at: at,
          expires_at: at,
        }))
        await t.database.db.insertInto('user_sessions').values(rows).execute()
        // With the login's session in the first round.
        const sessions = (await t.database.db.selectFrom('user_sessions').select('id').execute()).length
        // Three instances' jobs at once, each on its own new connections, well past every session's expiry.
        const instances = [openDatabase(t.config), openDatabase(t.config), openDatabase(t.config)]
        try {
          const reports = await Promise.all(instances.map((database) => pruneOnce(database, POLICY, Date.now() + 400 * DAY)))
          const removed = reports.reduce((sum, report) => sum + (report?.userSessions ?? 0), 0)
          assert.equal(removed, sessions, `round ${round}: ${JSON.stringify(reports)}`)
          assert.ok(reports.some((report) => report !== undefined))
        } finally {
          await Promise.all(instances.map((database) => database.close()))
        }
        assert.equal((await t.database.db.selectFrom('user_sessions').select('id').execute()).length, 0)
      }
    } finally {
      await t.close()
    }
  })
})
