import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { Type } from '@sinclair/typebox'
import Fastify, { type FastifyInstance } from 'fastify'
import type { ListQuery } from '../../src/ledger/history.service.ts'
import { Transaction as TransactionSchema } from '../../src/ledger/ledger.schemas.ts'
import type { Metadata, Transaction, TransactionKind } from '../../src/ledger/ledger.types.ts'
import { labelWallets, linesByOwner } from '../../src/ledger/transactions.repository.ts'
import { toTransaction } from '../../src/ledger/transactions.shape.ts'
import { buildTestApp, journalSettled, STORAGE, type TestApp } from '../helpers/app.ts'
import { createAsset, createUser, createWalletKey, issue, sendTransaction, type TestUser } from '../helpers/factories.ts'

/**
 * A history page is read by one statement that has the database build the page as JSON
 * (`transactions.repository.ts` readTransactions). These tests hold its answers to a reference
 * read the simplest way (every row of the tables, shaped by the same helpers the holds use, then
 * filtered and paged in JS), on random ledgers and random filter combinations, and check that a
 * page read while transfers commit is never a partial one. On SQLite the database writes the
 * answer's bytes, so the answers are also compared byte for byte with what the route's schema
 * writes for the reference's transactions.
 */

let t: TestApp
let users: TestUser[]
/** Wallet ids whose history is compared: the users' primary wallets and a second, unnamed wallet. */
let wallets: { id: number; auth: Record<string, string> }[]
let assetNames: string[]

/** A small deterministic generator, so that a failure can be replayed from its seed. */
function random(seed: number): () => number {
  let state = seed >>> 0
  return () => {
    state = (state * 1_664_525 + 1_013_904_223) >>> 0
    return state / 2 ** 32
  }
}

/** A server with only the route's response schema: what Fastify writes for a list of transactions. */
let serializer: FastifyInstance
let toSerialize: Transaction[] = []

/** The bytes the schema of GET /wallet/transactions writes for these transactions. */
async function schemaBytes(transactions: Transaction[]): Promise<string> {
  toSerialize = transactions
  const response = await serializer.inject({ method: 'GET', url: '/' })
  assert.equal(response.headers['content-type'], 'application/json; charset=utf-8')
  return response.body
}

/** The answer is the schema's bytes for the expected transactions, with the same content type. */
async function assertSameBytes(
  response: { body: string; headers: Record<string, unknown> },
  expected: Transaction[],
  message: string,
): Promise<void> {
  assert.equal(response.headers['content-type'], 'application/json; charset=utf-8', message)
  assert.equal(response.body, await schemaBytes(expected), message)
}

before(async () => {
  serializer = Fastify()
  serializer.get('/', { schema: { response: { 200: Type.Array(TransactionSchema) } } }, async () => toSerialize)
  await serializer.ready()
  t = await buildTestApp()
  // Values whose JSON text differs between writers (integral doubles, 16 and 17 significant
  // digits, exponents), and names whose order depends on case.
  const specs: [string, number][] = [
    ['beta', 1],
    ['Alpha', 0.1 + 0.2],
    ['alpha_2', 0.7999999999999999],
    ['Gamma-x', 1e21],
    ['delta', 1e-7],
    ['eps', 123456.789],
  ]
  assetNames = []
  for (const [name, value] of specs) assetNames.push((await createAsset(t, { name, value })).name)
  const assets = await (await t.app.inject({ method: 'GET', url: '/assets', headers: t.admin })).json()
  users = [await createUser(t.app), await createUser(t.app), await createUser(t.app)]
  for (const user of users) for (const asset of assets) await issue(t, user.walletId, asset.id, 1_000_000)
  // A second wallet of the first user: no username on its side of a transaction.
  const created = await t.app.inject({ method: 'POST', url: '/user/wallets', headers: users[0].auth, payload: {} })
  assert.equal(created.statusCode, 201, created.body)
  const second = created.json() as { id: number }
  await issue(t, second.id, assets[0].id, 1_000_000)
  const switched = await t.app.inject({
    method: 'PUT',
    url: '/user/session/wallet',
    headers: users[0].auth,
    payload: { wallet_id: second.id },
  })
  assert.equal(switched.statusCode, 200, switched.body)
  const secondKey = await createWalletKey(t, users[0].auth)
  await t.app.inject({ method: 'PUT', url: '/user/session/wallet', headers: users[0].auth, payload: { wallet_id: users[0].walletId } })
  wallets = [...users.map((user) => ({ id: user.walletId, auth: user.auth })), { id: second.id, auth: secondKey.auth }]

  const next = random(20)
  const pick = <T>(items: T[]) => items[Math.floor(next() * items.length)]
  const sent: Transaction[] = []
  for (let i = 0; i < 90; i++) {
    const from = pick(wallets)
    const to = pick(wallets.filter((wallet) => wallet.id !== from.id))
    const count = 1 + Math.floor(next() * 3)
    const names = from === wallets[3] ? [assetNames[0]] : [...assetNames].sort(() => next() - 0.5).slice(0, count)
    const metadata: Metadata = {}
    if (next() < 0.4) metadata.order = pick(['a', 'b'])
    if (next() < 0.3) metadata['2'] = pick(['x', 'y'])
    if (next() < 0.2) metadata.note = 'quote " and \\ and é'
    sent.push(
      await sendTransaction(t, from, {
        recipient: to.id,
        type: 2,
        memo: next() < 0.5 ? '' : `memo ${i} ✓`,
        assets: Object.fromEntries(names.map((name) => [name, 1 + Math.floor(next() * 5)])),
        ...(Object.keys(metadata).length > 0 ? { metadata } : {}),
      }),
    )
    // Refunds (kind reversal, with `reverses`) now and then.
    if (next() < 0.15) {
      const original = pick(sent.filter((transaction) => transaction.receiving_wallet_id === from.id && transaction.kind === 'transfer'))
      if (original) {
        const refund = await t.app.inject({ method: 'POST', url: `/wallet/transactions/${original.id}/refund`, headers: from.auth })
        assert.ok(refund.statusCode === 201 || refund.statusCode === 409, refund.body)
      }
    }
  }
})

