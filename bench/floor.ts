/**
 * The per-request floor, measured in process (`npm run bench:floor [-- --requests=N] [-- --rounds=N]`):
 * the service's CPU per request, in µs, for requests that do little besides what every route
 * pays (routing, hooks, auth, logging, metrics, headers, serialization). It builds the app on a
 * fresh SQLite database with info logging (lines written to a sink, as `npm start` writes them
 * to standard output) and sends requests one at a time with Fastify's `inject`, so no socket and
 * no load generator share the CPU: the figures move far less on a busy machine than the HTTP
 * benches' and suit comparing two commits. `inject` adds its own fixed cost to every figure.
 */
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import type { InjectOptions } from 'fastify'
import { buildApp } from '../src/app.ts'
import { loadConfig } from '../src/config.ts'
import { openSqlite } from '../src/db/database.ts'
import { migrateToLatest } from '../src/db/migrate.ts'
import { prepareWebhookSecrets } from '../src/events/webhook-secrets.ts'
import { hashToken } from '../src/http/tokens.ts'

const args = process.argv.slice(2)
const numberArg = (name: string, fallback: number) => Number(args.find((arg) => arg.startsWith(`--${name}=`))?.split('=')[1] ?? fallback)
const REQUESTS = numberArg('requests', 4000)
const ROUNDS = numberArg('rounds', 3)
// `--only=healthz,assets`: only the cases whose name contains one of these words.
const only = args.find((arg) => arg.startsWith('--only='))?.slice('--only='.length).split(',')
const ADMIN_KEY = 'cfa_floor_bench_admin_key_not_a_secret'

interface Case {
  name: string
  request: () => InjectOptions
  status: number
}

async function main(): Promise<void> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'coffer-floor-'))
  const database = openSqlite(path.join(dataDir, 'coffer.sqlite'))
  await migrateToLatest(database.db)
  const config = loadConfig({ DATA_DIR: dataDir, ADMIN_API_KEY: ADMIN_KEY, LOG_LEVEL: 'info', AUTH_RATE_LIMIT: '0', CORS_ORIGINS: 'http://localhost:5173' })
  let logged = 0
  const logStream = { write: (line: string) => void (logged += line.length) }
  const app = await buildApp({ config, database, adminKeyHash: hashToken(ADMIN_KEY), secretsKey: await prepareWebhookSecrets(database.db, config), logStream })
  try {
    const admin = { authorization: `Bearer ${ADMIN_KEY}` }
    const call = async (options: InjectOptions, status: number) => {
      const response = await app.inject(options)
      if (response.statusCode !== status) throw new Error(`${JSON.stringify(options)}: ${response.statusCode} ${response.body}`)
      return response.json()
    }
    const users = []
    for (const name of ['floora', 'floorb']) {
      await call({ method: 'POST', url: '/users', payload: { username: name, password: 'correct horse' } }, 201)
      const login = await call({ method: 'POST', url: `/users/${name}/sessions`, payload: { password: 'correct horse', return_token: true } }, 201)
      const key = await call({ method: 'POST', url: '/wallet/sessions', headers: { authorization: `Bearer ${login.token}` }, payload: { name: 'bench' } }, 201)
      users.push({ name, session: login.token as string, key: key.token as string })
    }
    const asset = await call({ method: 'POST', url: '/assets', headers: admin, payload: { name: 'gold', value: 1 } }, 201)
    const [a, b] = users
    const wallet = await call({ method: 'GET', url: '/user/session', headers: { authorization: `Bearer ${a.session}` } }, 200)
    await call({ method: 'POST', url: `/wallets/${wallet.wallet_id}/assets`, headers: admin, payload: { id: asset.id, quantity: 1_000_000_000 } }, 201)

    const byKey = { authorization: `Bearer ${a.key}` }
    const cases: Case[] = [
      { name: 'GET /healthz', request: () => ({ method: 'GET', url: '/healthz' }), status: 200 },
      { name: 'GET /wallet/assets (key)', request: () => ({ method: 'GET', url: '/wallet/assets', headers: byKey }), status: 200 },
      {
        name: 'GET /wallet/assets (cookie, Origin)',
        request: () => ({ method: 'GET', url: '/wallet/assets', headers: { cookie: `coffer_session=${a.session}`, origin: 'http://localhost:5173' } }),
        status: 200,
      },
      { name: 'POST /wallet/transactions (key)', request: () => ({ method: 'POST', url: '/wallet/transactions', headers: byKey, payload: { recipient: b.name, assets: { gold: 1 } } }), status: 201 },
      { name: 'POST /wallet/transactions 400 G000', request: () => ({ method: 'POST', url: '/wallet/transactions', headers: byKey, payload: { recipient: b.name, assets: { gold: 'x' } } }), status: 400 },
      { name: 'GET /wallet/assets 401 A001', request: () => ({ method: 'GET', url: '/wallet/assets', headers: { authorization: 'Bearer cfw_nonsense' } }), status: 401 },
    ]
    const chosen = cases.filter(({ name }) => !only || only.some((word) => name.includes(word)))
    const best = new Map<string, number>()
    for (let round = 1; round <= ROUNDS; round++) {
      for (const { name, request, status } of chosen) {
        for (let i = 0; i < 200; i++) await call(request(), status)
        const before = process.cpuUsage()
        for (let i = 0; i < REQUESTS; i++) {
          const response = await app.inject(request())
          if (response.statusCode !== status) throw new Error(`${name}: ${response.statusCode} ${response.body}`)
        }
        const used = process.cpuUsage(before)
        const perRequest = (used.user + used.system) / REQUESTS
        best.set(name, Math.min(best.get(name) ?? Infinity, perRequest))
        console.log(`round ${round}: ${name.padEnd(40)} ${perRequest.toFixed(1).padStart(7)} µs/req`)
      }
    }
    console.log(`\nbest of ${ROUNDS} rounds of ${REQUESTS} requests each (CPU of this process, µs per request, inject included):`)
    for (const [name, value] of best) console.log(`  ${name.padEnd(40)} ${value.toFixed(1).padStart(7)}`)
    if (logged === 0) throw new Error('no log line was written: the figures would leave logging out')
  } finally {
    await app.close()
    await database.close()
    fs.rmSync(dataDir, { recursive: true, force: true })
  }
}

await main()
