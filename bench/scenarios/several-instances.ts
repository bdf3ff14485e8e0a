/**
 * Webhook delivery with several instances sharing the work, under transfer load
 * (`npm run bench -- several-instances [--instances=3] [--seconds=10] [--origin-concurrency=16]`).
 *
 * Several instances is a PostgreSQL deployment (SQLite is one process's file), so this runs on
 * PostgreSQL only: one embedded server, one database, and the service started as `npm start` runs
 * it (`bench/service.ts`), every instance with the same SECRETS_KEY and WEBHOOK_ORIGIN_CONCURRENCY.
 * 100 traders are seeded through the API; 21 of them have a webhook, 20 at origin A and one at
 * origin B, both receivers answering in 50 ms (as the webhook scenario of `npm run bench` at 50 ms).
 *
 * Two phases on the same database, each followed by its drain: first one instance alone, then
 * `--instances` (3) sharing the work. Each phase sends transfers among the 100 traders for
 * `--seconds` (10) over 32 connections in all, one load process (`bench/load.ts`) per instance
 * with its share of the connections. It prints transfers/s, deliveries/s, the backlog over time
 * (read from the database: the deliveries of this phase still pending), the drain time once the
 * load stops, and per origin the lag (event time to arrival), the most requests in flight at once
 * as the receiver saw them against the cap, duplicates (an event id received more than once:
 * allowed, at least once, but counted) and missing events (a delivery row of this phase whose
 * event never arrived by the end of the drain: must be 0).
 *
 * Everything it starts (the server, the instances, the load processes, the receivers) listens on
 * or targets 127.0.0.1 and is stopped at the end, on failure and on Ctrl-C, by process id.
 */
import { fork, type ChildProcess } from 'node:child_process'
import crypto from 'node:crypto'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import pg from 'pg'
import { openDatabase } from '../../src/db/database.ts'
import { verifyLedger } from '../../src/ledger/verify.ts'
import { benchCleanups } from '../cleanups.ts'
import type { LoadResult } from '../load.ts'
import { startPostgres } from '../postgres.ts'
import { jobFor } from '../load-jobs.ts'
import { seedThroughApi, type Seeded } from '../seed.ts'
import { startService, type Service } from '../service.ts'
import { percentile, putWebhook, readBacklog, startBenchReceiver, type BenchReceiver } from '../webhooks.ts'

const LOAD = fileURLToPath(new URL('../load.ts', import.meta.url))

function option(name: string, fallback: number, min: number, max: number): number {
  const arg = process.argv.slice(2).find((value) => value.startsWith(`--${name}=`))
  const value = arg ? Number(arg.slice(name.length + 3)) : fallback
  if (!Number.isInteger(value) || value < min || value > max)
    throw new Error(`--${name}=${arg?.slice(name.length + 3)}: a whole number from ${min} to ${max}`)
  return value
}

const INSTANCES = option('instances', 3, 2, 8)
const SECONDS = option('seconds', 10, 2, 120)
/**
 * The per-origin cap over every instance. Low enough that origin A's demand (about 0.4 events per
 * transfer) reaches it, so that exceeding it across instances would show at the receiver.
 */
const ORIGIN_CONCURRENCY = option('origin-concurrency', 16, 1, 10_000)
const CONNECTIONS = 32
const TRADERS = 100
const RECEIVER_DELAY_MS = 50
/** The drain is given up after this long (it is reported as not drained). */
const DRAIN_LIMIT_MS = 120_000

const started = Date.now()
function log(message: string): void {
  console.error(`[${((Date.now() - started) / 1000).toFixed(0).padStart(3)} s] ${message}`)
}

// ---------------------------------------------------------------------------------------------
// Everything started here, so that it is stopped however the run ends.

const cleanups = benchCleanups()
const { track, cleanUp } = cleanups

