/**
 * The per-request floor, measured in process (`npm run bench -- request-floor [--requests=N] [--rounds=N]
 * [--only=healthz,assets] [--against=<another checkout>]`): the service's CPU per request,
 * in µs, for requests that do little besides what every route pays (routing, hooks, auth, logging,
 * metrics, headers, serialization). It builds the app on a fresh SQLite database with info logging
 * (lines written to a sink, as `npm start` writes them to standard output) and sends requests one
 * at a time with Fastify's `inject`: no socket and no load generator share the CPU. `inject` adds
 * its own fixed cost to every figure.
 *
 * `--against=<dir>` also builds the app of another checkout (say a detached worktree of an older
 * commit, with its node_modules) in the same process, and alternates the two in short batches, so
 * that whatever else the machine runs weighs on both alike: the way to compare two commits on a
 * busy machine, where runs a minute apart differ by a third.
 */
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import type { FastifyInstance, InjectOptions } from 'fastify'
import { appCode, injector, signUpWithKey } from '../in-process.ts'

const args = process.argv.slice(2)
const numberArg = (name: string, fallback: number) => Number(args.find((arg) => arg.startsWith(`--${name}=`))?.split('=')[1] ?? fallback)
const REQUESTS = numberArg('requests', 4000)
const ROUNDS = numberArg('rounds', 3)
/** Requests per batch when two checkouts alternate. */
const BATCH = 250
// `--only=healthz,assets`: only the cases whose name contains one of these words.
const only = args
  .find((arg) => arg.startsWith('--only='))
  ?.slice('--only='.length)
  .split(',')
const against = args.find((arg) => arg.startsWith('--against='))?.slice('--against='.length)
const ADMIN_KEY = 'cfa_floor_bench_admin_key_not_a_secret'
const ROOT = fileURLToPath(new URL('../..', import.meta.url))

interface Case {
  name: string
  request: () => InjectOptions
  /** The status expected; several when the case alternates requests. */
  status: number | number[]
}

interface Floor {
  label: string
  app: FastifyInstance
  cases: Case[]
  close(): Promise<void>
}

/** Builds the app of the checkout at `root` on a fresh SQLite database, with two users, their keys and an asset. */
async function setUp(root: string, label: string): Promise<Floor> {
  const { buildApp, loadConfig, openSqlite, migrateToLatest, prepareWebhookSecrets, hashToken } = await appCode(root)
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'coffer-floor-'))
  const database = openSqlite(path.join(dataDir, 'coffer.sqlite'))
  await migrateToLatest(database.db)
  const config = loadConfig({
    DATA_DIR: dataDir,
    ADMIN_API_KEY: ADMIN_KEY,
    LOG_LEVEL: 'info',
    AUTH_RATE_LIMIT: '0',
    CORS_ORIGINS: 'http://localhost:5173',
  })
  let logged = 0
  const logStream = { write: (line: string) => void (logged += line.length) }
  const app: FastifyInstance = await buildApp({
    config,
    database,
    adminKeyHash: hashToken(ADMIN_KEY),
    secretsKey: await prepareWebhookSecrets(database.db, config),
    logStream,
  })
  const close = async () => {
    await app.close()
    await database.close()
    fs.rmSync(dataDir, { recursive: true, force: true })
  }
  try {
    const admin = { authorization: `Bearer ${ADMIN_KEY}` }
    const call = injector(app, label)
    const users = []
    for (const name of ['floora', 'floorb']) users.push({ name, ...(await signUpWithKey(call, name)) })
    const asset = await call({ method: 'POST', url: '/assets', headers: admin, payload: { name: 'gold', value: 1 } }, 201)
    const [a, b] = users
    const wallet = await call({ method: 'GET', url: '/user/session', headers: { authorization: `Bearer ${a.session}` } }, 200)
    await call(
      { method: 'POST', url: `/wallets/${wallet.wallet_id}/assets`, headers: admin, payload: { id: asset.id, quantity: 1_000_000_000 } },
      201,
    )
    const byKey = { authorization: `Bearer ${a.key}` }
    // A history of a dozen transfers: the page below is a full page of ten, with a Link.
    for (let i = 0; i < 12; i++)
      await call({ method: 'POST', url: '/wallet/transactions', headers: byKey, payload: { recipient: b.name, assets: { gold: 1 } } }, 201)
    let turn = 0
    const cases: Case[] = [
      { name: 'GET /healthz', request: () => ({ method: 'GET', url: '/healthz' }), status: 200 },
      { name: 'GET /wallet/assets (key)', request: () => ({ method: 'GET', url: '/wallet/assets', headers: byKey }), status: 200 },
      {
        name: 'GET /wallet/assets (cookie, Origin)',
        request: () => ({
          method: 'GET',
          url: '/wallet/assets',
          headers: { cookie: `coffer_session=${a.session}`, origin: 'http://localhost:5173' },
        }),
        status: 200,
      },
      {
        name: 'POST /wallet/transactions (key)',
        request: () => ({
          method: 'POST',
          url: '/wallet/transactions',
          headers: byKey,
          payload: { recipient: b.name, assets: { gold: 1 } },
        }),
        status: 201,
      },
      {
        name: 'POST /wallet/transactions 400 G000',
        request: () => ({
          method: 'POST',
          url: '/wallet/transactions',
          headers: byKey,
          payload: { recipient: b.name, assets: { gold: 'x' } },
        }),
        status: 400,
      },
      {
        name: 'GET /wallet/assets 401 A001',
        request: () => ({ method: 'GET', url: '/wallet/assets', headers: { authorization: 'Bearer cfw_nonsense' } }),
        status: 401,
      },
      // A page kept, nothing committed since; then pages read while transfers commit (one of each in turn).
      {
        name: 'GET /wallet/transactions (key)',
        request: () => ({ method: 'GET', url: '/wallet/transactions?limit=10', headers: byKey }),
        status: 200,
      },
      {
        name: 'GET /wallet/transactions + POST, in turn',
        request: () =>
          turn++ % 2 === 0
            ? { method: 'GET', url: '/wallet/transactions?limit=10', headers: byKey }
            : { method: 'POST', url: '/wallet/transactions', headers: byKey, payload: { recipient: b.name, assets: { gold: 1 } } },
        status: [200, 201],
      },
    ]
    const chosen = cases.filter(({ name }) => !only || only.some((word) => name.includes(word)))
    for (const { request, status } of chosen) await call(request(), typeof status === 'number' ? status : status[0])
    if (logged === 0) throw new Error(`${label}: no log line was written: the figures would leave logging out`)
    return { label, app, cases: chosen, close }
  } catch (error) {
    await close()
    throw error
  }
}