after(async () => {
  await serializer.close()
  await t.close()
})

/** Every recorded transaction, read row by row with the repository's shaping helpers, newest first. */
async function reference(): Promise<{ transaction: Transaction; metadata: Metadata; assetIds: number[] }[]> {
  const db = t.database.db
  await journalSettled(db)
  const positions = new Map(
    (await db.selectFrom('journal_entries').selectAll().execute()).map((entry) => [Number(entry.transaction_id), entry]),
  )
  const rows = await db.selectFrom('transactions').selectAll().orderBy('id', 'desc').execute()
  const lineRows = await db
    .selectFrom('transaction_assets')
    .innerJoin('assets', 'assets.id', 'transaction_assets.asset_id')
    .select(['transaction_assets.transaction_id as owner', 'transaction_assets.quantity', 'assets.id', 'assets.name', 'assets.value'])
    .execute()
  const lines = linesByOwner(lineRows)
  const labels = await labelWallets(
    db,
    rows.flatMap((row) => [row.sending_wallet_id, row.receiving_wallet_id]),
  )
  return rows.map((row) => {
    const metadata = row.metadata === null ? {} : (JSON.parse(row.metadata) as Metadata)
    const owned = lines.get(Number(row.id)) ?? []
    const transaction = toTransaction(
      {
        ...row,
        id: Number(row.id),
        reverses: row.reverses === null ? null : Number(row.reverses),
        hold_id: row.hold_id === null ? null : Number(row.hold_id),
        kind: row.kind as TransactionKind,
        metadata,
        position: positions.get(Number(row.id))?.position ?? null,
        hash: positions.get(Number(row.id))?.hash ?? null,
      },
      owned,
      labels,
    )
    return { transaction, metadata, assetIds: owned.map((line) => line.asset.id) }
  })
}

/** The query of a page (`history.service.ts` ListQuery) with its page size always given. */
type Filter = ListQuery & { limit: number }

function queryOf(filter: Filter): string {
  const params = new URLSearchParams()
  for (const [key, value] of Object.entries(filter)) if (value !== undefined && key !== 'metadata') params.set(key, String(value))
  for (const [key, value] of filter.metadata ?? []) params.set(`metadata[${key}]`, value)
  return params.toString()
}

/** The page and whether more follow, by the reference: every transaction filtered in JS. */
function expectedPage(all: Awaited<ReturnType<typeof reference>>, walletId: number, filter: Filter, assetIds: Map<string, number>) {
  const matching = all.filter(({ transaction: tx, metadata, assetIds: owned }) => {
    const sent = tx.sending_wallet_id === walletId
    const received = tx.receiving_wallet_id === walletId
    if (filter.direction === 'sent' ? !sent : filter.direction === 'received' ? !received : !sent && !received) return false
    if (filter.before !== undefined && tx.id >= filter.before) return false
    if (filter.after !== undefined && tx.id <= filter.after) return false
    if (filter.asset !== undefined && !owned.includes(assetIds.get(filter.asset.toLowerCase()) ?? -1)) return false
    if (filter.since !== undefined && tx.created_at < filter.since) return false
    if (filter.until !== undefined && tx.created_at > filter.until) return false
    if (filter.kind !== undefined && tx.kind !== filter.kind) return false
    return (filter.metadata ?? []).every(([key, value]) => metadata[key] === value)
  })
  const offset = filter.offset ?? 0
  return {
    transactions: matching.slice(offset, offset + filter.limit).map(({ transaction }) => transaction),
    more: matching.length > offset + filter.limit,
  }
}

