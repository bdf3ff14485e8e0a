/**
 * What SQLite spends on each statement of the batch route, in process (`npx tsx
 * bench/experiments/statement-times.ts [--batches=N] [--concurrency=N]`): atomic batches of 100
 * transfers of 1 gold from a wallet by key to wallets by id at random, sent with Fastify's `inject`
 * by `concurrency` clients, to one app on a fresh SQLite store. Every better-sqlite3 statement run
 * is timed by its text; prints each text's share of the process's CPU, runs and µs per transfer,
 * and the process's CPU per transfer. Times are wall time on the one thread, so `COMMIT` counts its
 * fsync.
 */
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import Sqlite from 'better-sqlite3'
import { sql } from 'kysely'
import { buildApp } from '../../src/app.ts'
import { loadConfig } from '../../src/config.ts'
import { openDatabase } from '../../src/db/database.ts'
import { migrateToLatest } from '../../src/db/migrate.ts'
import { prepareWebhookSecrets } from '../../src/events/webhook-secrets.ts'
import { hashToken } from '../../src/http/tokens.ts'
import { injector, keyedGoldWallets } from '../in-process.ts'

const args = process.argv.slice(2)
const option = (name: string) => args.find((arg) => arg.startsWith(`--${name}=`))?.slice(name.length + 3)
const BATCHES = Number(option('batches') ?? 400)
const CONCURRENCY = Number(option('concurrency') ?? 32)
const WALLETS = 100
const BATCH = 100
const ADMIN_KEY = 'cfa_statement_times_bench_admin_key_not_a_secret'

/** Time spent and runs, by statement text. */
const spent = new Map<string, { ms: number; runs: number }>()
let timing = false

function timeStatements(): void {
  const probe = new Sqlite(':memory:')
  const prototype = Object.getPrototypeOf(probe.prepare('select 1')) as Record<string, (...a: unknown[]) => unknown>
  probe.close()
  for (const method of ['run', 'all', 'get'] as const) {
    const original = prototype[method]
    prototype[method] = function (this: { source: string }, ...values: unknown[]) {
      if (!timing) return original.apply(this, values)
      const started = process.hrtime.bigint()
      try {
        return original.apply(this, values)
      } finally {
        const ms = Number(process.hrtime.bigint() - started) / 1e6
        const text = this.source.replace(/\s+/g, ' ').trim().slice(0, 110)
        const entry = spent.get(text) ?? { ms: 0, runs: 0 }
        entry.ms += ms
        entry.runs++
        spent.set(text, entry)
      }
    }
  }
}

async function main(): Promise<void> {
  timeStatements()
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'coffer-statement-times-'))
  const config = loadConfig({ DATA_DIR: dataDir, ADMIN_API_KEY: ADMIN_KEY, LOG_LEVEL: 'info', AUTH_RATE_LIMIT: '0' })
  const database = openDatabase({ ...config, backgroundCheckpoints: true })
  await migrateToLatest(database.db)
  if (option('pragma')) await sql.raw(`pragma ${option('pragma')}`).execute(database.db)
  const app = await buildApp({
    config,
    database,
    adminKeyHash: hashToken(ADMIN_KEY),
    secretsKey: await prepareWebhookSecrets(database.db, config),
    logStream: { write: () => undefined },
  })
  try {
    const keys = await keyedGoldWallets(injector(app), ADMIN_KEY, 'times', WALLETS)
    let left = BATCHES
    const client = async () => {
      while (left-- > 0) {
        const from = keys[Math.floor(Math.random() * WALLETS)]
        const transfers = Array.from({ length: BATCH }, () => {
          let to = keys[Math.floor(Math.random() * WALLETS)]
          while (to === from) to = keys[Math.floor(Math.random() * WALLETS)]
          return { recipient: String(to.walletId), type: 2, assets: { gold: 1 } }
        })
        const response = await app.inject({
          method: 'POST',
          url: '/wallet/transactions/batch',
          headers: { authorization: `Bearer ${from.key}`, 'content-type': 'application/json' },
          payload: JSON.stringify({ transfers }),
        })
        if (response.statusCode !== 201) throw new Error(`${response.statusCode} ${response.body}`)
      }
    }
    timing = true
    const before = process.cpuUsage()
    const started = process.hrtime.bigint()
    await Promise.all(Array.from({ length: CONCURRENCY }, client))
    const wallMs = Number(process.hrtime.bigint() - started) / 1e6
    const used = process.cpuUsage(before)
    timing = false
    const transfers = BATCHES * BATCH
    const cpuUs = used.user + used.system
    console.log(
      `load average ${os.loadavg()[0].toFixed(1)}: ${(cpuUs / transfers).toFixed(1)} µs CPU per transfer, ` +
        `${Math.round(transfers / (wallMs / 1000))} transfers/s`,
    )
    const total = [...spent.values()].reduce((sum, entry) => sum + entry.ms, 0)
    console.log(`statements: ${((total * 1000) / transfers).toFixed(1)} µs per transfer`)
    for (const [text, { ms, runs }] of [...spent].sort((a, b) => b[1].ms - a[1].ms).slice(0, 25))
      console.log(`${((ms * 1000) / transfers).toFixed(2).padStart(7)} µs  ${String(runs).padStart(7)} runs  ${text}`)
  } finally {
    await app.close()
    await database.close()
    fs.rmSync(dataDir, { recursive: true, force: true })
  }
}

await main()
