/**
 * The HTTP load scenarios of `npm run bench` (transfers, history, keyed-wallets, history-under-writes,
 * request-ladder, connection-sweep, webhooks; see bench/README.md). Options: `--quick`, `--profile`,
 * `--storage=sqlite|postgres`, `--connections=N`, `--history=N` (keyed-wallets), `--pairs=N` (webhooks).
 *
 * For each storage it starts the service as a child process on a fresh database (SQLite in a temp
 * DATA_DIR; PostgreSQL on an embedded server started here), seeds users, wallets and assets through
 * the HTTP API, and drives load from a separate process (bench/load.ts, autocannon) for a bounded
 * time. The keyed wallets' references run on the same storage right before their transfers: a plain
 * SQLite durable loop (`references.ts`), or pgbench's tpcb-like script on the same PostgreSQL server.
 * Everything it starts is stopped at the end, on failure and on Ctrl-C.
 */
import { fork, type ChildProcess } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { openDatabase } from '../../src/db/database.ts'
import { createToken } from '../../src/http/tokens.ts'
import { verifyLedger } from '../../src/ledger/verify.ts'
import { benchCleanups } from '../cleanups.ts'
import { machineCpu, processCpuMs, processTreeCpuMs } from '../cpu.ts'
import { keyedRows, KEYED_WALLETS, USERS_PER_WALLET, runKeyedFirst, runKeyedSecond, type KeyedRun } from '../keyed-wallets.ts'
import { median, type LoadJob, type LoadResult } from '../load.ts'
import { initPgbench, PGBENCH_SCALE, startPostgres, type BenchPostgres } from '../postgres.ts'
import { formatSummary, mainThreadProfile, summariseProfile } from '../profile.ts'
import {
  answered,
  BATCH_SIZE,
  FIRST_SCENARIOS,
  KEYED_SCENARIOS,
  jobFor,
  LABELS,
  LADDER,
  type KeyedScenario,
  type ScenarioName,
  type ScenarioResult,
} from '../load-jobs.ts'
import { seedHistoryDirectly, seedHistoryThroughApi, seedThroughApi, type Seeded } from '../seed.ts'
import { startService, type Service } from '../service.ts'
import {
  percentile,
  putWebhook,
  EMPTY_READING,
  readBacklog,
  sampleBacklog,
  startBenchReceiver,
  statementCounter,
  type BacklogReading,
  type BenchReceiver,
} from '../webhooks.ts'

const LOAD = fileURLToPath(new URL('../load.ts', import.meta.url))
const argv = process.argv.slice(2)
const args = new Set(argv.filter((arg) => arg.startsWith('--')))
const quick = args.has('--quick')
// `--profile` profiles the service during the first measurement; `--profile=d100k` (a measurement's id, see LABELS) during that one.
const profileArg = [...args].find((arg) => arg === '--profile' || arg.startsWith('--profile='))
const profile = profileArg !== undefined
const storageArg = [...args].find((arg) => arg.startsWith('--storage='))?.slice('--storage='.length)
const storages = (storageArg ? [storageArg] : ['sqlite', 'postgres']) as ('sqlite' | 'postgres')[]
const connectionsArg = [...args].find((arg) => arg.startsWith('--connections='))?.slice('--connections='.length)

/** The scenarios this program runs (their names in `npm run bench -- --list`), and the measurements of each. */
const SCENARIOS: Record<string, string[]> = {
  transfers: ['e', 'a', 'b', 'c', 'batch', 'hold'],
  history: ['d100', 'd100k'],
  'keyed-wallets': [...KEYED_SCENARIOS],
  'history-under-writes': ['historymixed'],
  'request-ladder': ['ladder'],
  'connection-sweep': ['sweep'],
  webhooks: ['webhooks'],
}
const names = argv.filter((arg) => !arg.startsWith('--'))
for (const name of names)
  if (!(name in SCENARIOS)) throw new Error(`unknown scenario "${name}"; this program runs ${Object.keys(SCENARIOS).join(', ')}`)
if (names.length === 0) throw new Error(`name one or more scenarios: ${Object.keys(SCENARIOS).join(', ')}`)
const only = new Set(names.flatMap((name) => SCENARIOS[name]))
const selected = (scenario: ScenarioName | 'webhooks') => only.has(scenario)
const sweep = only.has('sweep')
// The ladder: requests that run more and more of a transfer's path (see LADDER).
const ladder = only.has('ladder')
const profiled = (profileArg?.split('=')[1] ?? [...only].find((name) => name in LABELS) ?? 'a') as ScenarioName
/** The webhook scenario runs on a store of its own. */
const webhooksAsked = only.has('webhooks')

// `--history=N`: transactions in each keyed wallet's long history: 100,000 by default
// (5 million in all, written in several minutes), 10,000 with --quick.
const historyArg = [...args].find((arg) => arg.startsWith('--history='))?.slice('--history='.length)
const keyedHistory = historyArg ? Number(historyArg) : quick ? 10_000 : 100_000
if (!Number.isInteger(keyedHistory) || keyedHistory < 2)
  throw new Error(`--history=${historyArg}: a whole number of transactions, 2 or more`)