/** One load process (`bench/load.ts`) per instance, each running one job at a time. */
function startLoadProcess(): { run(job: ReturnType<typeof jobFor>): Promise<LoadResult> } {
  const child: ChildProcess = fork(LOAD, [], {
    execArgv: ['--import', 'tsx'],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  })
  if (child.pid) track(child.pid)
  let waiter: { resolve: (result: LoadResult) => void; reject: (error: Error) => void } | undefined
  child.on('message', (message: { result?: LoadResult; error?: string }) => {
    if (message.error !== undefined) waiter?.reject(new Error(message.error))
    else if (message.result) waiter?.resolve(message.result)
    waiter = undefined
  })
  child.on('exit', () => waiter?.reject(new Error('a load process exited')))
  cleanups.push(async () => {
    if (child.exitCode !== null || child.signalCode !== null) return
    const exit = new Promise((resolve) => child.once('exit', resolve))
    child.disconnect()
    const timer = setTimeout(() => child.kill('SIGKILL'), 5_000)
    await exit
    clearTimeout(timer)
  })
  return {
    run: (job) =>
      new Promise((resolve, reject) => {
        waiter = { resolve, reject }
        child.send({ id: 1, job })
      }),
  }
}

// ---------------------------------------------------------------------------------------------
// What the database says about a phase's deliveries (those with an id above `from`).

interface PendingReading {
  at: number
  /** Pending deliveries of the phase per origin, and in all. */
  byOrigin: Map<string, number>
  total: number
}

async function readPending(client: pg.Client, from: number): Promise<PendingReading> {
  const { rows } = await client.query<{ url: string; n: string }>(
    `select url, count(*) as n from webhook_deliveries where id > $1 and status = 'pending' group by url`,
    [from],
  )
  const byOrigin = new Map<string, number>()
  let total = 0
  for (const row of rows) {
    const origin = new URL(row.url).origin
    byOrigin.set(origin, (byOrigin.get(origin) ?? 0) + Number(row.n))
    total += Number(row.n)
  }
  return { at: Date.now(), byOrigin, total }
}

async function lastDeliveryId(client: pg.Client): Promise<number> {
  const { rows } = await client.query<{ id: string | null }>('select max(id) as id from webhook_deliveries')
  return Number(rows[0]?.id ?? 0)
}

/** Every delivery row of the phase: its event's public id, its origin and its status. */
async function phaseDeliveries(client: pg.Client, from: number): Promise<{ eventId: string; origin: string; status: string }[]> {
  const { rows } = await client.query<{ event_id: string; url: string; status: string }>(
    'select e.event_id, d.url, d.status from webhook_deliveries d join events e on e.id = d.event_id where d.id > $1',
    [from],
  )
  return rows.map((row) => ({ eventId: row.event_id, origin: new URL(row.url).origin, status: row.status }))
}

// ---------------------------------------------------------------------------------------------

interface OriginFigures {
  name: string
  expected: number
  received: number
  duplicates: number
  missing: number
  maxInFlight: number
  lagP50: number
  lagP99: number
}

interface PhaseResult {
  instances: number
  transfersPerSecond: number
  errors: number
  deliveriesPerSecond: number
  /** The phase's pending deliveries, sampled every 500 ms during the load. */
  backlog: PendingReading[]
  maxBacklog: number
  backlogAtStop: number
  /** Seconds from the load's stop until none of the phase's deliveries was pending; NaN when not within the limit. */
  drainSeconds: number
  /** Requests the receivers took during the drain, per second of it (NaN for a drain under a second). */
  drainRate: number
  /** Each instance's delivery rounds (database transactions of its worker) per second, load and drain. */
  roundsPerSecond: number[]
  /** Delivery rows of the phase by status once drained. */
  statuses: Record<string, number>
  origins: OriginFigures[]
}

