import assert from 'node:assert/strict'
import net from 'node:net'
import { after, before, describe, it } from 'node:test'
import type { FastifyInstance } from 'fastify'
import { buildSameStoreApp, buildTestApp, journalSettled, STORAGE, type TestApp } from '../helpers/app.ts'
import { createAsset, fundedUser, type TestUser } from '../helpers/factories.ts'
import { sql } from 'kysely'
import { readRound, readWatermark, recordRoundAt } from '../../src/journal/journal.repository.ts'
import { journalTextAfter } from '../../src/ledger/history.service.ts'
import { readPages } from '../../src/journal/journal.service.ts'

interface Entry {
  id: number
  position: number
}

/**
 * The journal's order under concurrent writers: on PostgreSQL several connections of two service
 * instances on one database commit transfers in any order of their ids, while a reader follows the
 * feed through both instances. It must see every transaction exactly once, positions one after
 * the other from 1, and never a position at or behind one it saw.
 */
describe(`the journal's order with concurrent writers and two instances (${STORAGE})`, () => {
  let t: TestApp
  let peer: { app: FastifyInstance; close(): Promise<void> }
  let users: TestUser[]
  before(async () => {
    t = await buildTestApp({ CHECKPOINT_INTERVAL_MS: '100' })
    peer = await buildSameStoreApp(t)
    const gold = await createAsset(t, { name: 'gold' })
    users = []
    for (let i = 0; i < 6; i++) users.push(await fundedUser(t, [[gold, 1_000_000]]))
  })
  after(async () => {
    await peer.close()
    await t.close()
  })

  it('shows every transaction once, in increasing gap-free positions, never one behind another', async () => {
    const apps = [t.app, peer.app]
    let writing = true
    const writers = apps.flatMap((app, a) =>
      users.map(async (from, u) => {
        for (let i = 0; i < 12; i++) {
          const to = users[(u + 1 + ((i + a) % (users.length - 1))) % users.length]
          const response = await app.inject({
            method: 'POST',
            url: '/wallet/transactions',
            headers: from.auth,
            payload: { recipient: to.username, assets: { gold: 1 + (i % 5) } },
          })
          assert.equal(response.statusCode, 201, response.body)
        }
      }),
    )
    const seen: Entry[] = []
    let next = 0
    let reads = 0
    const reader = (async () => {
      for (;;) {
        const app = apps[reads++ % 2]
        const response = await app.inject({ method: 'GET', url: `/admin/journal?after=${next}&limit=7&wait=1`, headers: t.admin })
        assert.equal(response.statusCode, 200, response.body)
        const page = response.json() as { entries: Entry[]; next: number }
        for (const entry of page.entries) {
          assert.equal(entry.position, next + 1, 'each position follows the last one seen')
          next = entry.position
          seen.push(entry)
        }
        assert.equal(page.next, next)
        if (!writing && page.entries.length === 0) return
        // SQLite answers a read without leaving the microtask queue: let the writes' I/O run.
        await new Promise((resolve) => setImmediate(resolve))
      }
    })()
    // `coffer export --follow`'s reading, in pages of 7, the next asked for before this one is read.
    const exported: Entry[] = []
    const stop = new AbortController()
    const exporter = (async () => {
      const read = (after: number, limit: number) => journalTextAfter(t.database.db, after, limit)
      for await (const text of readPages(read, 1, { after: 0, follow: true, signal: stop.signal, pageSize: 7 })) {
        for (const line of text.split('\n').filter(Boolean)) exported.push(JSON.parse(line) as Entry)
        await new Promise((resolve) => setImmediate(resolve))
      }
    })()
    await Promise.all(writers)
    await journalSettled(t.database.db)
    writing = false
    await reader
    const all = await t.database.db.selectFrom('transactions').select('id').execute()
    assert.equal(seen.length, all.length, 'every transaction seen')
    assert.deepEqual(new Set(seen.map((entry) => entry.id)), new Set(all.map((row) => Number(row.id))), 'each one once')
    assert.ok(reads > 2)
    for (let waited = 0; exported.length < all.length && waited < 100; waited++) await new Promise((resolve) => setTimeout(resolve, 100))
    stop.abort()
    await exporter
    assert.deepEqual(
      exported.map((entry) => entry.position),
      all.map((_, index) => index + 1),
      'the export gives every position once, in order',
    )
    assert.deepEqual(new Set(exported.map((entry) => entry.id)), new Set(all.map((row) => Number(row.id))))
  })

  it('streams the journal as Server-Sent Events, resumed after Last-Event-ID', async () => {
    await t.app.listen({ port: 0, host: '127.0.0.1' })
    const { port } = t.app.server.address() as net.AddressInfo
    const size = Number((await t.database.db.selectFrom('journal_state').select('size').executeTakeFirstOrThrow()).size)
    const from = size - 5
    const stop = new AbortController()
    const response = await fetch(`http://127.0.0.1:${port}/admin/journal/stream`, {
      headers: { ...t.admin, 'last-event-id': String(from) },
      signal: stop.signal,
    })
    assert.equal(response.status, 200)
    assert.match(String(response.headers.get('content-type')), /^text\/event-stream/)
    const decoder = new TextDecoder()
    let text = ''
    const reader = response.body!.getReader()
    while ((text.match(/^id: /gm) ?? []).length < 5) text += decoder.decode((await reader.read()).value, { stream: true })
    stop.abort()
    const events = [...text.matchAll(/^id: (\d+)\ndata: (.*)$/gm)].map((match) => ({
      id: Number(match[1]),
      data: JSON.parse(match[2]) as Entry,
    }))
    assert.deepEqual(
      events.map((event) => event.id),
      [from + 1, from + 2, from + 3, from + 4, from + 5],
    )
    assert.ok(events.every((event) => event.data.position === event.id))
  })

  it(
    'on PostgreSQL, writes nothing of a round whose state another round changed since it was read',
    { skip: STORAGE !== 'postgres' },
    async () => {
      const { db } = t.database
      const start = await readRound(db, 10, new Map(), await readWatermark(db))
      assert.ok(start)
      // Another instance's round: any write of the state row makes it a new version.
      await sql`update journal_state set head = head where id = 1`.execute(db)
      const far = start.state.size + 1_000_000
      const state = { ...start.state, size: far }
      const applied = await recordRoundAt(db, start.version, {
        entries: [[far, 0, 'f'.repeat(64)]],
        nodes: [],
        state,
        watermark: start.watermark,
        checkpoint: undefined,
      })
      assert.equal(applied, false)
      const { rows } = await sql<{ n: number }>`select count(*)::int as n from journal_entries where position = ${far}`.execute(db)
      assert.equal(rows[0].n, 0)
      const size = Number((await db.selectFrom('journal_state').select('size').executeTakeFirstOrThrow()).size)
      assert.ok(size < far)
    },
  )
})
