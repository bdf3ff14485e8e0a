/**
 * The service's CPU per transfer on PostgreSQL, in process (`npx tsx bench/experiments/pg-transfers-cpu.ts
 * [--against=<another checkout>] [--rounds=N] [--transfers=N] [--concurrency=N]`): the keyed
 * transfer (100 wallets by key, 1 gold to a random wallet id) sent with Fastify's `inject` by
 * `concurrency` clients at once, so that group commit forms batches as under load, on an
 * embedded PostgreSQL (fsync on). The figure is this process's CPU (user + system) per transfer:
 * the app's work without the HTTP socket and without a load generator. With `--against`, the app
 * of another checkout runs in the same process on its own database, and the two alternate in
 * chunks, so that the machine's other load weighs on both alike.
 */
import fs from 'node:fs'
import inspector from 'node:inspector'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import type { FastifyInstance } from 'fastify'
import pg from 'pg'
import { startPostgres } from '../../scripts/lib/postgres.ts'
import { injector, keyedGoldWallets } from '../in-process.ts'

const args = process.argv.slice(2)
const numberArg = (name: string, fallback: number) => Number(args.find((arg) => arg.startsWith(`--${name}=`))?.split('=')[1] ?? fallback)
const ROUNDS = numberArg('rounds', 3)
const TRANSFERS = numberArg('transfers', 2000)
const CONCURRENCY = numberArg('concurrency', 32)
const WALLETS = 100
const viaLedger = args.includes('--ledger') || args.includes('--lookups')
/** `--lookups`: only a transfer's recipient and asset lookups (`resolveTransfer`), nothing written. */
const lookupsOnly = args.includes('--lookups')
const against = args.find((arg) => arg.startsWith('--against='))?.slice('--against='.length)
const ADMIN_KEY = 'cfa_pg_transfers_bench_admin_key_not_a_secret'
const ROOT = fileURLToPath(new URL('../..', import.meta.url))

interface Subject {
  label: string
  app: FastifyInstance
  keys: { walletId: number; key: string }[]
  /** `--ledger`: the ledger's transfer alone (no HTTP, no authentication), as the route calls it. */
  send: (walletId: number, request: object) => Promise<unknown>
  /** The batches of `--ledger`'s transfers. */
  sizes: { sum: number; count: number }
  close(): Promise<void>
}

async function setUp(root: string, label: string, url: string): Promise<Subject> {
  const load = (file: string) => import(pathToFileURL(path.join(root, file)).href)
  const [
    { buildApp },
    { loadConfig },
    { openPostgres },
    { migrateToLatest },
    { prepareWebhookSecrets },
    { hashToken },
    { createLedger },
    { outbox },
    { Lookups, resolveTransfer },
  ] = await Promise.all([
    load('src/app.ts'),
    load('src/config.ts'),
    load('src/db/postgres.ts'),
    load('src/db/migrate.ts'),
    load('src/events/webhook-secrets.ts'),
    load('src/http/tokens.ts'),
    load('src/ledger/ledger.service.ts'),
    load('src/events/outbox.ts'),
    load('src/ledger/lookups.ts'),
  ])
  const database = openPostgres(url, 20)
  await migrateToLatest(database.db)
  const config = loadConfig({ DATA_DIR: os.tmpdir(), DATABASE_URL: url, ADMIN_API_KEY: ADMIN_KEY, LOG_LEVEL: 'info', AUTH_RATE_LIMIT: '0' })
  const logStream = { write: () => undefined }
  const app: FastifyInstance = await buildApp({
    config,
    database,
    adminKeyHash: hashToken(ADMIN_KEY),
    secretsKey: await prepareWebhookSecrets(database.db, config),
    logStream,
  })
  const keys = await keyedGoldWallets(injector(app, label), ADMIN_KEY, 'cpu', WALLETS)
  const sizes = { sum: 0, count: 0 }
  const ledger = createLedger({ database, events: outbox, onBatch: (size: number) => ((sizes.sum += size), (sizes.count += 1)) })
  return {
    label,
    app,
    keys,
    sizes,
    send: (walletId, request) =>
      lookupsOnly ? resolveTransfer(new Lookups(database.db), walletId, request) : ledger.transfers.send(walletId, request),
    close: () =>
      app
        .close()
        .then(() => ledger.close())
        .then(() => database.close()),
  }
}