const settings = quick
  ? { traders: 100, warmup: 1, seconds: 2, shortHistory: 100, longHistory: 100_000, keyedHistory }
  : { traders: 1000, warmup: 2, seconds: 10, shortHistory: 100, longHistory: 100_000, keyedHistory }
const CONNECTIONS = connectionsArg ? Number(connectionsArg) : 32
const started = Date.now()

// ---------------------------------------------------------------------------------------------
// Everything started here, so that it is stopped however the run ends.

const cleanups = benchCleanups()
const { track, cleanUp } = cleanups

function log(message: string): void {
  const seconds = ((Date.now() - started) / 1000).toFixed(0).padStart(3)
  console.error(`[${seconds} s] ${message}`)
}

// ---------------------------------------------------------------------------------------------
// The load process.

let loadChild: ChildProcess | undefined
let nextJob = 1
const pending = new Map<number, { resolve: (result: LoadResult) => void; reject: (error: Error) => void }>()

function loadProcess(): ChildProcess {
  if (loadChild) return loadChild
  const child = fork(LOAD, [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
  if (child.pid) track(child.pid)
  child.on('message', (message: { id: number; result?: LoadResult; error?: string }) => {
    const waiter = pending.get(message.id)
    pending.delete(message.id)
    if (message.error !== undefined) waiter?.reject(new Error(message.error))
    // IPC sends NaN (a percentile of no answers) as null.
    else if (message.result) waiter?.resolve({ ...message.result, p50: message.result.p50 ?? NaN, p99: message.result.p99 ?? NaN })
  })
  child.on('exit', () => {
    loadChild = undefined
    for (const waiter of pending.values()) waiter.reject(new Error('the load process exited'))
    pending.clear()
  })
  cleanups.push(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      const exit = new Promise((resolve) => child.once('exit', resolve))
      child.disconnect()
      await exit
    }
  })
  loadChild = child
  return child
}

function load(job: LoadJob): Promise<LoadResult> {
  const id = nextJob++
  return new Promise((resolve, reject) => {
    pending.set(id, { resolve, reject })
    loadProcess().send({ id, job })
  })
}

// ---------------------------------------------------------------------------------------------
// Scenarios.

interface Processes {
  service: number
  database?: number
}

/** Scenarios already warmed up on the current service (autocannon rounds durations up to whole seconds). */
const warmed = new Set<string>()

/** A scenario's label, with the numbers of this run. */
function labelOf(scenario: ScenarioName, wallets = settings.traders): string {
  return LABELS[scenario]
    .replace('N', String(wallets))
    .replace('{wallets}', String(KEYED_WALLETS))
    .replace('{history}', settings.keyedHistory.toLocaleString('en'))
}

async function runScenario(
  scenario: ScenarioName,
  url: string,
  seeded: Seeded,
  pids: Processes,
  connections = CONNECTIONS,
  wallets?: number,
): Promise<ScenarioResult> {
  const job = jobFor(scenario, url, seeded, connections, settings.warmup, wallets)
  // --quick warms each scenario up once; the full run before every measurement, to reach its steady state.
  const warm = `${url} ${scenario}`
  if (!quick || !warmed.has(warm)) await load(job)
  warmed.add(warm)
  const loadPid = loadProcess().pid ?? 0
  const cpu = () => ({
    service: processCpuMs(pids.service),
    database: pids.database ? processTreeCpuMs(pids.database) : 0,
    load: processCpuMs(loadPid),
    machine: machineCpu(),
  })
  const before = cpu()
  const result = await load(jobFor(scenario, url, seeded, connections, settings.seconds, wallets))
  const after = cpu()
  const ok = Math.max(1, answered(scenario, result))
  // Processes that exit during the run (PostgreSQL backends) take their CPU time with them.
  const perRequest = (key: 'service' | 'database' | 'load') => Math.max(0, ((after[key] - before[key]) * 1000) / ok)
  const machineMs = ((after.machine.busy - before.machine.busy) * 1000) / 100
  const ourMs = after.service - before.service + after.database - before.database + after.load - before.load
  const label = wallets ? `${labelOf(scenario, wallets)}, ${connections} conn` : labelOf(scenario, seeded.traders.length)
  return {
    scenario,
    label,
    ...result,
    serviceCpuUs: perRequest('service'),
    databaseCpuUs: perRequest('database'),
    loadCpuUs: perRequest('load'),
    otherCores: Math.min(os.cpus().length, Math.max(0, machineMs - ourMs) / (result.seconds * 1000)),
  }
}

// ---------------------------------------------------------------------------------------------
// One storage.

interface StorageRun {
  storage: 'sqlite' | 'postgres'
  results: ScenarioResult[]
  sweeps: ScenarioResult[]
  ladder: ScenarioResult[]
  keyed?: KeyedRun
  verified: string
  profileText?: string
}

