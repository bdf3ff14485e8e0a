/**
 * The batch route in process, two group-commit limits taking turns (`npx tsx bench/experiments/batch-cpu.ts
 * [--storage=sqlite|postgres] [--limits=128,1000] [--roots=DIR,DIR] [--rounds=N] [--batches=N] [--concurrency=N]`):
 * atomic batches of 100 transfers of 1 gold from a wallet by key to wallets by id at random
 * (`POST /wallet/transactions/batch`), sent with Fastify's `inject` by `concurrency` clients at
 * once, to two apps in this process, each on its own store and with its own
 * `GROUP_COMMIT_MAX_BATCH`. They alternate in chunks of batches, so that the machine's other load
 * weighs on both alike. Per round and limit it prints the process's CPU (user + system) per
 * transfer, transfers per second of wall time (which counts the commits' fsync) and the mean
 * number of transfers per commit. With `--roots`, the apps are instead the code of two checkouts
 * (say, a branch against main) at the first limit, compared the same way. With `--statements`
 * (SQLite, best with one limit), every better-sqlite3 statement run is timed by its text, and the
 * texts that took the most are printed in µs per transfer: wall time on the one thread, so
 * `COMMIT` counts its fsync.
 */
import os from 'node:os'
import path from 'node:path'
import type { FastifyInstance } from 'fastify'
import pg from 'pg'
import { startPostgres, type TestPostgres } from '../../scripts/lib/postgres.ts'
import { buildAppAt, injector, keyedGoldWallets } from '../in-process.ts'
import { StatementTiming } from '../statement-timing.ts'

const args = process.argv.slice(2)
const option = (name: string) => args.find((arg) => arg.startsWith(`--${name}=`))?.slice(name.length + 3)
const STORAGE = (option('storage') ?? 'sqlite') as 'sqlite' | 'postgres'
const LIMITS = (option('limits') ?? '128,1000').split(',').map(Number)
const ROOTS = option('roots')
  ?.split(',')
  .map((root) => path.resolve(root))
const ROUNDS = Number(option('rounds') ?? 3)
const BATCHES = Number(option('batches') ?? 200)
const CONCURRENCY = Number(option('concurrency') ?? 32)
const CHUNK = 40
const ROOT = path.resolve(import.meta.dirname, '../..')
const WALLETS = 100
const BATCH = 100
const ADMIN_KEY = 'cfa_batch_cpu_bench_admin_key_not_a_secret'

interface Subject {
  label: string
  app: FastifyInstance
  keys: { walletId: number; key: string }[]
  close(): Promise<void>
}

/** The app of the checkout at `root` with group commit's batch limit `limit`, and its keyed wallets. */
async function setUp(limit: number, databaseUrl: string | undefined, root: string): Promise<Subject> {
  const { app, close } = await buildAppAt(root, ADMIN_KEY, databaseUrl, 'coffer-batch-cpu', {
    GROUP_COMMIT_MAX_BATCH: String(limit),
    // A loaded machine must not turn slow statements into 503s that end the run.
    PG_QUERY_TIMEOUT_MS: '120000',
    PG_CONNECT_TIMEOUT_MS: '120000',
    PG_STATEMENT_TIMEOUT_MS: '120000',
    // The setup's issuances all wait for mint's turn, a lock.
    PG_LOCK_TIMEOUT_MS: '120000',
  })
  const keys = await keyedGoldWallets(injector(app), ADMIN_KEY, 'batch', WALLETS)
  return {
    label: ROOTS ? root : `limit ${limit}`,
    app,
    keys,
    close,
  }
}

/** `--statements`: every statement run timed by its text while a chunk is measured. */
const statements = args.includes('--statements') ? new StatementTiming() : undefined