describe(`history pages read by one statement (${STORAGE})`, () => {
  it('answer what the reference reads, for random filter combinations, Link header included', async () => {
    const all = await reference()
    const assets = (await (await t.app.inject({ method: 'GET', url: '/assets', headers: t.admin })).json()) as {
      id: number
      name: string
    }[]
    const assetIds = new Map(assets.map((asset) => [asset.name.toLowerCase(), asset.id]))
    const times = all.map(({ transaction }) => transaction.created_at).sort()
    const ids = all.map(({ transaction }) => transaction.id)
    const next = random(7)
    const pick = <T>(items: T[]) => items[Math.floor(next() * items.length)]
    const maybe = <T>(chance: number, value: () => T): T | undefined => (next() < chance ? value() : undefined)
    // How many pages had something to compare, all told and with a kind read through its own index.
    let filled = 0
    let filledRareKind = 0
    for (let round = 0; round < 160; round++) {
      const wallet = pick(wallets)
      const filter: Filter = {
        limit: pick([1, 3, 10, 25]),
        offset: maybe(0.2, () => Math.floor(next() * 5)),
        before: maybe(0.2, () => pick(ids)),
        after: maybe(0.1, () => pick(ids)),
        asset: maybe(0.3, () => pick(assetNames).toUpperCase()),
        direction: maybe(0.3, () => pick(['sent', 'received'] as const)),
        since: maybe(0.15, () => pick(times)),
        until: maybe(0.15, () => pick(times)),
        kind: maybe(0.25, () => pick(['transfer', 'reversal', 'issuance'] as const)),
        metadata: maybe(0.25, () =>
          next() < 0.5
            ? [['order', pick(['a', 'b'])]]
            : [
                ['order', pick(['a', 'b'])],
                ['2', pick(['x', 'y'])],
              ],
        ),
      }
      const url = `/wallet/transactions?${queryOf(filter)}`
      const response = await t.app.inject({ method: 'GET', url, headers: wallet.auth })
      assert.equal(response.statusCode, 200, `${url}: ${response.body}`)
      const expected = expectedPage(all, wallet.id, filter, assetIds)
      if (expected.transactions.length > 0) {
        filled += 1
        if (filter.kind !== undefined && filter.kind !== 'transfer' && !filter.metadata) filledRareKind += 1
      }
      assert.deepStrictEqual(response.json(), JSON.parse(JSON.stringify(expected.transactions)), url)
      await assertSameBytes(response, expected.transactions, url)
      const last = expected.transactions.at(-1)
      if (expected.more && last) {
        const link = response.headers.link as string
        assert.ok(link?.includes(`before=${last.id}`), `${url}: link ${link}`)
        // The next page by the Link header is the reference's next page.
        const nextUrl = /^<([^>]+)>; rel="next"$/.exec(link)?.[1] as string
        const following = await t.app.inject({ method: 'GET', url: nextUrl, headers: wallet.auth })
        const expectedNext = expectedPage(all, wallet.id, { ...filter, offset: undefined, before: last.id }, assetIds)
        assert.deepStrictEqual(following.json(), JSON.parse(JSON.stringify(expectedNext.transactions)), nextUrl)
        await assertSameBytes(following, expectedNext.transactions, nextUrl)
      } else {
        assert.equal(response.headers.link, undefined, url)
      }
    }
    assert.ok(filled >= 60 && filledRareKind >= 5, `pages with transactions: ${filled}, by a rarer kind: ${filledRareKind}`)
  })

  it('answer the admin journal and a wallet seen by the admin as the reference does', async () => {
    const all = await reference()
    const journal = await t.app.inject({ method: 'GET', url: '/admin/transactions?limit=25&offset=3', headers: t.admin })
    assert.equal(journal.statusCode, 200, journal.body)
    assert.deepStrictEqual(journal.json(), JSON.parse(JSON.stringify(all.slice(3, 28).map(({ transaction }) => transaction))))
    const byMetadata = await t.app.inject({ method: 'GET', url: '/admin/transactions?limit=100&metadata[order]=a', headers: t.admin })
    const expected = all.filter(({ metadata }) => metadata.order === 'a').map(({ transaction }) => transaction)
    assert.deepStrictEqual(byMetadata.json(), JSON.parse(JSON.stringify(expected.slice(0, 100))))
  })

  it('answer the bytes the schema writes for awkward numbers and text', async () => {
    // Asset values whose texts differ between writers or sit at the edges of the notations (the
    // smallest and largest doubles, negative zero, integers past 2^53, fractions of 16-17 digits),
    // and strings with every kind of escape, marks of the page's own number rewriting included.
    const values = [
      0.1,
      0.25,
      1e21,
      1.5e300,
      -0,
      0,
      1e-7,
      1e-4,
      0.000123,
      2 ** 53,
      2 ** 53 - 1,
      1e15,
      1e15 + 0.5,
      1e16,
      123456789012345.6,
      5e-324,
      Number.MAX_VALUE,
      0.1 + 0.2,
      1 / 3,
      99.99,
    ]
    const odd: string[] = []
    for (const value of values) odd.push((await createAsset(t, { name: `odd${odd.length}`, value })).name)
    const assets = (await (await t.app.inject({ method: 'GET', url: '/assets', headers: t.admin })).json()) as {
      id: number
      name: string
      value: number
    }[]
    assert.ok(Object.is(assets.find((asset) => asset.name === 'odd4')?.value, 0), 'negative zero is stored and answered as 0')
    const [from, to] = [await createUser(t.app), await createUser(t.app)]
    for (const asset of assets.filter((asset) => odd.includes(asset.name))) await issue(t, from.walletId, asset.id, Number.MAX_SAFE_INTEGER)
    const memos = [
      'quote " back \\ slash / tab \t nl \n cr \r',
      'bell \u0007 esc \u001b del \u007f mark \u0001',
      'é ✓ 😀 \u2028 \u2029 </script>',
      '\b\f\u001f',
      '',
    ]
    const metadata = [
      { b: 'x', 1: 'one', 10: 'ten', a: 'y' },
      { note: 'mark \u0001 1 \u0001 and "\\u0001"', 'a.b-c_d': '😀 \u2028' },
      { z: '' },
    ]
    for (let i = 0; i < odd.length; i += 3) {
      const names = odd.slice(i, i + 3)
      await sendTransaction(t, from, {
        recipient: to.username,
        memo: memos[(i / 3) % memos.length],
        assets: Object.fromEntries(names.map((name, k) => [name, k === 0 ? Number.MAX_SAFE_INTEGER - 1 : 1 + k])),
        ...(i % 2 === 0 ? { metadata: metadata[(i / 3) % metadata.length] } : {}),
      })
    }
    const all = (await reference()).map(({ transaction }) => transaction)
    for (const user of [from, to]) {
      for (const url of ['/wallet/transactions?limit=100', '/wallet/transactions?limit=2', '/wallet/transactions?limit=3&offset=1']) {
        const response = await t.app.inject({ method: 'GET', url, headers: user.auth })
        assert.equal(response.statusCode, 200, response.body)
        const limit = Number(new URL(url, 'http://x').searchParams.get('limit'))
        const offset = Number(new URL(url, 'http://x').searchParams.get('offset') ?? 0)
        const mine = all.filter(
          (transaction) => transaction.sending_wallet_id === user.walletId || transaction.receiving_wallet_id === user.walletId,
        )
        await assertSameBytes(response, mine.slice(offset, offset + limit), url)
      }
    }
  })

  it('never answers a partial transaction while transfers commit', async () => {
    const [a, b] = users
    const reads: Transaction[][] = []
    let writing = true
    const writer = (async () => {
      const sends = []
      for (let i = 0; i < 40; i++) {
        sends.push(
          sendTransaction(t, i % 2 ? a : b, {
            recipient: (i % 2 ? b : a).username,
            assets: { [assetNames[0]]: 1, [assetNames[1]]: 2, [assetNames[2]]: 3 },
            metadata: { burst: 'yes' },
          }),
        )
        if (sends.length === 8) await Promise.all(sends.splice(0))
      }
      await Promise.all(sends)
      writing = false
    })()
    while (writing) {
      const pages = await Promise.all(
        [a, b].map((user) => t.app.inject({ method: 'GET', url: '/wallet/transactions?limit=20', headers: user.auth })),
      )
      for (const page of pages) {
        assert.equal(page.statusCode, 200, page.body)
        reads.push(page.json())
      }
      // SQLite answers a read without leaving the microtask queue: let the writes' I/O run.
      await new Promise((resolve) => setImmediate(resolve))
    }
    await writer
    const final = new Map(
      (await reference()).map(({ transaction }) => [transaction.id, JSON.parse(JSON.stringify(transaction)) as Transaction]),
    )
    assert.ok(reads.length > 0)
    for (const page of reads) {
      // A position comes within a second of commit: a page read before it says null.
      for (const transaction of page) {
        const settled = final.get(transaction.id)
        assert.deepStrictEqual(transaction, transaction.position === null && settled ? { ...settled, position: null, hash: null } : settled)
      }
      const pageIds = page.map((transaction) => transaction.id)
      assert.deepStrictEqual(
        pageIds,
        [...pageIds].sort((x, y) => y - x),
        'newest first',
      )
    }
  })
})
