/**
 * Balances in time and statements at 100,000 transactions of history
 * (`npm run bench -- statements [--storage=sqlite|postgres] [--count=N]`).
 *
 * Builds the service in process on a fresh database (SQLite in a temp dir; PostgreSQL on an
 * embedded server started here), writes the history of one wallet through the ledger's own write
 * path (`applyMoves`, 100 moves per database transaction, so every running balance is the one a
 * transfer writes), then measures over HTTP on 127.0.0.1:
 *
 * - a history page (`GET /wallet/transactions`, 10 rows), the reference;
 * - balances in time (`GET /wallet/assets?as_of=…`) at the start, middle and end of the history;
 * - the whole statement (`?format=csv`), read as a stream, with the server's heap sampled while it
 *   is sent (it must stay flat: the export holds one chunk of transactions at a time).
 *
 * Prints figures; asserts nothing about time. Everything started here is stopped at the end.
 */
import { request } from 'undici'
import { buildApp } from '../../src/app.ts'
import { loadConfig } from '../../src/config.ts'
import type { Database } from '../../src/db/database.ts'
import { inTransaction } from '../../src/db/dialect.ts'
import { migrateToLatest } from '../../src/db/migrate.ts'
import { prepareWebhookSecrets } from '../../src/events/webhook-secrets.ts'
import { hashToken } from '../../src/http/tokens.ts'
import { applyMoves, type Move } from '../../src/ledger/moves.ts'
import { verifyLedger } from '../../src/ledger/verify.ts'
import { openBenchStore } from '../postgres.ts'
import { noEvents } from '../seed.ts'

const args = process.argv.slice(2)
const storage = (args.find((arg) => arg.startsWith('--storage='))?.slice('--storage='.length) ?? 'sqlite') as 'sqlite' | 'postgres'
const count = Number(args.find((arg) => arg.startsWith('--count='))?.slice('--count='.length) ?? 100_000)
const REPEATS = 200
const ADMIN_KEY = 'cfa_bench_statements_admin_key'

const log = (line: string) => console.log(`[statements ${storage}] ${line}`)

async function main(): Promise<void> {
  const { database, databaseUrl, dataDir, close } = await openBenchStore(storage, 'statements', 10)
  try {
    await migrateToLatest(database.db)
    const config = loadConfig({
      DATA_DIR: dataDir,
      DATABASE_URL: databaseUrl,
      ADMIN_API_KEY: ADMIN_KEY,
      LOG_LEVEL: 'silent',
      AUTH_RATE_LIMIT: '0',
    })
    const app = await buildApp({
      config,
      database,
      adminKeyHash: hashToken(ADMIN_KEY),
      secretsKey: await prepareWebhookSecrets(database.db, config),
    })
    const base = await app.listen({ host: '127.0.0.1', port: 0 })
    try {
      await run(base, database)
    } finally {
      await app.close()
    }
    const report = await verifyLedger(database.db)
    log(`coffer verify: ${report.ok ? 'ok' : report.problems.slice(0, 5).join('; ')} (${report.transactions} transactions)`)
  } finally {
    await close()
  }
}

