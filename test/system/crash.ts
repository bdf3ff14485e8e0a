/**
 * Crash safety (`npm run test:crash`): for SQLite and for PostgreSQL, runs the real service as a
 * child process, drives a bounded load of transfers (each with its own Idempotency-Key) and of
 * holds (created and captured with Idempotency-Keys, or voided), kills
 * the service with SIGKILL several times mid-load, restarts it, retries every request that got no
 * answer with the same key, and then checks that
 *   - every acknowledged transfer exists exactly once, with the id it was acknowledged with,
 *   - no transfer exists twice (every memo carries a unique request number),
 *   - every transaction has its events in the outbox (one per non-mint side),
 *   - each user's holding equals what the acknowledged transfers and captures say,
 *   - every acknowledged hold exists once, every acknowledged capture exists once (the hold
 *     captured, naming it), every acknowledged void left its hold voided with no capture, no hold
 *     is both captured and voided, and nothing is held at the end,
 *   - every schedule (one-offs, and recurring ones whose first run falls due) falling due while
 *     the service is killed again and again ran exactly once, as one transaction naming it,
 *   - a reader following the journal's feed (`GET /admin/journal`) through the crashes saw every
 *     stored transaction exactly once, at positions 1, 2, 3, … in turn,
 *   - `coffer verify` passes (the hash chain and checkpoints too).
 * Usage: npm run test:crash -- [sqlite|postgres]…   (default: both). Exit 1 on any failure.
 */
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { openDatabase, type Database } from '../../src/db/database.ts'
import { createDatabase, freePort, startPostgres, type TestPostgres } from '../../scripts/lib/postgres.ts'
import {
  call,
  checkExactlyOnce,
  checkHoldings,
  runCoffer,
  seedUsers,
  Service,
  sleep,
  transferFor,
  JournalFollower,
  type Answer,
  type SeededUser,
  type Sent,
} from './harness.ts'
import { transactionEvents } from '../helpers/events.ts'

const ADMIN_KEY = 'cfa_crash_test_admin_key_not_secret'
const USERS = 6
const REQUESTS = Number(process.env.CRASH_REQUESTS ?? 600)
const CONCURRENCY = 12
/** Holds created, then captured (in part) or voided, beside the transfers. */
const HOLDS = Number(process.env.CRASH_HOLDS ?? 90)
const HOLD_WORKERS = 4
const CRASHES = Number(process.env.CRASH_COUNT ?? 6)
const INITIAL = 1_000_000
const TIME_LIMIT_MS = Number(process.env.CRASH_TIME_LIMIT_MS ?? 150_000)
/** Schedules created after the transfers, falling due over SCHEDULE_SPAN_MS from SCHEDULE_DELAY_MS on while the service is killed. */
const SCHEDULES = Number(process.env.CRASH_SCHEDULES ?? 30)
const SCHEDULE_DELAY_MS = 4_000
const SCHEDULE_SPAN_MS = 24_000
/** The most crashes while schedules fall due. */
const SCHEDULE_CRASHES = 12

interface Figures {
  storage: string
  crashes: number
  requests: number
  unanswered: number
  retries: number
  replayed: number
  transfers: number
  holds: number
  events: number
  schedules: number
  feed: number
  seconds: number
}

function check(condition: boolean, message: string, problems: string[]): void {
  if (!condition) problems.push(message)
}

/** Holds beside the transfers: created with a key, then captured in part with a key, or voided. */
interface HoldFlow {
  from: SeededUser
  to: SeededUser
  holdId?: number
  capture: boolean
  quantity: number
  transactionId?: number
  voided?: boolean
}

/** A schedule of the run: a one-off, or a recurring one (every day) whose first run falls due in the run. */
interface ScheduleFlow {
  from: SeededUser
  to: SeededUser
  quantity: number
  recurring: boolean
  startAt: number
  id?: number
  /** The transaction of its first run, as the schedule says after the run. */
  transactionId?: number
}