/** The CPU of this process, in µs, that `count` requests of the case take. */
async function measure(floor: Floor, index: number, count: number): Promise<number> {
  const { request, status, name } = floor.cases[index]
  const before = process.cpuUsage()
  for (let i = 0; i < count; i++) {
    const response = await floor.app.inject(request())
    if (typeof status === 'number' ? response.statusCode !== status : !status.includes(response.statusCode))
      throw new Error(`${floor.label}: ${name}: ${response.statusCode} ${response.body}`)
  }
  const used = process.cpuUsage(before)
  return used.user + used.system
}

async function main(): Promise<void> {
  const floors = [await setUp(ROOT, 'this checkout')]
  if (against) floors.push(await setUp(path.resolve(against), against))
  try {
    const best = floors.map(() => new Map<string, number>())
    for (let round = 1; round <= ROUNDS; round++) {
      for (let index = 0; index < floors[0].cases.length; index++) {
        const name = floors[0].cases[index].name
        // Warm both up, then alternate batches so that the machine's other load weighs on each alike.
        for (const floor of floors) await measure(floor, index, 200)
        const spent = floors.map(() => 0)
        // Each batch pair in turn order (ABBA…): what runs first or second in a pair pays differently.
        for (let done = 0, pair = 0; done < REQUESTS; done += BATCH, pair++) {
          for (const which of pair % 2 === 0 ? floors.keys() : [...floors.keys()].reverse())
            spent[which] += await measure(floors[which], index, BATCH)
        }
        const perRequest = spent.map((micros) => micros / (Math.ceil(REQUESTS / BATCH) * BATCH))
        perRequest.forEach((value, which) => best[which].set(name, Math.min(best[which].get(name) ?? Infinity, value)))
        console.log(`round ${round}: ${name.padEnd(40)} ${perRequest.map((value) => value.toFixed(1).padStart(7)).join(' ')} µs/req`)
      }
    }
    console.log(`\nbest of ${ROUNDS} rounds of ${REQUESTS} requests each (CPU of this process, µs per request, inject included):`)
    console.log(`  ${''.padEnd(40)} ${floors.map(({ label }) => label.slice(-14).padStart(14)).join(' ')}`)
    for (const name of best[0].keys())
      console.log(`  ${name.padEnd(40)} ${best.map((values) => (values.get(name) ?? NaN).toFixed(1).padStart(14)).join(' ')}`)
  } finally {
    for (const floor of floors) await floor.close()
  }
}

await main()