async function call(base: string, method: 'GET' | 'POST', url: string, body?: unknown, token?: string) {
  const headers: Record<string, string> = { 'content-type': 'application/json' }
  if (token) headers.authorization = `Bearer ${token}`
  else headers.authorization = `Bearer ${ADMIN_KEY}`
  const response = await request(`${base}${url}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) })
  const text = await response.body.text()
  if (response.statusCode >= 300) throw new Error(`${method} ${url}: ${response.statusCode} ${text}`)
  return JSON.parse(text)
}

async function user(base: string, username: string) {
  const made = await call(base, 'POST', '/users', { username, password: 'bench password' })
  const { token } = await call(base, 'POST', `/users/${username}/sessions`, { password: 'bench password', return_token: true })
  return { walletId: made.primary_wallet_id as number, token: token as string }
}

async function run(base: string, database: Database): Promise<void> {
  const gold = await call(base, 'POST', '/assets', { name: 'gold', value: 1 })
  const silver = await call(base, 'POST', '/assets', { name: 'silver', value: 1 })
  const owner = await user(base, 'historyowner')
  const partner = await user(base, 'historypartner')
  await call(base, 'POST', `/wallets/${owner.walletId}/assets`, { id: gold.id, quantity: 1_000 })
  // Silver moves once, at the very start: its balance in time is the deepest lookup.
  await call(base, 'POST', `/wallets/${owner.walletId}/assets`, { id: silver.id, quantity: 5 })

  let started = performance.now()
  const BATCH = 100
  let middle = ''
  for (let done = 0; done < count; done += BATCH) {
    const moves: Move[] = Array.from({ length: Math.min(BATCH, count - done) }, (_, i) => {
      const [from, to] = (done + i) % 2 === 0 ? [owner.walletId, partner.walletId] : [partner.walletId, owner.walletId]
      return { from, to, kind: 'transfer' as const, lines: [{ asset: gold, quantity: 1 }], memo: 'history' }
    })
    const outcomes = await inTransaction(database, (trx) => applyMoves(trx, moves, noEvents))
    if (done === Math.floor(count / 2 / BATCH) * BATCH) {
      const first = outcomes[0]
      if (first.ok && first.transaction) middle = first.transaction.created_at
    }
  }
  log(`wrote ${count} transactions of history in ${((performance.now() - started) / 1000).toFixed(1)} s`)

  const time = async (label: string, url: string) => {
    const samples: number[] = []
    for (let i = 0; i < REPEATS; i++) {
      const at = performance.now()
      await call(base, 'GET', url, undefined, owner.token)
      samples.push(performance.now() - at)
    }
    samples.sort((a, b) => a - b)
    const median = samples[Math.floor(samples.length / 2)]
    const p95 = samples[Math.floor(samples.length * 0.95)]
    log(`${label.padEnd(44)} median ${median.toFixed(2)} ms, p95 ${p95.toFixed(2)} ms (${REPEATS} requests)`)
  }
  await time('history page (10 rows), the reference', '/wallet/transactions')
  await time('history page filtered by asset=silver', '/wallet/transactions?asset=silver')
  await time('as_of before the history', `/wallet/assets?as_of=2000-01-01T00:00:00.000Z`)
  await time('as_of in the middle of the history', `/wallet/assets?as_of=${encodeURIComponent(middle)}`)
  await time('as_of now', `/wallet/assets?as_of=${encodeURIComponent(new Date().toISOString())}`)

  // The whole statement, read as a stream, the server's heap sampled meanwhile (same process).
  global.gc?.()
  const heapBefore = process.memoryUsage().heapUsed
  let heapPeak = heapBefore
  const sampler = setInterval(() => {
    heapPeak = Math.max(heapPeak, process.memoryUsage().heapUsed)
  }, 20)
  started = performance.now()
  const response = await request(`${base}/wallet/transactions?format=csv`, { headers: { authorization: `Bearer ${owner.token}` } })
  let bytes = 0
  let lines = 0
  for await (const chunk of response.body) {
    bytes += chunk.length
    for (const byte of chunk as Buffer) if (byte === 10) lines += 1
  }
  clearInterval(sampler)
  const seconds = (performance.now() - started) / 1000
  log(
    `statement (csv): ${lines - 1} rows, ${(bytes / 1e6).toFixed(1)} MB in ${seconds.toFixed(2)} s (${Math.round((lines - 1) / seconds)} rows/s)`,
  )
  log(
    `heap while sending it: ${(heapBefore / 1e6).toFixed(0)} MB before, peak ${(heapPeak / 1e6).toFixed(0)} MB (${((heapPeak - heapBefore) / 1e6).toFixed(0)} MB above; the body itself is ${(bytes / 1e6).toFixed(0)} MB)`,
  )
}

await main()