/** One storage's run: the service, its users, what was sent and acknowledged, and the problems found. */
interface CrashRun {
  storage: 'sqlite' | 'postgres'
  started: number
  dataDir: string
  databaseUrl: string
  env: NodeJS.ProcessEnv
  service: Service
  tag: string
  users: SeededUser[]
  /** Transfer requests by number, with the id each was acknowledged with. */
  outcomes: Map<number, Sent>
  flows: Map<number, HoldFlow>
  schedules: Map<number, ScheduleFlow>
  follower: JournalFollower
  /** False while the service is down; `restarted` resolves when it is back. */
  up: boolean
  restarted: Promise<void>
  counts: { unanswered: number; retries: number; replayed: number; crashes: number }
  problems: string[]
}

/** A fresh store (a temp DATA_DIR; a database on the server for PostgreSQL), the service on it, and users with funds. */
async function startRun(storage: 'sqlite' | 'postgres', postgres: TestPostgres | undefined): Promise<CrashRun> {
  const started = Date.now()
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'coffer-crash-'))
  const databaseUrl = postgres ? await createDatabase(postgres.url) : ''
  const port = await freePort()
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PORT: String(port),
    HOST: '127.0.0.1',
    DATA_DIR: dataDir,
    DATABASE_URL: databaseUrl,
    ADMIN_API_KEY: ADMIN_KEY,
    AUTH_RATE_LIMIT: '0',
    LOG_LEVEL: 'warn',
  }
  const service = new Service(env, port)
  await service.start()
  const tag = `crash${storage}${Date.now().toString(36)}`.replace(/[^a-z0-9]/gi, '')
  const users = await seedUsers(service.url, ADMIN_KEY, { tag, count: USERS, asset: 'crashgold', initial: INITIAL })
  return {
    storage,
    started,
    dataDir,
    databaseUrl,
    env,
    service,
    tag,
    users,
    outcomes: new Map(),
    flows: new Map(),
    schedules: new Map(),
    follower: new JournalFollower(service.url, ADMIN_KEY),
    up: true,
    restarted: Promise.resolve(),
    counts: { unanswered: 0, retries: 0, replayed: 0, crashes: 0 },
    problems: [],
  }
}

/** One request, repeated with the same key through the crashes until it is answered (not 503, not G004). */
async function answered(
  run: CrashRun,
  label: string,
  url: string,
  init: { method: string; headers: Record<string, string>; body?: unknown },
): Promise<Answer> {
  let attempt = 0
  for (;;) {
    if (Date.now() - run.started > TIME_LIMIT_MS) throw new Error(`${label} still unanswered after ${TIME_LIMIT_MS} ms`)
    if (!run.up) await run.restarted
    attempt++
    if (attempt > 1) run.counts.retries++
    try {
      const response = await call(url, init)
      if (response.status === 409 && response.body.code === 'G004') {
        await sleep(20)
        continue
      }
      if (response.status !== 503) {
        if (response.headers.get('idempotent-replayed') === 'true') run.counts.replayed++
        return response
      }
      // 503: the service is going away; retried like any unanswered request.
    } catch {
      // No answer (connection reset or refused): the service died. Retry with the same key.
    }
    if (attempt === 1) run.counts.unanswered++
    await sleep(20)
  }
}

/** Transfer request `n`, with its own Idempotency-Key, until answered; notes the id it was acknowledged with. */
async function sendTransfer(run: CrashRun, n: number): Promise<void> {
  const { from, to, quantity } = transferFor(run.users, n)
  const outcome: Sent = { from: from.walletId, to: to.walletId, quantity }
  run.outcomes.set(n, outcome)
  const response = await answered(run, `request ${n}`, `${run.service.url}/wallet/transactions`, {
    method: 'POST',
    headers: { ...from.auth, 'idempotency-key': `crash-${run.tag}-${n}` },
    body: { recipient: to.username, type: 0, memo: `crash ${run.tag} #${n}`, assets: { crashgold: quantity } },
  })
  if (response.status === 201) outcome.transactionId = response.body.id as number
  else run.problems.push(`request ${n}: unexpected ${response.status} ${JSON.stringify(response.body)}`)
}

