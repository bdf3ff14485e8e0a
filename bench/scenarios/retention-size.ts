/**
 * Database size per million transfers, before and after the retention job (`npm run bench -- retention-size
 * [--transfers=N] [--storage=sqlite|postgres]`). Builds the service in process on a fresh
 * store, registers 40 users (half with a webhook on a local receiver answering 200), runs N
 * transfers through the API with an Idempotency-Key each, waits for every delivery, and measures
 * the database; then prunes as the job would 31 days later (events, ended deliveries and their
 * attempts, idempotency keys, expired sessions) and measures again after compacting (SQLite
 * VACUUM, PostgreSQL VACUUM FULL: the size a long-running store levels off at, since freed space
 * is reused). Figures per million transfers are extrapolated linearly from N, and printed as such.
 */
import fs from 'node:fs'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { sql } from 'kysely'
import { buildApp } from '../../src/app.ts'
import { loadConfig } from '../../src/config.ts'
import { openDatabase, type Database } from '../../src/db/database.ts'
import { migrateToLatest } from '../../src/db/migrate.ts'
import { prepareWebhookSecrets } from '../../src/events/webhook-secrets.ts'
import { hashToken } from '../../src/http/tokens.ts'
import { pruneOnce } from '../../src/operations/retention.ts'
import { startPostgres } from '../postgres.ts'

const args = process.argv.slice(2)
const transfers = Number(args.find((arg) => arg.startsWith('--transfers='))?.split('=')[1] ?? 20_000)
const storageArg = args.find((arg) => arg.startsWith('--storage='))?.split('=')[1]
const storages = (storageArg ? [storageArg] : ['sqlite', 'postgres']) as ('sqlite' | 'postgres')[]
const ADMIN = 'cfa_retention_bench_admin_key_only'
const USERS = 40

const TABLES = [
  'transactions',
  'transaction_assets',
  'holdings',
  'events',
  'webhook_deliveries',
  'webhook_attempts',
  'idempotency_keys',
  'user_sessions',
] as const

async function sizes(database: Database): Promise<{ total: number; tables: Record<string, number> }> {
  const tables: Record<string, number> = {}
  if (database.dialect === 'postgres') {
    for (const table of TABLES)
      tables[table] = Number(
        (await sql<{ size: string }>`select pg_total_relation_size(${table}) as size`.execute(database.db)).rows[0].size,
      )
    const total = Number(
      (await sql<{ size: string }>`select pg_database_size(current_database()) as size`.execute(database.db)).rows[0].size,
    )
    return { total, tables }
  }
  await sql`pragma wal_checkpoint(truncate)`.execute(database.db)
  try {
    for (const table of TABLES) {
      const { rows } = await sql<{
        size: number
      }>`select sum(pgsize) as size from dbstat where name = ${table} or name in (select name from sqlite_master where tbl_name = ${table} and type = 'index')`.execute(
        database.db,
      )
      tables[table] = Number(rows[0].size ?? 0)
    }
  } catch {
    // dbstat is not compiled in: the total only.
  }
  const { rows } = await sql<{
    pages: number
    size: number
  }>`select page_count as pages, page_size as size from pragma_page_count(), pragma_page_size()`.execute(database.db)
  return { total: rows[0].pages * rows[0].size, tables }
}

/** Runs `work` over the items, at most `limit` at once. */
async function pool<T, R>(items: T[], limit: number, work: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = []
  let next = 0
  await Promise.all(
    Array.from({ length: limit }, async () => {
      while (next < items.length) {
        const index = next++
        results[index] = await work(items[index])
      }
    }),
  )
  return results
}