async function runPhase(
  instances: Service[],
  loads: ReturnType<typeof startLoadProcess>[],
  seeded: Seeded,
  receivers: { name: string; receiver: BenchReceiver }[],
  client: pg.Client,
  adminKey: string,
): Promise<PhaseResult> {
  const count = instances.length
  const from = await lastDeliveryId(client)
  for (const { receiver } of receivers) {
    receiver.lags.length = 0
    receiver.events?.clear()
    receiver.maxInFlight = receiver.inFlight
  }
  const receivedBefore = receivers.reduce((sum, { receiver }) => sum + receiver.received, 0)
  const rounds = async () => Promise.all(instances.map(async (instance) => (await readBacklog(instance.url, adminKey)).rounds))
  const roundsBefore = { at: Date.now(), rounds: await rounds() }
  log(`${count} instance${count > 1 ? 's' : ''}: ${CONNECTIONS} connections of transfers for ${SECONDS} s`)

  const backlog: PendingReading[] = []
  let loading = true
  const sampling = (async () => {
    while (loading) {
      backlog.push(await readPending(client, from))
      await new Promise((resolve) => setTimeout(resolve, 500))
    }
  })()
  // The connections shared out among the instances, one load process each.
  const results = await Promise.all(
    instances.map((instance, index) => {
      const connections = Math.floor(CONNECTIONS / count) + (index < CONNECTIONS % count ? 1 : 0)
      return loads[index].run(jobFor('a', instance.url, seeded, connections, SECONDS))
    }),
  )
  loading = false
  await sampling
  const stopped = Date.now()
  const atStop = await readPending(client, from)
  const delivered = receivers.reduce((sum, { receiver }) => sum + receiver.received, 0) - receivedBefore
  const seconds = Math.max(...results.map((result) => result.seconds))
  const transfersPerSecond = results.reduce((sum, result) => sum + result.okPerSecond, 0)
  const errors = results.reduce((sum, result) => sum + result.non2xx + result.socketErrors + result.timeouts, 0)

  const receivedAtStop = receivers.reduce((sum, { receiver }) => sum + receiver.received, 0)
  let drainSeconds = NaN
  let lastLog = stopped
  while (Date.now() - stopped < DRAIN_LIMIT_MS) {
    const reading = await readPending(client, from)
    if (reading.total === 0) {
      drainSeconds = (reading.at - stopped) / 1000
      break
    }
    if (reading.at - lastLog >= 2_000) {
      log(`  drain at ${((reading.at - stopped) / 1000).toFixed(1)} s: ${reading.total} pending`)
      lastLog = reading.at
    }
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  const roundsAfter = await rounds()
  const roundsPerSecond = roundsAfter.map((value, index) => (value - roundsBefore.rounds[index]) / ((Date.now() - roundsBefore.at) / 1000))
  // Under a second, what the drain waits for is mostly the outcomes of attempts already answered: no rate.
  const drainRate =
    drainSeconds >= 1 ? (receivers.reduce((sum, { receiver }) => sum + receiver.received, 0) - receivedAtStop) / drainSeconds : NaN
  // Answers already written are on their way back; a moment for the last attempts to end.
  await new Promise((resolve) => setTimeout(resolve, 1_000))

  const rows = await phaseDeliveries(client, from)
  const statuses: Record<string, number> = {}
  for (const row of rows) statuses[row.status] = (statuses[row.status] ?? 0) + 1
  const origins = receivers.map(({ name, receiver }): OriginFigures => {
    const origin = new URL(receiver.url).origin
    const expected = rows.filter((row) => row.origin === origin)
    const events = receiver.events ?? new Map<string, number>()
    let duplicates = 0
    for (const times of events.values()) duplicates += times - 1
    return {
      name,
      expected: expected.length,
      received: [...events.values()].reduce((sum, times) => sum + times, 0),
      duplicates,
      missing: expected.filter((row) => !events.has(row.eventId)).length,
      maxInFlight: receiver.maxInFlight,
      lagP50: percentile(receiver.lags, 0.5),
      lagP99: percentile(receiver.lags, 0.99),
    }
  })
  const maxBacklog = Math.max(atStop.total, ...backlog.map((reading) => reading.total))
  const result: PhaseResult = {
    instances: count,
    transfersPerSecond,
    errors,
    deliveriesPerSecond: delivered / seconds,
    backlog,
    maxBacklog,
    backlogAtStop: atStop.total,
    drainSeconds,
    drainRate,
    roundsPerSecond,
    statuses,
    origins,
  }
  log(
    `  ${transfersPerSecond.toFixed(0)} transfers/s, ${result.deliveriesPerSecond.toFixed(0)} deliveries/s; backlog at most ${maxBacklog}, ${atStop.total} at the stop, drained in ${drainSeconds.toFixed(1)} s${Number.isFinite(drainRate) ? ` at ${drainRate.toFixed(0)} deliveries/s` : ''}`,
  )
  return result
}

function report(phases: PhaseResult[], verified: string): string {
  const fixed = (value: number, digits = 0) => (Number.isFinite(value) ? value.toFixed(digits) : '-')
  const out = [
    `Coffer bench, webhooks with several instances on PostgreSQL, on ${os.cpus().length} × ${os.cpus()[0]?.model ?? 'CPU'}, node ${process.version}`,
    `${TRADERS} traders, ${CONNECTIONS} connections of transfers for ${SECONDS} s per phase; 20 webhooks at origin A and 1 at origin B, both answering in ${RECEIVER_DELAY_MS} ms; WEBHOOK_ORIGIN_CONCURRENCY=${ORIGIN_CONCURRENCY} (at most ${Math.round((ORIGIN_CONCURRENCY * 1000) / RECEIVER_DELAY_MS)} deliveries/s to one origin)`,
    '',
    '| instances | transfers/s | errors | deliveries/s | backlog at most | at the stop | drained in | deliveries/s in the drain | rows not delivered | rounds/s per instance |',
    '|---|---|---|---|---|---|---|---|---|---|',
  ]
  for (const phase of phases) {
    const undelivered = Object.entries(phase.statuses)
      .filter(([status]) => status !== 'delivered')
      .map(([status, n]) => `${n} ${status}`)
    out.push(
      `| ${phase.instances} | ${fixed(phase.transfersPerSecond)} | ${phase.errors} | ${fixed(phase.deliveriesPerSecond)} | ${phase.maxBacklog} | ${phase.backlogAtStop} | ${Number.isFinite(phase.drainSeconds) ? `${fixed(phase.drainSeconds, 1)} s` : `not within ${DRAIN_LIMIT_MS / 1000} s`} | ${fixed(phase.drainRate)} | ${undelivered.join(', ') || '0'} | ${phase.roundsPerSecond.map((value) => fixed(value, 1)).join(', ')} |`,
    )
  }
  out.push(
    '',
    '| instances | origin | deliveries expected | received | duplicates | missing | most in flight (cap) | lag p50 | lag p99 |',
    '|---|---|---|---|---|---|---|---|---|',
  )
  for (const phase of phases) {
    for (const origin of phase.origins) {
      const over = origin.maxInFlight > ORIGIN_CONCURRENCY ? ' EXCEEDED' : ''
      out.push(
        `| ${phase.instances} | ${origin.name} | ${origin.expected} | ${origin.received} | ${origin.duplicates} | ${origin.missing} | ${origin.maxInFlight} (${ORIGIN_CONCURRENCY})${over} | ${fixed(origin.lagP50)} ms | ${fixed(origin.lagP99)} ms |`,
      )
    }
  }
  out.push('', 'Backlog (pending deliveries of the phase) every second of the load:')
  for (const phase of phases)
    out.push(
      `  ${phase.instances} instance${phase.instances > 1 ? 's' : ''}: ${phase.backlog
        .filter((_, i) => i % 2 === 1)
        .map((reading) => reading.total)
        .join(' ')}`,
    )
  const missing = phases.reduce((sum, phase) => sum + phase.origins.reduce((n, origin) => n + origin.missing, 0), 0)
  const exceeded = phases.some((phase) => phase.origins.some((origin) => origin.maxInFlight > ORIGIN_CONCURRENCY))
  // A lost event, a breached cap or a ledger that does not add up fails the run (a script running it notices).
  if (missing > 0 || exceeded || !verified.startsWith('ledger verified')) process.exitCode = 1
  out.push(
    '',
    `${verified}; ${missing === 0 ? 'no event missing' : `${missing} EVENTS MISSING`}; ${exceeded ? 'THE ORIGIN CAP WAS EXCEEDED' : 'no origin above its cap'}`,
  )
  return out.join('\n')
}

async function main(): Promise<void> {
  const dataRoot = fs.mkdtempSync(path.join(os.tmpdir(), 'coffer-bench-webhooks-instances-'))
  cleanups.push(async () => fs.rmSync(dataRoot, { recursive: true, force: true }))
  log('starting an embedded PostgreSQL')
  const server = await startPostgres()
  cleanups.push(() => server.stop())
  track(server.pid)
  const databaseUrl = await server.createDatabase('coffer')
  const client = new pg.Client({ connectionString: databaseUrl })
  await client.connect()
  client.on('error', () => {})
  cleanups.push(() => client.end())

  const receivers = [
    { name: 'A (20 wallets)', receiver: await startBenchReceiver(RECEIVER_DELAY_MS, { countEvents: true }) },
    { name: 'B (1 wallet)', receiver: await startBenchReceiver(RECEIVER_DELAY_MS, { countEvents: true }) },
  ]
  for (const { receiver } of receivers) cleanups.push(() => receiver.close())

  // What every instance of one deployment shares: the database, the secrets key, the settings.
  const adminKey = crypto.randomBytes(24).toString('base64url')
  const env = {
    WEBHOOK_ALLOW_PRIVATE: 'true',
    WEBHOOK_ORIGIN_CONCURRENCY: String(ORIGIN_CONCURRENCY),
    SECRETS_KEY: crypto.randomBytes(32).toString('base64'),
  }
  const instances: Service[] = []
  const startInstance = async () => {
    const service = await startService(
      { dataDir: path.join(dataRoot, `instance${instances.length + 1}`), databaseUrl, adminKey, env },
      track,
    )
    cleanups.push(() => service.stop())
    instances.push(service)
    log(`instance ${instances.length} up at ${service.url} (pid ${service.pid})`)
  }
  await startInstance()
  // Forked before the seeding, so that their start-up is over when the first phase begins.
  const loads = Array.from({ length: INSTANCES }, () => startLoadProcess())
  log(`seeding ${TRADERS} traders through the API`)
  const seeded = await seedThroughApi(instances[0].url, adminKey, TRADERS)
  const [a, b] = receivers.map(({ receiver }) => receiver)
  for (const [index, trader] of seeded.traders.slice(0, 21).entries()) {
    await putWebhook(instances[0].url, trader.token, index < 20 ? `${a.url}/w/${trader.walletId}` : `${b.url}/w/${trader.walletId}`)
  }

  const phases = [await runPhase(instances, loads, seeded, receivers, client, adminKey)]
  while (instances.length < INSTANCES) await startInstance()
  phases.push(await runPhase(instances, loads, seeded, receivers, client, adminKey))

  for (const instance of instances) await instance.stop()
  const database = openDatabase({ databaseUrl, dataDir: dataRoot })
  const ledger = await verifyLedger(database.db).finally(() => database.close())
  const verified = ledger.ok
    ? `ledger verified: ${ledger.transactions} transactions`
    : `LEDGER VERIFICATION FAILED: ${ledger.problems.slice(0, 5).join('; ')}`
  console.log(report(phases, verified))
}

main()
  .catch((error: unknown) => {
    console.error(error instanceof Error ? (error.stack ?? error.message) : error)
    process.exitCode = 1
  })
  .finally(() => cleanUp())