/** Hold `n`: created with a key, then captured in part with a key, or voided (one in three). */
async function runHoldFlow(run: CrashRun, n: number): Promise<void> {
  const { service, tag, problems } = run
  const { from, to } = transferFor(run.users, n + 1)
  const flow: HoldFlow = { from, to, capture: n % 3 !== 0, quantity: 1 + (n % 10) }
  run.flows.set(n, flow)
  const created = await answered(run, `hold ${n}`, `${service.url}/wallet/holds`, {
    method: 'POST',
    headers: { ...from.auth, 'idempotency-key': `hold-${tag}-${n}` },
    body: { recipient: to.username, memo: `crash ${tag} hold #${n}`, assets: { crashgold: 10 } },
  })
  if (created.status !== 201) return void problems.push(`hold ${n}: unexpected ${created.status} ${JSON.stringify(created.body)}`)
  flow.holdId = created.body.id as number
  if (flow.capture) {
    const captured = await answered(run, `capture ${n}`, `${service.url}/wallet/holds/${flow.holdId}/capture`, {
      method: 'POST',
      headers: { ...from.auth, 'idempotency-key': `capture-${tag}-${n}` },
      body: { assets: { crashgold: flow.quantity } },
    })
    if (captured.status !== 201) return void problems.push(`capture ${n}: unexpected ${captured.status} ${JSON.stringify(captured.body)}`)
    flow.transactionId = captured.body.id as number
    return
  }
  // A void has no key: a retry of one that committed unanswered finds the hold voided (H001).
  const voided = await answered(run, `void ${n}`, `${service.url}/wallet/holds/${flow.holdId}/void`, { method: 'POST', headers: to.auth })
  const status =
    voided.status === 409
      ? (await call(`${service.url}/wallet/holds/${flow.holdId}`, { method: 'GET', headers: to.auth })).body.status
      : voided.body.status
  if (status !== 'voided')
    return void problems.push(`void ${n}: answered ${voided.status} ${JSON.stringify(voided.body)}, the hold is ${String(status)}`)
  flow.voided = true
}

/** SCHEDULES schedules among the users, due one after another from SCHEDULE_DELAY_MS on. */
async function createSchedules(run: CrashRun): Promise<void> {
  const now = Date.now()
  const create = async (n: number) => {
    const { from, to, quantity } = transferFor(run.users, n + 3)
    const flow: ScheduleFlow = {
      from,
      to,
      quantity,
      recurring: n % 3 === 0,
      startAt: now + SCHEDULE_DELAY_MS + Math.floor((n * SCHEDULE_SPAN_MS) / SCHEDULES),
    }
    const created = await call(`${run.service.url}/wallet/schedules`, {
      method: 'POST',
      headers: from.auth,
      body: {
        recipient: to.username,
        type: 0,
        assets: { crashgold: quantity },
        memo: `crash ${run.tag} schedule #${n}`,
        start_at: new Date(flow.startAt).toISOString(),
        ...(flow.recurring ? { every: 'P1D', count: 3 } : {}),
      },
    })
    if (created.status !== 201) throw new Error(`schedule ${n}: ${created.status} ${JSON.stringify(created.body)}`)
    flow.id = created.body.id as number
    run.schedules.set(n, flow)
  }
  await Promise.all(Array.from({ length: SCHEDULES }, (_, n) => create(n)))
}

/** Kills and restarts the service once; requests wait for it to be back. */
async function crashOnce(run: CrashRun): Promise<void> {
  run.up = false
  let markUp: () => void = () => {}
  run.restarted = new Promise((resolve) => (markUp = resolve))
  await run.service.kill('SIGKILL')
  run.counts.crashes++
  await run.service.start()
  run.up = true
  markUp()
}

/**
 * The load: REQUESTS transfers from CONCURRENCY workers and HOLDS hold flows from HOLD_WORKERS,
 * while the service is killed with SIGKILL CRASHES times at evenly spread points and restarted.
 */