function tempDir(prefix: string): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix))
  cleanups.push(async () => fs.rmSync(dir, { recursive: true, force: true }))
  return dir
}

/** A fresh store for one storage's run: a temp DATA_DIR, and on PostgreSQL an embedded server with a `coffer` database. */
async function openStore(
  storage: 'sqlite' | 'postgres',
  prefix: string,
): Promise<{ dataDir: string; server?: BenchPostgres; databaseUrl?: string }> {
  const dataDir = tempDir(`${prefix}-${storage}-`)
  if (storage === 'sqlite') return { dataDir }
  log('postgres: starting an embedded server')
  const server = await startPostgres()
  cleanups.push(() => server.stop())
  return { dataDir, server, databaseUrl: await server.createDatabase('coffer') }
}

/** `coffer verify` on the store once the service has stopped: the ledger must still add up after all that load. */
async function verifyStore(databaseUrl: string | undefined, dataDir: string): Promise<string> {
  const database = openDatabase({ databaseUrl, dataDir })
  const report = await verifyLedger(database.db).finally(() => database.close())
  return report.ok
    ? `ledger verified: ${report.transactions} transactions, ${report.holdings} holdings`
    : `LEDGER VERIFICATION FAILED: ${report.problems.slice(0, 5).join('; ')}`
}

async function runStorage(storage: 'sqlite' | 'postgres', adminKey: string, profileDir: string | undefined): Promise<StorageRun> {
  const { dataDir, server, databaseUrl } = await openStore(storage, 'coffer-bench')
  if (server && selected('transfers')) {
    // pgbench's tables are made first, so that its reference run can come right before the keyed
    // transfers: the ratio then compares the two on the same moment of the machine.
    log(`postgres: pgbench -i -s ${PGBENCH_SCALE}`)
    await server.createDatabase('pgbench')
    await initPgbench(server, 'pgbench', PGBENCH_SCALE, track)
  }
  const serviceOptions = { dataDir, databaseUrl, adminKey }
  let service: Service = await startService(serviceOptions, track)
  let stopService = service.stop
  cleanups.push(() => stopService())
  // The keyed wallets alone need only their own owners (each registration and login costs a hash).
  const traders = sweep || ladder || FIRST_SCENARIOS.some((scenario) => selected(scenario)) ? settings.traders : KEYED_WALLETS
  log(
    `${storage}: service up at ${service.url}; seeding ${traders} users through the API (one Argon2id hash per registration and per login)`,
  )
  const seeded = await seedThroughApi(service.url, adminKey, traders, (done) => log(`${storage}:   ${done} users`))
  if (selected('d100') || selected('d100k')) {
    await seedHistoryThroughApi(service.url, seeded.shortHistory, seeded.historyPartner, 'gold', settings.shortHistory)
    await seedHistoryDirectly(
      databaseUrl ? { databaseUrl } : { dataDir },
      [seeded.longHistory.walletId, seeded.historyPartner.walletId],
      [seeded.asset.id],
      settings.longHistory,
    )
    log(`${storage}: seeded; history of ${settings.shortHistory} and ${settings.longHistory} transactions written`)
  }

  let profileSkipMs = 0
  /** Measures one scenario; `--profile=<it>` restarts the service with --cpu-prof around it, so that the profile covers it alone. */
  const measure = async (scenario: ScenarioName): Promise<ScenarioResult> => {
    const profiling = profile && profileDir !== undefined && scenario === profiled
    if (profiling) {
      await service.stop()
      const spawned = Date.now()
      service = await startService({ ...serviceOptions, profileDir: path.join(profileDir, storage) }, track)
      stopService = service.stop
      // The summary leaves out start-up and the warm-up run.
      profileSkipMs = Date.now() - spawned + settings.warmup * 1000
    }
    const result = await runScenario(scenario, service.url, seeded, { service: service.pid, database: server?.pid })
    log(
      `${storage}: ${result.label}: ${result.okPerSecond.toFixed(0)}/s, p50 ${result.p50.toFixed(2)} ms, p99 ${result.p99.toFixed(2)} ms, errors ${result.non2xx + result.socketErrors}, service ${result.serviceCpuUs.toFixed(0)} µs/req`,
    )
    if (profiling) {
      await service.stop()
      service = await startService(serviceOptions, track)
      stopService = service.stop
    }
    return result
  }

  const keyedContext = {
    storage,
    get url() {
      return service.url
    },
    adminKey,
    seeded,
    dataDir,
    databaseUrl,
    server,
    selected: (scenario: KeyedScenario) => selected(scenario),
    connections: CONNECTIONS,
    referenceSeconds: settings.seconds,
    longHistory: settings.keyedHistory,
    measure,
    log,
    track,
  }
  // The keyed wallets' short-history part first: (a)-(h) write among the same wallets.
  // history-under-writes: history pages read while transfers commit, among the keyed wallets,
  // seeded by that first part.
  const mixed = only.has('historymixed')
  const keyed = KEYED_SCENARIOS.some((scenario) => selected(scenario)) || mixed ? await runKeyedFirst(keyedContext) : undefined
  const results: ScenarioResult[] = []
  if (mixed) results.push(await measure('historymixed'))
  for (const scenario of FIRST_SCENARIOS.filter((name) => selected(name))) results.push(await measure(scenario))
  if (keyed) await runKeyedSecond(keyedContext, keyed)

  const sweeps: ScenarioResult[] = []
  if (sweep) {
    const pids = { service: service.pid, database: server?.pid }
    for (const connections of [1, 8, 32, 128])
      sweeps.push(await runScenario('a', service.url, seeded, pids, connections, seeded.traders.length))
    for (const wallets of [10, 100]) sweeps.push(await runScenario('a', service.url, seeded, pids, CONNECTIONS, wallets))
    for (const connections of [1, 8, 32, 128])
      sweeps.push({ ...(await runScenario('e', service.url, seeded, pids, connections)), label: `(e) GET /healthz, ${connections} conn` })
    for (const result of sweeps)
      log(
        `${storage}: ${result.label}: ${result.okPerSecond.toFixed(0)}/s, p50 ${result.p50.toFixed(2)} ms, p99 ${result.p99.toFixed(2)} ms`,
      )
  }

  const steps: ScenarioResult[] = []
  if (ladder) {
    const pids = { service: service.pid, database: server?.pid }
    for (const scenario of LADDER) steps.push(await runScenario(scenario, service.url, seeded, pids))
    for (const result of steps) log(`${storage}: ${result.label}: service ${result.serviceCpuUs.toFixed(0)} µs/req`)
  }

  await service.stop()
  stopService = async () => {}

  const verified = await verifyStore(databaseUrl, dataDir)
  log(`${storage}: ${verified}`)

  let profileText: string | undefined
  if (profile && profileDir) {
    const file = mainThreadProfile(path.join(profileDir, storage))
    if (file) profileText = `${file}\n${formatSummary(summariseProfile(file, 20, profileSkipMs))}`
  }

  if (server) {
    await server.stop()
  }
  return { storage, results, sweeps, ladder: steps, keyed, verified, profileText }
}