const mb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MB`
const perMillion = (bytes: number) => mb((bytes / transfers) * 1_000_000)

async function measure(storage: 'sqlite' | 'postgres'): Promise<void> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'coffer-retention-bench-'))
  const server = storage === 'postgres' ? await startPostgres() : undefined
  const receiver = http.createServer((req, res) => req.resume().on('end', () => res.end('ok')))
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve))
  try {
    const databaseUrl = server ? await server.createDatabase('retention') : undefined
    const config = loadConfig({
      DATA_DIR: dataDir,
      DATABASE_URL: databaseUrl,
      ADMIN_API_KEY: ADMIN,
      LOG_LEVEL: 'silent',
      AUTH_RATE_LIMIT: '0',
      WEBHOOK_ALLOW_PRIVATE: 'true',
    })
    const database = openDatabase({ ...config, backgroundCheckpoints: true })
    await migrateToLatest(database.db)
    const app = await buildApp({
      config,
      database,
      adminKeyHash: hashToken(ADMIN),
      secretsKey: await prepareWebhookSecrets(database.db, config),
    })
    const hookUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`
    const admin = { authorization: `Bearer ${ADMIN}` }
    const asset = await app.inject({ method: 'POST', url: '/assets', headers: admin, payload: { name: 'bench', value: 1 } })
    const users = await pool(
      Array.from({ length: USERS }, (_, i) => i),
      4,
      async (i) => {
        const username = `ret${i}`
        const registered = await app.inject({ method: 'POST', url: '/users', payload: { username, password: 'bench password' } })
        const login = await app.inject({
          method: 'POST',
          url: `/users/${username}/sessions`,
          payload: { password: 'bench password', return_token: true },
        })
        const auth = { authorization: `Bearer ${login.json().token}` }
        await app.inject({
          method: 'POST',
          url: `/wallets/${registered.json().primary_wallet_id}/assets`,
          headers: admin,
          payload: { id: asset.json().id, quantity: 1_000_000_000 },
        })
        if (i % 2 === 0) await app.inject({ method: 'PUT', url: '/wallet/webhook', headers: auth, payload: { webhook: hookUrl } })
        return { username, auth }
      },
    )
    const started = Date.now()
    await pool(
      Array.from({ length: transfers }, (_, i) => i),
      16,
      async (i) => {
        const from = users[i % USERS]
        const to = users[(i * 7 + 1) % USERS === i % USERS ? (i + 1) % USERS : (i * 7 + 1) % USERS]
        const sent = await app.inject({
          method: 'POST',
          url: '/wallet/transactions',
          headers: { ...from.auth, 'idempotency-key': `k${i}` },
          payload: { recipient: to.username, assets: { bench: 1 }, memo: `bench ${i}` },
        })
        if (sent.statusCode !== 201) throw new Error(`transfer failed: ${sent.body}`)
        if (i > 0 && i % 10_000 === 0) process.stderr.write(`  ${storage}: ${i} transfers\n`)
      },
    )
    const seconds = (Date.now() - started) / 1000
    // Every delivery settled before measuring.
    for (;;) {
      const pending = await database.db
        .selectFrom('webhook_deliveries')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .where('status', '=', 'pending')
        .executeTakeFirstOrThrow()
      if (Number(pending.n) === 0) break
      await new Promise((resolve) => setTimeout(resolve, 200))
    }
    await app.close()
    if (storage === 'postgres') await sql`vacuum analyze`.execute(database.db)
    const before = await sizes(database)
    const report = await pruneOnce(
      database,
      {
        eventRetentionDays: config.eventRetentionDays,
        idempotencyRetentionHours: config.idempotencyRetentionHours,
        sessionIdleDays: config.sessionIdleDays,
      },
      Date.now() + 31 * 86_400_000,
    )
    await sql.raw(storage === 'postgres' ? 'vacuum full analyze' : 'vacuum').execute(database.db)
    const after = await sizes(database)
    await database.close()
    console.log(
      `\n${storage}: ${transfers} transfers in ${seconds.toFixed(0)} s (${USERS} users, half with a webhook); pruned ${JSON.stringify(report)}`,
    )
    console.log(`  database size: ${mb(before.total)} before retention, ${mb(after.total)} after (compacted)`)
    console.log(
      `  per million transfers (extrapolated from ${transfers}): ${perMillion(before.total)} before, ${perMillion(after.total)} after`,
    )
    for (const table of TABLES) {
      if (before.tables[table] === undefined) continue
      console.log(
        `    ${table.padEnd(20)} ${perMillion(before.tables[table]).padStart(10)} -> ${perMillion(after.tables[table] ?? 0).padStart(10)} per million`,
      )
    }
  } finally {
    receiver.close()
    await server?.stop()
    fs.rmSync(dataDir, { recursive: true, force: true })
  }
}

for (const storage of storages) await measure(storage)