async function driveLoadThroughCrashes(run: CrashRun): Promise<void> {
  let next = 0
  let nextHold = 0
  const worker = async () => {
    while (next < REQUESTS) await sendTransfer(run, next++)
  }
  const holdWorker = async () => {
    while (nextHold < HOLDS) await runHoldFlow(run, nextHold++)
  }
  const killer = async () => {
    for (let i = 0; i < CRASHES; i++) {
      // Crash while requests are in flight.
      const target = Math.floor(((i + 1) * REQUESTS) / (CRASHES + 1))
      while (next < target) await sleep(5)
      await sleep(Math.random() * 20)
      await crashOnce(run)
    }
  }
  await Promise.all([killer(), ...Array.from({ length: CONCURRENCY }, worker), ...Array.from({ length: HOLD_WORKERS }, holdWorker)])
}

/** Schedules fall due while the service is killed every second or two (the runner looks every second), mid-run at times. */
async function crashWhileSchedulesFallDue(run: CrashRun): Promise<void> {
  await createSchedules(run)
  const lastDue = Math.max(...[...run.schedules.values()].map((flow) => flow.startAt))
  for (let i = 0; i < SCHEDULE_CRASHES && Date.now() < lastDue + 1_000; i++) {
    await sleep(1_000 + Math.random() * 1_500)
    await crashOnce(run)
  }
}

/** Each schedule ran its first occurrence once, after the crashes: a one-off is finished, a recurring one waits for its second. */
async function checkScheduleRuns(run: CrashRun): Promise<void> {
  const deadline = Date.now() + 60_000
  for (const [n, flow] of run.schedules) {
    for (;;) {
      const answer = await call(`${run.service.url}/wallet/schedules/${flow.id}`, { method: 'GET', headers: flow.from.auth })
      const schedule = answer.body as { status: string; runs: number; failures: number; last_run: { transaction_id: number | null } | null }
      if (answer.status === 200 && schedule.runs >= 1) {
        const want = flow.recurring ? 'active' : 'finished'
        if (schedule.runs !== 1 || schedule.failures !== 0 || schedule.status !== want)
          run.problems.push(
            `schedule ${n} (${flow.id}): ${schedule.runs} runs, ${schedule.failures} failures, ${schedule.status}; want 1, 0, ${want}`,
          )
        flow.transactionId = schedule.last_run?.transaction_id ?? undefined
        break
      }
      if (Date.now() > deadline) {
        run.problems.push(`schedule ${n} (${flow.id}) has not run ${((Date.now() - flow.startAt) / 1000).toFixed(0)} s after it fell due`)
        break
      }
      await sleep(250)
    }
  }
}

/** Schedules in the database: each ran as exactly one transaction naming it, the one it names as its last run. */
async function checkStoredScheduleRuns(run: CrashRun, database: Database): Promise<number> {
  const rows = await database.db
    .selectFrom('transactions')
    .select(['id', 'schedule_id', 'memo'])
    .where('schedule_id', 'is not', null)
    .execute()
  const bySchedule = new Map<number, number[]>()
  for (const row of rows) bySchedule.set(Number(row.schedule_id), [...(bySchedule.get(Number(row.schedule_id)) ?? []), row.id])
  for (const [n, flow] of run.schedules) {
    const ids = bySchedule.get(flow.id!) ?? []
    if (ids.length !== 1 || ids[0] !== flow.transactionId)
      run.problems.push(`schedule ${n} (${flow.id}) ran as transactions [${ids.join(', ')}]; it names ${flow.transactionId} as its run`)
  }
  return rows.length
}

/** A replay of an answered request answers the same, marked as replayed, and moves nothing. */
async function checkReplays(run: CrashRun): Promise<void> {
  const sample = [...run.outcomes.entries()].filter(([, outcome]) => outcome.transactionId !== undefined).slice(0, 5)
  for (const [n, outcome] of sample) {
    const from = run.users[n % USERS]
    const to = run.users.find((user) => user.walletId === outcome.to)!
    const again = await call(`${run.service.url}/wallet/transactions`, {
      method: 'POST',
      headers: { ...from.auth, 'idempotency-key': `crash-${run.tag}-${n}` },
      body: { recipient: to.username, type: 0, memo: `crash ${run.tag} #${n}`, assets: { crashgold: outcome.quantity } },
    })
    check(
      again.status === 201 && again.body.id === outcome.transactionId,
      `replay of request ${n} answered ${again.status} ${JSON.stringify(again.body)}`,
      run.problems,
    )
    check(again.headers.get('idempotent-replayed') === 'true', `replay of request ${n} lacks Idempotent-Replayed`, run.problems)
  }
}