// ---------------------------------------------------------------------------------------------
// The webhook scenario: delivery at scale.

/** One phase of transfers in the webhook scenario, with what it cost per transfer. */
interface WebhookPhase {
  label: string
  tps: number
  /** CPU per transfer, µs: the service's, and the database server's (PostgreSQL). */
  serviceUs: number
  databaseUs: number
}

interface WebhookRun {
  storage: 'sqlite' | 'postgres'
  /**
   * The phases without webhooks and with the slow and fast origins, in the order they ran: without,
   * with, without, with, … without (`--pairs=N` pairs, 3 by default), so each phase with webhooks
   * is compared with the phases right before and after it, which the machine's drift moves alike.
   */
  alternating: WebhookPhase[]
  /** Per phase with webhooks: its transfers/s ÷ the mean of the phases without on either side. */
  ratios: number[]
  /** Both origins at 50 ms. */
  at50: WebhookPhase
  /** The fast origin's lag (event time → arrival), ms, while the slow origin is backed up, over every phase with webhooks. */
  fastLagP50: number
  fastLagP99: number
  fastEvents: number
  /** The slow origin's backlog when the load of the last phase with webhooks stopped, and the age of the oldest delivery then (s). */
  slowBacklog: number
  slowOldestSeconds: number
  /** Requests received by the receivers per second of load: over the phases with the slow and fast origins, and at 50 ms. */
  deliveriesSlowFast: number
  deliveries50: number
  /** Both at 50 ms: the largest backlog seen during the load, the backlog when it stopped, how long it took to drain (s). */
  maxBacklog50: number
  endBacklog50: number
  drainSeconds50: number
  /** Deliveries received after the load stopped, per second of the drain. */
  drainRate50: number
  lag50P99: number
  verified: string
}

const pairsArg = [...args].find((arg) => arg.startsWith('--pairs='))
/** Phases with the slow and fast origins, each between two without webhooks. */
const WEBHOOK_PAIRS = pairsArg ? Math.max(1, Number(pairsArg.split('=')[1])) : 3

/**
 * 100 traders sending transfers among themselves (32 connections, as scenario (a)), alternately
 * without webhooks and with 20 traders' webhooks at one origin answering in 2 s and one trader's at
 * another answering in 10 ms (removing the webhooks between, which cancels the backlog); then with
 * the webhooks set again, both origins answering in 50 ms, followed by the time the backlog takes
 * to drain once the load stops.
 */