/** `count` batches by `CONCURRENCY` clients: this process's CPU and the wall time they took, in µs. */
async function measure(subject: Subject, count: number): Promise<{ cpu: number; wall: number }> {
  let left = count
  const client = async () => {
    while (left-- > 0) {
      const from = subject.keys[Math.floor(Math.random() * WALLETS)]
      const transfers = Array.from({ length: BATCH }, () => {
        let to = subject.keys[Math.floor(Math.random() * WALLETS)]
        while (to === from) to = subject.keys[Math.floor(Math.random() * WALLETS)]
        return { recipient: String(to.walletId), type: 2, assets: { gold: 1 } }
      })
      const response = await subject.app.inject({
        method: 'POST',
        url: '/wallet/transactions/batch',
        headers: { authorization: `Bearer ${from.key}`, 'content-type': 'application/json' },
        payload: JSON.stringify({ transfers }),
      })
      if (response.statusCode !== 201) throw new Error(`${subject.label}: ${response.statusCode} ${response.body}`)
    }
  }
  const before = process.cpuUsage()
  const started = process.hrtime.bigint()
  if (statements) statements.label = 'all'
  await Promise.all(Array.from({ length: CONCURRENCY }, client))
  if (statements) statements.label = undefined
  const used = process.cpuUsage(before)
  return { cpu: used.user + used.system, wall: Number(process.hrtime.bigint() - started) / 1000 }
}

/** Transfers per commit so far, from the app's metrics. */
async function batchSize(subject: Subject): Promise<number> {
  const text = (await subject.app.inject({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer ${ADMIN_KEY}` } })).body
  const value = (name: string) => Number(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(text)?.[1] ?? NaN)
  return value('coffer_transfer_batch_size_sum') / value('coffer_transfer_batch_size_count')
}

async function main(): Promise<void> {
  let server: TestPostgres | undefined
  let admin: pg.Client | undefined
  const setups = ROOTS ? ROOTS.map((root) => ({ root, limit: LIMITS[0] })) : LIMITS.map((limit) => ({ root: ROOT, limit }))
  const urls: (string | undefined)[] = setups.map(() => undefined)
  if (STORAGE === 'postgres') {
    server = await startPostgres({ name: 'coffer-batch-cpu' })
    admin = new pg.Client({ connectionString: server.url })
    await admin.connect()
    for (const [i] of setups.entries()) {
      await admin.query(`create database batch_cpu_${i}`)
      const url = new URL(server.url)
      url.pathname = `/batch_cpu_${i}`
      urls[i] = url.toString()
    }
  }
  const subjects: Subject[] = []
  try {
    for (const [i, { root, limit }] of setups.entries()) subjects.push(await setUp(limit, urls[i], root))
    statements?.install()
    for (const subject of subjects) await measure(subject, 20)
    statements?.spent.clear()
    console.log(`${STORAGE}, load average ${os.loadavg()[0].toFixed(1)}, ${CONCURRENCY} clients, batches of ${BATCH}`)
    for (let round = 1; round <= ROUNDS; round++) {
      const spent = subjects.map(() => ({ cpu: 0, wall: 0 }))
      for (let done = 0, pair = 0; done < BATCHES; done += CHUNK, pair++) {
        const order = pair % 2 === 0 ? [...subjects.keys()] : [...subjects.keys()].reverse()
        for (const which of order) {
          const { cpu, wall } = await measure(subjects[which], CHUNK)
          spent[which].cpu += cpu
          spent[which].wall += wall
        }
      }
      const transfers = Math.ceil(BATCHES / CHUNK) * CHUNK * BATCH
      const sizes = await Promise.all(subjects.map(batchSize))
      const figures = subjects.map(
        (subject, i) =>
          `${subject.label}: ${(spent[i].cpu / transfers).toFixed(1)} µs CPU, ` +
          `${Math.round(transfers / (spent[i].wall / 1e6))} transfers/s, ${sizes[i].toFixed(0)} per commit`,
      )
      console.log(`round ${round} (load ${os.loadavg()[0].toFixed(1)}): ${figures.join('   ')}`)
    }
    const measured = ROUNDS * Math.ceil(BATCHES / CHUNK) * CHUNK * BATCH * subjects.length
    if (statements) console.log(statements.report(new Map([['all', measured]])))
  } finally {
    for (const subject of subjects) await subject.close()
    await admin?.end()
    await server?.stop()
  }
}

await main()