/** Balances through the API: what the acknowledged transfers and captures moved, and nothing still held. */
async function checkBalances(run: CrashRun): Promise<void> {
  const moved = new Map<number, Sent>(run.outcomes)
  for (const [n, flow] of run.flows)
    if (flow.transactionId !== undefined)
      moved.set(REQUESTS + n, {
        from: flow.from.walletId,
        to: flow.to.walletId,
        quantity: flow.quantity,
        transactionId: flow.transactionId,
      })
  for (const [n, flow] of run.schedules)
    if (flow.transactionId !== undefined)
      moved.set(REQUESTS + HOLDS + n, {
        from: flow.from.walletId,
        to: flow.to.walletId,
        quantity: flow.quantity,
        transactionId: flow.transactionId,
      })
  await checkHoldings(run.service.url, run.users, moved, 'crashgold', INITIAL, run.problems)
  for (const user of run.users) {
    const list = (await call(`${run.service.url}/wallet/assets`, { method: 'GET', headers: user.auth })).body as unknown as {
      held: number
    }[]
    if (list.some((holding) => holding.held !== 0))
      run.problems.push(`${user.username} still has something held after every hold was settled`)
  }
}

/** Holds in the database: each acknowledged one once; each capture once, naming its hold; each void without a capture. */
async function checkStoredHolds(run: CrashRun, database: Database): Promise<number> {
  const { problems } = run
  const holdRows = await database.db.selectFrom('holds').select(['id', 'memo', 'status', 'transaction_id']).execute()
  const captures = await database.db.selectFrom('transactions').select(['id', 'hold_id']).where('kind', '=', 'capture').execute()
  const capturesOf = new Map<number, number[]>()
  for (const capture of captures) capturesOf.set(Number(capture.hold_id), [...(capturesOf.get(Number(capture.hold_id)) ?? []), capture.id])
  const holdPrefix = `crash ${run.tag} hold #`
  let holds = 0
  for (const [n, flow] of run.flows) {
    const stored = holdRows.filter((row) => row.memo === `${holdPrefix}${n}`)
    holds += stored.length
    if (stored.length !== 1 || stored[0].id !== flow.holdId) {
      problems.push(`hold ${n} (acknowledged as ${flow.holdId}) is stored as [${stored.map((row) => row.id).join(', ')}]`)
      continue
    }
    const [row] = stored
    const taken = capturesOf.get(row.id) ?? []
    if (taken.length > 1) problems.push(`hold ${row.id} was captured ${taken.length} times: ${taken.join(', ')}`)
    if (flow.capture && (row.status !== 'captured' || row.transaction_id !== flow.transactionId || taken[0] !== flow.transactionId)) {
      problems.push(
        `hold ${row.id}: capture acknowledged as ${flow.transactionId}, the hold is ${row.status} naming ${row.transaction_id}, captures [${taken.join(', ')}]`,
      )
    }
    if (!flow.capture && (row.status !== 'voided' || taken.length > 0))
      problems.push(`hold ${row.id}: void acknowledged, the hold is ${row.status} with captures [${taken.join(', ')}]`)
  }
  for (const row of holdRows)
    if (row.memo.startsWith(holdPrefix) && !run.flows.has(Number(row.memo.slice(holdPrefix.length))))
      problems.push(`hold ${row.id} exists though it was never sent`)
  return holds
}