async function runWebhookStorage(storage: 'sqlite' | 'postgres', adminKey: string, profileDir: string | undefined): Promise<WebhookRun> {
  const { dataDir, server, databaseUrl } = await openStore(storage, 'coffer-bench-webhooks')
  const service = await startService(
    { dataDir, databaseUrl, adminKey, env: { WEBHOOK_ALLOW_PRIVATE: 'true' }, profileDir: profileDir && path.join(profileDir, storage) },
    track,
  )
  let stopService = service.stop
  cleanups.push(() => stopService())
  const traders = 100
  log(`${storage}: webhooks: seeding ${traders} traders`)
  const seeded = await seedThroughApi(service.url, adminKey, traders)
  const pids = { service: service.pid, database: server?.pid }
  // On a PostgreSQL started with pg_stat_statements preloaded: the statements each phase cost.
  const statements = databaseUrl ? await statementCounter(databaseUrl) : undefined
  if (statements) cleanups.push(async () => statements.close().catch(() => {}))
  const receivers: BenchReceiver[] = []
  const transfers = async (label: string): Promise<WebhookPhase & { seconds: number }> => {
    await statements?.reset()
    const receivedBefore = receivers.reduce((sum, receiver) => sum + receiver.received, 0)
    const roundsBefore = { rounds: (await readBacklog(service.url, adminKey)).rounds, at: Date.now() }
    const result = await runScenario('a', service.url, seeded, pids)
    const delivered = receivers.reduce((sum, receiver) => sum + receiver.received, 0) - receivedBefore
    // The worker's rounds (transactions) per second over the phase, its warm-up included.
    const rounds = ((await readBacklog(service.url, adminKey)).rounds - roundsBefore.rounds) / ((Date.now() - roundsBefore.at) / 1000)
    const counted = await statements?.read()
    const cpu = `service ${result.serviceCpuUs.toFixed(0)} µs, database ${result.databaseCpuUs.toFixed(0)} µs per transfer`
    // Statements and deliveries are counted over the warm-up and the measured seconds alike.
    const counts = counted
      ? `; ${counted.calls} statements, the delivery worker's ${counted.webhookCalls}${delivered > 0 ? ` (${(counted.webhookCalls / delivered).toFixed(2)} per delivery)` : ''}, BEGIN and COMMIT not counted; ${counted.deliveryUpdates.all} updates of deliveries, ${counted.deliveryUpdates.heapOnly} heap-only`
      : ''
    log(
      `${storage}: webhooks: ${label}: ${result.okPerSecond.toFixed(0)} transfers/s, errors ${result.non2xx + result.socketErrors + result.timeouts}; ${cpu}; ${delivered} delivered, ${rounds.toFixed(1)} rounds/s${counts}`,
    )
    if (counted)
      for (const row of counted.top) log(`  ${String(row.calls).padStart(7)} calls ${row.ms.toFixed(0).padStart(6)} ms  ${row.query}`)
    return { label, tps: result.okPerSecond, serviceUs: result.serviceCpuUs, databaseUs: result.databaseCpuUs, seconds: result.seconds }
  }

  const slow = await startBenchReceiver(2_000)
  const fast = await startBenchReceiver(10)
  receivers.push(slow, fast)
  cleanups.push(() => slow.close())
  cleanups.push(() => fast.close())
  const hooked = seeded.traders.slice(0, 21)
  const setHooks = async () => {
    for (const [index, trader] of hooked.entries())
      await putWebhook(service.url, trader.token, index < 20 ? `${slow.url}/w/${trader.walletId}` : `${fast.url}/w/${trader.walletId}`)
  }
  // Removing the webhooks cancels what is pending for them; a moment for the attempts on the wire to end.
  const removeHooks = async () => {
    for (const trader of hooked) await putWebhook(service.url, trader.token, null)
    await new Promise((resolve) => setTimeout(resolve, 2_500))
  }

  const alternating: WebhookPhase[] = [await transfers('no webhooks')]
  const fastLags: number[] = []
  let atStop: BacklogReading = EMPTY_READING
  let deliveredSlowFast = 0
  let secondsSlowFast = 0
  for (let pair = 1; pair <= WEBHOOK_PAIRS; pair++) {
    slow.lags.length = 0
    fast.lags.length = 0
    await setHooks()
    const receivedBefore = slow.received + fast.received
    const slowFast = await transfers(`${pair}: 20 webhooks at an origin answering in 2 s, 1 at one answering in 10 ms`)
    atStop = await readBacklog(service.url, adminKey)
    deliveredSlowFast += slow.received + fast.received - receivedBefore
    secondsSlowFast += slowFast.seconds
    // Events of the last moments of the load are still on their way: a second for them to land.
    await new Promise((resolve) => setTimeout(resolve, 1_000))
    fastLags.push(...fast.lags)
    log(
      `${storage}: webhooks: ${pair}: fast origin lag p50 ${percentile(fast.lags, 0.5).toFixed(0)} ms, p99 ${percentile(fast.lags, 0.99).toFixed(0)} ms over ${fast.lags.length} events; slow origin backlog ${atStop.largestOrigin}`,
    )
    await removeHooks()
    alternating.push(slowFast, await transfers(`${pair}: no webhooks`))
  }
  const ratios: number[] = []
  for (let i = 1; i < alternating.length; i += 2) ratios.push(alternating[i].tps / ((alternating[i - 1].tps + alternating[i + 1].tps) / 2))

  // Then both origins answer in 50 ms.
  slow.delayMs = 50
  fast.delayMs = 50
  slow.lags.length = 0
  fast.lags.length = 0
  await setHooks()
  const received50 = slow.received + fast.received
  const sampling = sampleBacklog(service.url, adminKey, 500)
  const both50 = await transfers('21 webhooks, both origins answering in 50 ms')
  const during = await sampling.stop()
  const deliveries50 = (slow.received + fast.received - received50) / both50.seconds
  const atEnd = await readBacklog(service.url, adminKey)
  const endBacklog50 = atEnd.total
  const stopped = Date.now()
  const receivedAtStop = slow.received + fast.received
  let drainSeconds50 = NaN
  // What the drain waits for, second by second: the backlog, deliveries and the worker's rounds,
  // the origins still waited on, the lowest origin limit and the attempts in flight (this instance's, from /metrics).
  let previous = { at: stopped, rounds: atEnd.rounds, received: receivedAtStop }
  while (Date.now() - stopped < 60_000) {
    const reading = await readBacklog(service.url, adminKey)
    const now = Date.now()
    const received = slow.received + fast.received
    if (reading.total === 0 || now - previous.at >= 1_000) {
      const seconds = (now - previous.at) / 1000
      const origins = `${reading.origins} origins waited on (largest ${reading.largestOrigin}), lowest limit ${reading.lowestLimit ?? '-'}, ${reading.inFlight} in flight`
      log(
        `${storage}: webhooks: drain at ${((now - stopped) / 1000).toFixed(1)} s: backlog ${reading.total}; ${((received - previous.received) / seconds).toFixed(0)} deliveries/s, ${((reading.rounds - previous.rounds) / seconds).toFixed(1)} rounds/s; ${origins}`,
      )
      previous = { at: now, rounds: reading.rounds, received }
    }
    if (reading.total === 0) {
      drainSeconds50 = (now - stopped) / 1000
      break
    }
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  // The stragglers' rate: what arrived after the load stopped, per second of the drain.
  const drainRate50 =
    Number.isFinite(drainSeconds50) && drainSeconds50 > 0 ? (slow.received + fast.received - receivedAtStop) / drainSeconds50 : NaN
  const maxBacklog50 = Math.max(0, ...during.map((reading) => reading.total).filter(Number.isFinite))
  await statements?.close()
  const lag50P99 = percentile([...slow.lags, ...fast.lags], 0.99)
  log(
    `${storage}: webhooks: at 50 ms: backlog at most ${maxBacklog50}, ${endBacklog50} when the load stopped, drained in ${drainSeconds50.toFixed(1)} s at ${drainRate50.toFixed(0)} deliveries/s; lag p99 ${lag50P99.toFixed(0)} ms`,
  )

  await service.stop()
  stopService = async () => {}
  const verified = await verifyStore(databaseUrl, dataDir)
  if (server) await server.stop()
  if (profileDir) {
    // `--profile`: where the service's time went over the whole scenario (seeding included).
    const file = mainThreadProfile(path.join(profileDir, storage))
    if (file) log(`${storage}: webhooks: CPU profile ${file}\n${formatSummary(summariseProfile(file, 25, 0))}`)
  }
  return {
    storage,
    alternating,
    ratios,
    at50: both50,
    fastLagP50: percentile(fastLags, 0.5),
    fastLagP99: percentile(fastLags, 0.99),
    fastEvents: fastLags.length,
    // The slow origin's backlog is the largest: the fast one keeps up.
    slowBacklog: atStop.largestOrigin,
    slowOldestSeconds: atStop.oldestSeconds,
    deliveriesSlowFast: deliveredSlowFast / Math.max(1, secondsSlowFast),
    deliveries50,
    maxBacklog50,
    endBacklog50,
    drainSeconds50,
    drainRate50,
    lag50P99,
    verified,
  }
}

function webhookReport(runs: WebhookRun[]): string {
  const out = [
    `Coffer bench, webhook scenario ${quick ? '(quick) ' : ''}on ${os.cpus().length} × ${os.cpus()[0]?.model ?? 'CPU'}, node ${process.version}, ${CONNECTIONS} connections, 100 traders`,
  ]
  const targets: string[][] = [['target', 'value', 'wanted', '']]
  const us = (value: number) => (Number.isFinite(value) ? value.toFixed(0) : '-')
  const signed = (value: number) => `${value >= 0 ? '+' : ''}${value.toFixed(0)}`
  for (const run of runs) {
    const rows = [['phase', 'transfers/s', 'service µs', 'database µs', 'with ÷ without', 'service µs added', 'database µs added']]
    run.alternating.forEach((phase, i) => {
      if (i % 2 === 0) return rows.push([phase.label, phase.tps.toFixed(0), us(phase.serviceUs), us(phase.databaseUs), '', '', ''])
      const [before, after] = [run.alternating[i - 1], run.alternating[i + 1]]
      const added = (key: 'serviceUs' | 'databaseUs') => phase[key] - (before[key] + after[key]) / 2
      rows.push([
        phase.label,
        phase.tps.toFixed(0),
        us(phase.serviceUs),
        us(phase.databaseUs),
        run.ratios[(i - 1) / 2].toFixed(2),
        signed(added('serviceUs')),
        run.storage === 'postgres' ? signed(added('databaseUs')) : '-',
      ])
    })
    rows.push([run.at50.label, run.at50.tps.toFixed(0), us(run.at50.serviceUs), us(run.at50.databaseUs), '', '', ''])
    out.push(
      '',
      `== ${run.storage} (${settings.seconds} s of load per phase; CPU per transfer) ==`,
      table(rows),
      '',
      `with the 2 s and 10 ms origins: ${run.deliveriesSlowFast.toFixed(0)} deliveries/s; fast lag p50 ${run.fastLagP50.toFixed(0)} ms, p99 ${run.fastLagP99.toFixed(0)} ms (${run.fastEvents} events); slow backlog ${run.slowBacklog}, oldest ${run.slowOldestSeconds.toFixed(1)} s (the last phase)`,
      `both at 50 ms: ${run.deliveries50.toFixed(0)} deliveries/s; backlog at most ${run.maxBacklog50}, ${run.endBacklog50} at the end, drained in ${run.drainSeconds50.toFixed(1)} s at ${run.drainRate50.toFixed(0)} deliveries/s; lag p99 ${run.lag50P99.toFixed(0)} ms`,
      run.verified,
    )
    // The median of the pairs' ratios: one phase disturbed by another load moves it little.
    const ratio = median(run.ratios)
    targets.push([
      `${run.storage}: fast origin p99 lag, ms (slow one backed up)`,
      run.fastLagP99.toFixed(0),
      '< 1000',
      run.fastLagP99 < 1000 ? 'met' : 'MISSED',
    ])
    targets.push([
      `${run.storage}: both at 50 ms: backlog drains after the load`,
      Number.isFinite(run.drainSeconds50) ? `${run.drainSeconds50.toFixed(1)} s` : 'no',
      'drains',
      Number.isFinite(run.drainSeconds50) ? 'met' : 'MISSED',
    ])
    targets.push([
      `${run.storage}: transfers/s with webhooks ÷ without (median of ${run.ratios.length}: ${run.ratios.map((value) => value.toFixed(2)).join(', ')})`,
      ratio.toFixed(2),
      '≥ 0.90',
      ratio >= 0.9 ? 'met' : 'MISSED',
    ])
  }
  out.push('', '== targets ==', table(targets), '', `total ${((Date.now() - started) / 1000).toFixed(0)} s`)
  return out.join('\n')
}

// ---------------------------------------------------------------------------------------------
// Report.

function table(rows: string[][]): string {
  const widths = rows[0].map((_, column) => Math.max(...rows.map((row) => row[column].length)))
  return rows
    .map((row) => row.map((cell, column) => (column === 0 ? cell.padEnd(widths[column]) : cell.padStart(widths[column]))).join('  '))
    .join('\n')
}

function resultRows(results: ScenarioResult[], database: boolean): string[][] {
  const us = (value: number) => (Number.isFinite(value) ? value.toFixed(0) : '-')
  return [
    [
      'scenario',
      'req/s',
      'p50 ms',
      'p99 ms',
      'errors',
      'service µs/req',
      ...(database ? ['postgres µs/req'] : []),
      'load µs/req',
      'other cores',
    ],
    ...results.map((result) => [
      result.label,
      result.okPerSecond.toFixed(0),
      result.p50.toFixed(2),
      result.p99.toFixed(2),
      String(result.non2xx + result.socketErrors + result.timeouts),
      us(result.serviceCpuUs),
      ...(database ? [us(result.databaseCpuUs)] : []),
      us(result.loadCpuUs),
      Number.isFinite(result.otherCores) ? result.otherCores.toFixed(2) : '-',
    ]),
  ]
}

/** The ladder's rows: every answer counts (each scenario has its expected status), not only 2xx. */
function ladderRows(results: ScenarioResult[], database: boolean): string[][] {
  const us = (value: number) => (Number.isFinite(value) ? value.toFixed(0) : '-')
  return [
    ['request', 'answers/s', 'as expected', 'p50 ms', 'service µs/req', ...(database ? ['postgres µs/req'] : []), 'load µs/req'],
    ...results.map((result) => [
      result.label,
      (result.requests / result.seconds).toFixed(0),
      `${((100 * answered(result.scenario, result)) / Math.max(1, result.requests)).toFixed(0)} %`,
      result.p50.toFixed(2),
      us(result.serviceCpuUs),
      ...(database ? [us(result.databaseCpuUs)] : []),
      us(result.loadCpuUs),
    ]),
  ]
}

function ratio(name: string, value: number, target: string, ok: boolean): string[] {
  return [name, value.toFixed(2), target, ok ? 'met' : 'MISSED']
}

function report(runs: StorageRun[]): string {
  const out: string[] = []
  out.push(
    `Coffer bench ${quick ? '(quick) ' : ''}on ${os.cpus().length} × ${os.cpus()[0]?.model ?? 'CPU'}, node ${process.version}, ${CONNECTIONS} connections, ${settings.seconds} s per scenario`,
  )
  const ratios: string[][] = [['ratio', 'value', 'target', '']]
  const keyedTables: string[] = []
  for (const run of runs) {
    const measured = [...KEYED_SCENARIOS.flatMap((scenario) => run.keyed?.results[scenario] ?? []), ...run.results]
    out.push('', `== ${run.storage} ==`, table(resultRows(measured, run.storage === 'postgres')))
    for (const [when, reference] of [
      ['before', run.keyed?.reference],
      ['after', run.keyed?.referenceAfter],
    ] as const) {
      if (reference)
        out.push(`durable loop ${when} the keyed transfers: ${reference.name} ${reference.perSecond.toFixed(0)}/s (${reference.detail})`)
    }
    if (run.sweeps.length > 0)
      out.push('', `-- ${run.storage}: how cost grows --`, table(resultRows(run.sweeps, run.storage === 'postgres')))
    if (run.ladder.length > 0)
      out.push(
        '',
        `-- ${run.storage}: what a request costs, by how much of a transfer it runs --`,
        table(ladderRows(run.ladder, run.storage === 'postgres')),
      )
    const batches = run.results.find((result) => result.scenario === 'batch')
    if (batches)
      out.push(
        `(f) transfers/s carried by batches of ${BATCH_SIZE}: ${(batches.okPerSecond * BATCH_SIZE).toFixed(0)} (${batches.okPerSecond.toFixed(1)} batches/s)`,
      )
    out.push(run.verified)
    if (run.keyed) keyedTables.push('', table(keyedRows(run.storage, run.keyed)))
    const errors = measured.reduce((sum, result) => sum + result.non2xx + result.socketErrors + result.timeouts, 0)
    if (errors > 0) ratios.push([`${run.storage}: errors in all scenarios`, String(errors), '0', 'MISSED'])
    // Each target compares the measurements it needs, when they ran.
    const get = (name: ScenarioName) => run.results.find((result) => result.scenario === name)
    const a = get('a')
    if (a) {
      ratios.push([`${run.storage}: (a) p99 latency, ms`, a.p99.toFixed(2), '< 25', a.p99 < 25 ? 'met' : 'MISSED'])
      for (const hot of ['b', 'c'] as const) {
        const value = (get(hot)?.okPerSecond ?? NaN) / a.okPerSecond
        ratios.push(ratio(`${run.storage}: ${hot === 'b' ? '(b) hot receiver' : '(c) hot sender'} ÷ (a)`, value, '≥ 0.50', value >= 0.5))
      }
    }
    const [short, long] = [get('d100'), get('d100k')]
    if (short && long) {
      const listing = long.p50 / short.p50
      ratios.push(ratio(`${run.storage}: (d) p50 at 100k ÷ p50 at 100`, listing, '≤ 2.00', listing <= 2))
    }
  }
  if (keyedTables.length > 0)
    out.push(
      '',
      `== keyed wallets: ${KEYED_WALLETS} wallets of ${USERS_PER_WALLET} users, by key, side by side with the storage's plain durable loop ==`,
      ...keyedTables,
    )
  if (ratios.length > 1) out.push('', '== targets ==', table(ratios))
  for (const run of runs)
    if (run.profileText) out.push('', `== ${run.storage}: CPU profile of the service during ${labelOf(profiled)} ==`, run.profileText)
  out.push('', `total ${((Date.now() - started) / 1000).toFixed(0)} s`)
  return out.join('\n')
}

// ---------------------------------------------------------------------------------------------

async function main(): Promise<void> {
  const adminKey = createToken('admin')
  const profileDir = profile ? fs.mkdtempSync(path.join(os.tmpdir(), 'coffer-bench-profiles-')) : undefined
  if (profileDir) log(`CPU profiles go to ${profileDir}`)
  if ([...only].some((name) => name !== 'webhooks')) {
    const runs: StorageRun[] = []
    for (const storage of storages) runs.push(await runStorage(storage, adminKey, profileDir))
    console.log(report(runs))
  }
  if (webhooksAsked) {
    const webhookRuns: WebhookRun[] = []
    for (const storage of storages) webhookRuns.push(await runWebhookStorage(storage, adminKey, profileDir))
    console.log(webhookReport(webhookRuns))
  }
}

let failed = false
try {
  await main()
} catch (error) {
  failed = true
  if (!cleanups.interrupted) console.error('bench failed:', error instanceof Error ? (error.stack ?? error.message) : error)
} finally {
  await cleanUp()
}
process.exit(cleanups.interrupted ? 130 : failed ? 1 : 0)