/** `count` transfers by `CONCURRENCY` clients; the CPU of this process they took, in µs. */
async function measure(subject: Subject, count: number): Promise<number> {
  let left = count
  const client = async () => {
    while (left-- > 0) {
      const from = subject.keys[Math.floor(Math.random() * WALLETS)]
      let to = subject.keys[Math.floor(Math.random() * WALLETS)]
      while (to === from) to = subject.keys[Math.floor(Math.random() * WALLETS)]
      if (viaLedger) {
        await subject.send(from.walletId, { recipient: String(to.walletId), type: 2, assets: { gold: 1 } })
        continue
      }
      const response = await subject.app.inject({
        method: 'POST',
        url: '/wallet/transactions',
        headers: { authorization: `Bearer ${from.key}`, 'content-type': 'application/json' },
        payload: JSON.stringify({ recipient: String(to.walletId), type: 2, assets: { gold: 1 } }),
      })
      if (response.statusCode !== 201) throw new Error(`${subject.label}: ${response.statusCode} ${response.body}`)
    }
  }
  const before = process.cpuUsage()
  await Promise.all(Array.from({ length: CONCURRENCY }, client))
  const used = process.cpuUsage(before)
  return used.user + used.system
}

/** The mean batch size so far, from the app's metrics. */
async function batchSize(subject: Subject): Promise<number> {
  if (viaLedger) return subject.sizes.sum / subject.sizes.count
  const text = (await subject.app.inject({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer ${ADMIN_KEY}` } })).body
  const value = (name: string) => Number(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(text)?.[1] ?? NaN)
  return value('coffer_transfer_batch_size_sum') / value('coffer_transfer_batch_size_count')
}

async function main(): Promise<void> {
  const statements = args.includes('--statements')
  const server = await startPostgres({
    name: 'coffer-pg-transfers-cpu',
    flags: statements ? ['-c', 'shared_preload_libraries=pg_stat_statements'] : [],
  })
  const admin = new pg.Client({ connectionString: server.url })
  await admin.connect()
  const urlOf = async (name: string) => {
    await admin.query(`create database ${name}`)
    const url = new URL(server.url)
    url.pathname = `/${name}`
    return url.toString()
  }
  const urls = [await urlOf('cpu_a')]
  if (against) urls.push(await urlOf('cpu_b'))
  const subjects = [await setUp(ROOT, 'this checkout', urls[0])]
  if (against) subjects.push(await setUp(path.resolve(against), against, urls[1]))
  try {
    for (const subject of subjects) await measure(subject, 1000)
    // `--profile=<file>`: a CPU profile of the rounds alone (set-up and warm-up left out).
    const profileTo = args.find((arg) => arg.startsWith('--profile='))?.slice('--profile='.length)
    const session = profileTo ? new inspector.Session() : undefined
    const post = (method: string, params?: object) =>
      new Promise<unknown>((resolve, reject) => session?.post(method, params, (error, result) => (error ? reject(error) : resolve(result))))
    if (session) {
      session.connect()
      await post('Profiler.enable')
      await post('Profiler.setSamplingInterval', { interval: 200 })
      await post('Profiler.start')
    }
    const chunk = 500
    for (let round = 1; round <= ROUNDS; round++) {
      const spent = subjects.map(() => 0)
      for (let done = 0, pair = 0; done < TRANSFERS; done += chunk, pair++) {
        for (const which of pair % 2 === 0 ? subjects.keys() : [...subjects.keys()].reverse())
          spent[which] += await measure(subjects[which], chunk)
      }
      const sizes = await Promise.all(subjects.map(batchSize))
      console.log(
        `round ${round}: ${subjects.map((s, i) => `${s.label.slice(-14)} ${(spent[i] / (Math.ceil(TRANSFERS / chunk) * chunk)).toFixed(1)} (batches of ${sizes[i].toFixed(1)})`).join('   ')} µs/transfer`,
      )
    }
    if (session && profileTo) {
      const { profile } = (await post('Profiler.stop')) as { profile: unknown }
      fs.writeFileSync(profileTo, JSON.stringify(profile))
      session.disconnect()
    }
    if (statements) {
      // `--statements`: what the server ran per transfer over every round, by statement.
      const total = ROUNDS * Math.ceil(TRANSFERS / chunk) * chunk + 1000
      for (const [i, subject] of subjects.entries()) {
        const client = new pg.Client({ connectionString: urls[i] })
        await client.connect()
        await client.query('create extension if not exists pg_stat_statements')
        const { rows } = await client.query(
          `select calls, total_exec_time, query from pg_stat_statements where dbid = (select oid from pg_database where datname = current_database()) order by total_exec_time desc limit 20`,
        )
        // Each statement's calls and server time per transfer: a round's statements run once for many transfers.
        console.log(`${subject.label}: statements by server time (calls a transfer, µs a call, µs a transfer)`)
        for (const row of rows)
          console.log(
            `  ${(Number(row.calls) / total).toFixed(3).padStart(7)} ${((Number(row.total_exec_time) * 1000) / Number(row.calls)).toFixed(0).padStart(6)} ${((Number(row.total_exec_time) * 1000) / total).toFixed(1).padStart(6)}  ${String(row.query).replace(/\s+/g, ' ').slice(0, 100)}`,
          )
        await client.end()
      }
    }
  } finally {
    for (const subject of subjects) await subject.close()
    await admin.end()
    await server.stop()
  }
}

await main()