/** Transfers in the database: each request exactly once, with the acknowledged id, and one event per non-mint side. */
async function checkStoredTransfers(run: CrashRun, database: Database): Promise<{ transfers: number; events: number }> {
  const stored = await checkExactlyOnce(database, `crash ${run.tag} #`, run.outcomes, run.problems)
  const eventRows = await transactionEvents(database.db)
  const byTransaction = new Map<number, string[]>()
  for (const [transactionId, walletId, type] of eventRows)
    byTransaction.set(transactionId, [...(byTransaction.get(transactionId) ?? []), `${type}:${walletId}`])
  for (const row of stored.rows) {
    const want = [
      ...(row.sending_wallet_id === 1 ? [] : [`transaction.sent:${row.sending_wallet_id}`]),
      ...(row.receiving_wallet_id === 1 ? [] : [`transaction.received:${row.receiving_wallet_id}`]),
    ].sort()
    const got = (byTransaction.get(row.id) ?? []).sort()
    check(
      JSON.stringify(got) === JSON.stringify(want),
      `transaction ${row.id} has events [${got.join(', ')}], expected [${want.join(', ')}]`,
      run.problems,
    )
  }
  return { transfers: stored.transfers, events: eventRows.length }
}

async function crashRun(
  storage: 'sqlite' | 'postgres',
  postgres: TestPostgres | undefined,
): Promise<{ figures: Figures; problems: string[] }> {
  const run = await startRun(storage, postgres)
  run.follower.start()
  await driveLoadThroughCrashes(run)
  await crashWhileSchedulesFallDue(run)
  await checkScheduleRuns(run)
  await checkReplays(run)
  await checkBalances(run)
  const acknowledged = [
    ...[...run.outcomes.values()].map((outcome) => outcome.transactionId),
    ...[...run.flows.values()].map((flow) => flow.transactionId),
    ...[...run.schedules.values()].map((flow) => flow.transactionId),
  ].filter((id): id is number => id !== undefined)
  await run.follower.finish(acknowledged)
  await run.service.kill('SIGTERM')

  const database: Database = openDatabase({ databaseUrl: run.databaseUrl || undefined, dataDir: run.dataDir })
  const stored = await (async () => {
    try {
      const allIds = (await database.db.selectFrom('transactions').select('id').execute()).map((row) => row.id)
      run.follower.check(allIds, run.problems)
      return {
        holds: await checkStoredHolds(run, database),
        schedules: await checkStoredScheduleRuns(run, database),
        feed: run.follower.last,
        ...(await checkStoredTransfers(run, database)),
      }
    } finally {
      await database.close()
    }
  })()

  const verified = await runCoffer(['verify'], run.env)
  check(verified.code === 0, `coffer verify failed (${verified.code}):\n${verified.output}`, run.problems)

  fs.rmSync(run.dataDir, { recursive: true, force: true })
  return {
    figures: { storage, requests: REQUESTS, ...run.counts, ...stored, seconds: (Date.now() - run.started) / 1000 },
    problems: run.problems,
  }
}

const requested = process.argv.slice(2).filter((arg) => arg === 'sqlite' || arg === 'postgres') as ('sqlite' | 'postgres')[]
const storages = requested.length > 0 ? requested : (['sqlite', 'postgres'] as const)
let failed = false
for (const storage of storages) {
  const postgres = storage === 'postgres' ? await startPostgres() : undefined
  try {
    const { figures, problems } = await crashRun(storage, postgres)
    console.log(
      `${figures.storage}: ${figures.crashes} crashes injected (SIGKILL), ${figures.requests} transfers sent, ` +
        `${figures.unanswered} got no answer, ${figures.retries} retries with the same key (${figures.replayed} answered as replays), ` +
        `${figures.transfers} transfers, ${figures.holds} holds (captured or voided) and ${figures.schedules} scheduled runs checked exactly once, ` +
        `${figures.events} outbox events checked, the feed followed to position ${figures.feed}, coffer verify ${problems.some((p) => p.startsWith('coffer verify')) ? 'FAILED' : 'passed'} ` +
        `— ${figures.seconds.toFixed(1)} s`,
    )
    if (problems.length > 0) {
      failed = true
      console.log(`${storage}: ${problems.length} problem(s):`)
      for (const problem of problems.slice(0, 50)) console.log(`  - ${problem}`)
    } else {
      console.log(`${storage}: nothing lost, nothing doubled`)
    }
  } catch (error) {
    failed = true
    console.log(`${storage}: the crash test could not run: ${error instanceof Error ? error.stack : String(error)}`)
  } finally {
    await postgres?.stop()
  }
}
process.exit(failed ? 1 : 0)
