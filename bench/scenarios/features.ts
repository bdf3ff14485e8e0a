/**
 * What the journal, schedules, monitors, expiring units and key limits cost
 * (`npm run bench -- journal journal-upgrade schedules monitors expiry key-limits [--storage=sqlite|postgres]
 * [--seconds=N] [--pairs=N] [--wallets=N] [--against=<checkout>] [--profile=DIR] [--schedules=N] [--transactions=N]`).
 *
 * Each runs the service as a child process on a fresh store (SQLite in a temp dir; a database on an
 * embedded PostgreSQL server started here), loads it over HTTP on 127.0.0.1 with autocannon (32
 * connections, transfers of 1 unit between `--wallets` wallets, 50 by default), prints figures and
 * stops everything it started. Phases being compared take turns, `--pairs` times (3) after a turn of
 * each not counted, `--seconds` each (10), the first phase in every other pair going second; the
 * median of the ratios and the ratio of the sums are the figures, with the CPU a transfer where
 * measured. Nothing here asserts a time.
 *
 * - `journal`: transfers/s of this build, and of the build in `--against` (a checkout of the code
 *   before the journal, see docs/performance.md; `journal-off`: this build with the journal's work
 *   taken out of the write path, `bench/journal-off.ts`) when given, taking turns; while this build runs,
 *   how long a transaction waits for its position (its `created_at` to its first reading in the
 *   feed) and for a checkpoint covering it; then `coffer export` to /dev/null (entries/s), a
 *   proof's cost (median of 100) and `coffer verify` (transactions/s). With `--against` and
 *   `--profile=DIR`, both services run under `node --cpu-prof` and, in place of the rest, their
 *   main threads' µs a transfer over the counted turns are compared by package and function.
 * - `journal-upgrade`: a ledger of `--transactions` (100,000) written through the ledger's write
 *   path, taken back to the schema before the journal (the migrations' `down`), then brought up
 *   again: the migrations' time, the time until the service's sequencer has positioned and hashed
 *   the whole history, then `coffer export` and `coffer verify` over it.
 * - `schedules`: `--schedules` (1,000) one-off schedules due at the same instant: how long until
 *   all ran, and transfers/s from the instant to the last run (phases of 5 s) against a phase just
 *   before the instant and one after the last run.
 * - `monitors`: transfers/s with a monitor on every wallet (never crossed) against none, taking turns.
 * - `expiry`: transfers of an asset that never had an expiring issuance against transfers of one
 *   whose senders each hold units of 10 expiry dates, taking turns; with `--against`, the plain
 *   asset's transfers on that build too.
 * - `key-limits`: transfers through a wallet key with every limit (a cap per transfer and per day
 *   far above what the phase moves, and every wallet as a recipient) against a key without limits,
 *   taking turns.
 */
import { spawn } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { openPostgres } from '../../src/db/postgres.ts'
import { openSqlite } from '../../src/db/database.ts'
import type { Database } from '../../src/db/database.ts'
import { migrateTo, migrateToLatest } from '../../src/db/migrate.ts'
import { benchCleanups } from '../cleanups.ts'
import { processCpuMs, processTreeCpuMs, threadCpuMs } from '../cpu.ts'
import { dropWriterXid, journalOffCopy } from '../journal-off.ts'
import { median, runLoad, type LoadJob, type LoadResult } from '../load.ts'
import { startPostgres, type BenchPostgres } from '../postgres.ts'
import { compareWindows, mainThreadProfile, type ProfileWindow } from '../profile.ts'
import { call as request, goldAndWallets, pool, writeHistory } from '../seed.ts'
import { startService, type Service } from '../service.ts'

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..')
const args = process.argv.slice(2)
const option = (name: string) => args.find((arg) => arg.startsWith(`--${name}=`))?.slice(name.length + 3)
const names = args.filter((arg) => !arg.startsWith('--'))
const storageOption = option('storage')
const storages: ('sqlite' | 'postgres')[] = storageOption ? [storageOption as 'sqlite' | 'postgres'] : ['sqlite', 'postgres']
const SECONDS = Number(option('seconds') ?? (args.includes('--quick') ? 3 : 10))
const PAIRS = Number(option('pairs') ?? 3)
const WALLETS = Number(option('wallets') ?? 50)
const CONNECTIONS = Number(option('connections') ?? 32)
const AGAINST = option('against')
const PROFILE = option('profile')
const SCHEDULES = Number(option('schedules') ?? 1_000)
const TRANSACTIONS = Number(option('transactions') ?? 100_000)
const ADMIN_KEY = 'cfa_bench_features_admin_key'
const PASSWORD = 'bench password 1234'

let cleanups = benchCleanups()
let tag = ''
const log = (line: string) => console.log(`[${tag}] ${line}`)
const fixed = (value: number, digits = 0) => value.toLocaleString('en', { maximumFractionDigits: digits, minimumFractionDigits: digits })
const percentile = (values: number[], fraction: number) =>
  [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(values.length * fraction))] ?? NaN
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** A JSON request, with the admin key unless told another token. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
const call = (base: string, method: string, url: string, body?: unknown, token = ADMIN_KEY): Promise<any> =>
  request(base, method, url, body, token)

interface Wallet {
  username: string
  token: string
  walletId: number
}

interface Running {
  service: Service
  base: string
  database: Database
  dataDir: string
  databaseUrl: string | undefined
  wallets: Wallet[]
}

/** A fresh store and the service on it (this checkout, or `root`), with WALLETS users holding gold. */
async function startRunning(
  storage: 'sqlite' | 'postgres',
  server: BenchPostgres | undefined,
  name: string,
  root?: string,
  profileDir?: string,
): Promise<Running> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), `coffer-bench-${name}-`))
  cleanups.push(async () => fs.rmSync(dataDir, { recursive: true, force: true }))
  const databaseUrl = await server?.createDatabase(`${name}${Date.now().toString(36)}`)
  const service = await startService({ dataDir, databaseUrl, adminKey: ADMIN_KEY, logLevel: 'warn', root, profileDir }, cleanups.track)
  cleanups.push(() => service.stop())
  const database = databaseUrl ? openPostgres(databaseUrl, 4) : openSqlite(path.join(dataDir, 'coffer.sqlite'))
  cleanups.push(() => database.close())
  const base = service.url
  const gold = await call(base, 'POST', '/assets', { name: 'gold', value: 1 })
  const wallets = await pool(
    Array.from({ length: WALLETS }, (_, i) => `bench${i}`),
    8,
    async (username) => {
      const user = await call(base, 'POST', '/users', { username, password: PASSWORD })
      const session = await call(base, 'POST', `/users/${username}/sessions`, { password: PASSWORD, return_token: true })
      await call(base, 'POST', `/wallets/${user.primary_wallet_id}/assets`, { id: gold.id, quantity: 1_000_000_000 })
      return { username, token: session.token as string, walletId: user.primary_wallet_id as number }
    },
  )
  return { service, base, database, dataDir, databaseUrl, wallets }
}

function transfers(running: Running, asset = 'gold', seconds = SECONDS): Promise<LoadResult> {
  const job: LoadJob = {
    url: running.base,
    connections: CONNECTIONS,
    seconds,
    kind: 'transfer',
    asset,
    senders: running.wallets.map((wallet) => ({ token: wallet.token, name: wallet.username })),
    recipients: running.wallets.map((wallet) => wallet.username),
  }
  return runLoad(job)
}

const figure = (result: LoadResult) => `${fixed(result.okPerSecond)}/s (p99 ${fixed(result.p99, 1)} ms, ${result.non2xx} not 2xx)`

/** CPU µs a transfer during a phase: the service (all its threads), its main thread alone, the PostgreSQL server. */
interface PhaseCpu {
  service: number
  main: number
  server: number
}

type Phase = LoadResult & { cpu?: PhaseCpu }

/** `transfers(running)` with the CPU they cost (the server's: every database on it, the others idle). */
async function transfersWithCpu(running: Running, server: BenchPostgres | undefined): Promise<Phase> {
  const pid = running.service.pid
  const read = () => [processCpuMs(pid), threadCpuMs(pid), server ? processTreeCpuMs(server.pid) : 0]
  const before = read()
  const result = await transfers(running)
  const after = read()
  const done = result.okPerSecond * result.seconds
  const [service, main, serverCpu] = after.map((value, i) => ((value - before[i]) * 1000) / done)
  return { ...result, cpu: { service, main, server: serverCpu } }
}

/**
 * Alternates `a` and `b` PAIRS times after a turn of each, `b` first in every other pair (a store's
 * later turn meets the vacuum and checkpoints the earlier turn's writes set off); prints each pair,
 * then the median of b ÷ a and the ratio of their sums, and where the phases measured their CPU,
 * its ratios.
 */
async function alternate(labelA: string, a: () => Promise<Phase>, labelB: string, b: () => Promise<Phase>): Promise<number> {
  const ratios: number[] = []
  const sums = { a: [0, 0, 0, 0], b: [0, 0, 0, 0] }
  const add = (to: number[], phase: Phase) => {
    to[0] += phase.okPerSecond
    if (phase.cpu) [phase.cpu.service, phase.cpu.main, phase.cpu.server].forEach((value, i) => (to[i + 1] += value))
  }
  const shown = (label: string, phase: Phase) =>
    `${label} ${figure(phase)}` +
    (phase.cpu
      ? ` [${fixed(phase.cpu.service)} µs (main ${fixed(phase.cpu.main)})${phase.cpu.server ? ` + server ${fixed(phase.cpu.server)}` : ''}]`
      : '')
  // A turn of each first, not counted: a service's first turn also compiles its code.
  await a()
  await b()
  for (let pair = 0; pair < PAIRS; pair++) {
    const bFirst = pair % 2 === 1
    const early = bFirst ? await b() : undefined
    const resultA = await a()
    const resultB = early ?? (await b())
    ratios.push(resultB.okPerSecond / resultA.okPerSecond)
    add(sums.a, resultA)
    add(sums.b, resultB)
    const turns = [shown(labelA, resultA), shown(labelB, resultB)]
    if (bFirst) turns.reverse()
    log(`pair ${pair + 1}: ${turns.join('; ')}; ratio ${fixed(ratios.at(-1) as number, 2)}`)
  }
  const result = median(ratios)
  const ratio = (i: number) => fixed(sums.b[i] / sums.a[i], 3)
  log(
    `${labelB} ÷ ${labelA}: median ${fixed(result, 2)} (range ${fixed(Math.min(...ratios), 2)}-${fixed(Math.max(...ratios), 2)}), ` +
      `sums ${ratio(0)}`,
  )
  if (sums.a[1] > 0) {
    const total = (sums.b[1] + sums.b[3]) / (sums.a[1] + sums.a[3])
    const serverPart = sums.a[3] > 0 ? `, server ${ratio(3)}, both ${fixed(total, 3)}` : ''
    log(`CPU a transfer, ${labelB} ÷ ${labelA}: service ${ratio(1)}, its main thread ${ratio(2)}${serverPart}`)
  }
  return result
}

function coffer(
  store: { dataDir: string; databaseUrl: string | undefined },
  argv: string[],
  stdout: 'ignore' | 'pipe' = 'pipe',
): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [path.join(ROOT, 'bin/coffer.js'), ...argv], {
      env: { ...process.env, DATA_DIR: store.dataDir, DATABASE_URL: store.databaseUrl ?? '', LOG_LEVEL: 'warn' },
      stdio: ['ignore', stdout, 'pipe'],
    })
    if (child.pid) cleanups.track(child.pid)
    let output = ''
    child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()))
    child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()))
    child.on('exit', (code) => resolve({ code: code ?? 1, output }))
  })
}

// ---------------------------------------------------------------------------------------------

/**
 * Starts `load` and follows the feed and the latest checkpoint while it runs: per transaction,
 * commit to position, and to a covering checkpoint. The reader first reaches the journal's end, so
 * that it measures positions, not its own catching up on earlier phases.
 */
async function journalLag(
  running: Running,
  start: () => Promise<LoadResult>,
): Promise<{ result: LoadResult; toPosition: number[]; toCheckpoint: number[] }> {
  const { base } = running
  const last = await call(base, 'GET', '/journal/checkpoint', undefined, running.wallets[0].token)
  let after = Number(last.size ?? 0)
  for (;;) {
    const page = await call(base, 'GET', `/admin/journal?after=${after}&limit=1000`)
    after = page.next
    if (page.entries.length < 1000) break
  }
  // Only what commits from now on: rounds may still be positioning an earlier phase's transfers.
  const since = Date.now()
  const load = start()
  const waiting: { position: number; committed: number }[] = []
  const toPosition: number[] = []
  const toCheckpoint: number[] = []
  let done = false
  const feed = (async () => {
    while (!done || waiting.length > 0) {
      const page = await call(base, 'GET', `/admin/journal?after=${after}&limit=1000&wait=1`)
      const now = Date.now()
      for (const entry of page.entries as { position: number; created_at: string }[]) {
        const committed = Date.parse(entry.created_at)
        if (committed < since) continue
        toPosition.push(now - committed)
        waiting.push({ position: entry.position, committed })
      }
      after = page.next
      const checkpoint = await call(base, 'GET', '/journal/checkpoint', undefined, running.wallets[0].token)
      const at = Date.now()
      while (waiting.length > 0 && waiting[0].position <= checkpoint.size)
        toCheckpoint.push(at - (waiting.shift() as { committed: number }).committed)
      if (done && page.entries.length === 0) await sleep(200)
    }
  })()
  const result = await load
  done = true
  await feed
  return { result, toPosition, toCheckpoint }
}

async function journal(storage: 'sqlite' | 'postgres', server: BenchPostgres | undefined): Promise<void> {
  // `--profile=DIR`: both services of the comparison under `node --cpu-prof`, each in its own folder
  // of DIR, their main threads' time compared over the counted turns once both stopped.
  const profileDirs = PROFILE && AGAINST ? [path.join(PROFILE, 'without'), path.join(PROFILE, 'with')] : undefined
  const running = await startRunning(storage, server, 'journal', undefined, profileDirs?.[1])
  if (AGAINST) {
    // `journal-off`: this build with the journal's work taken out of the write path (`bench/journal-off.ts`).
    const copy = AGAINST === 'journal-off' ? journalOffCopy(ROOT) : undefined
    if (copy) cleanups.push(async () => copy.remove())
    const other = await startRunning(storage, server, 'journalbefore', copy?.root ?? path.resolve(AGAINST), profileDirs?.[0])
    if (copy && storage === 'postgres') await dropWriterXid(other.database.db)
    const windows: ProfileWindow[][] = [[], []]
    const turn = (which: 0 | 1, subject: Running, label: string) => async () => {
      const start = Number(process.hrtime.bigint() / 1000n)
      const phase = await transfersWithCpu(subject, server)
      windows[which].push({ label, start, end: Number(process.hrtime.bigint() / 1000n), count: phase.okPerSecond * phase.seconds })
      return phase
    }
    const labels = [`without the journal (${AGAINST})`, 'with the journal']
    await alternate(labels[0], turn(0, other, labels[0]), labels[1], turn(1, running, labels[1]))
    await other.service.stop()
    if (profileDirs) {
      await running.service.stop()
      // The first turn of each is not counted (`alternate`).
      const sources = profileDirs.map((dir, i) => ({ file: mainThreadProfile(dir) as string, windows: windows[i].slice(1) }))
      // Kept beside each profile for `bench/profile.ts --windows` (other cuts, more functions).
      sources.forEach((source, i) => fs.writeFileSync(path.join(profileDirs[i], 'windows.json'), JSON.stringify(source.windows)))
      log(compareWindows(sources, 30))
      return
    }
  }
  const { result, toPosition, toCheckpoint } = await journalLag(running, () => transfers(running))
  log(`transfers ${figure(result)} while the feed and the checkpoint were followed`)
  const ms = (values: number[]) =>
    `p50 ${fixed(percentile(values, 0.5))} ms, p99 ${fixed(percentile(values, 0.99))} ms, max ${fixed(Math.max(...values))} ms`
  log(`commit → position: ${ms(toPosition)} (${toPosition.length} transactions); target within 1 s`)
  log(`commit → covered by a checkpoint: ${ms(toCheckpoint)}; target within 11 s`)

  const size = (await call(running.base, 'GET', '/journal/checkpoint', undefined, running.wallets[0].token)).size as number
  let started = performance.now()
  const exported = await coffer(running, ['export'], 'ignore')
  let seconds = (performance.now() - started) / 1000
  log(
    `coffer export > /dev/null: ${size} entries or more in ${fixed(seconds, 1)} s, ${fixed(size / seconds)} entries/s (exit ${exported.code}); target ≥ 50,000/s`,
  )

  const owner = running.wallets[0]
  const page = await call(running.base, 'GET', '/wallet/transactions?limit=1', undefined, owner.token)
  const id = (page.transactions ?? page.items ?? page)[0]?.id as number | undefined
  if (id !== undefined) {
    const samples: number[] = []
    for (let i = 0; i < 100; i++) {
      const at = performance.now()
      await call(running.base, 'GET', `/wallet/transactions/${id}/proof`, undefined, owner.token)
      samples.push(performance.now() - at)
    }
    log(
      `a proof (GET /wallet/transactions/{id}/proof) at ${size} transactions: median ${fixed(median(samples), 2)} ms, p95 ${fixed(percentile(samples, 0.95), 2)} ms`,
    )
  }
  await running.service.stop()
  started = performance.now()
  const verified = await coffer(running, ['verify'])
  seconds = (performance.now() - started) / 1000
  log(`coffer verify: ${size} transactions in ${fixed(seconds, 1)} s, ${fixed(size / seconds)}/s (exit ${verified.code})`)
}

async function journalUpgrade(storage: 'sqlite' | 'postgres', server: BenchPostgres | undefined): Promise<void> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'coffer-bench-upgrade-'))
  cleanups.push(async () => fs.rmSync(dataDir, { recursive: true, force: true }))
  const databaseUrl = await server?.createDatabase(`upgrade${Date.now().toString(36)}`)
  // Unbounded statements, as `coffer migrate` runs the migrations of a large store.
  const database = databaseUrl
    ? openPostgres(databaseUrl, 4, { statementTimeoutMs: 0, idleInTransactionTimeoutMs: 0, queryTimeoutMs: 0 })
    : openSqlite(path.join(dataDir, 'coffer.sqlite'))
  await migrateToLatest(database.db)
  const { asset, walletIds } = await goldAndWallets(database, 'upgrade')
  let started = performance.now()
  await writeHistory(database, asset, walletIds, TRANSACTIONS)
  log(`wrote ${TRANSACTIONS} transactions in ${fixed((performance.now() - started) / 1000, 1)} s`)
  await migrateTo(database.db, '0014_webhook_lease_counts')
  started = performance.now()
  await migrateToLatest(database.db)
  const migrated = (performance.now() - started) / 1000
  log(`the migrations from 0015 on: ${fixed(migrated, 1)} s`)
  await database.close()
  const service = await startService({ dataDir, databaseUrl, adminKey: ADMIN_KEY, logLevel: 'info' }, cleanups.track)
  cleanups.push(() => service.stop())
  started = performance.now()
  for (;;) {
    const page = await call(service.url, 'GET', `/admin/journal?after=${TRANSACTIONS - 1}&limit=1`)
    if (page.entries.length > 0) break
    await sleep(200)
  }
  const positioned = (performance.now() - started) / 1000
  log(
    `the service positioned and hashed the whole history ${fixed(positioned, 1)} s after it started (${fixed(TRANSACTIONS / positioned)}/s)`,
  )
  const progress = fs
    .readFileSync(service.logFile, 'utf8')
    .split('\n')
    .filter((line) => /journal|sequenc|position/i.test(line)).length
  log(`${progress} log lines of the journal's progress in ${service.logFile}`)
  const store = { dataDir, databaseUrl }
  started = performance.now()
  const exported = await coffer(store, ['export'], 'ignore')
  let seconds = (performance.now() - started) / 1000
  log(
    `coffer export > /dev/null: ${TRANSACTIONS} entries in ${fixed(seconds, 1)} s, ${fixed(TRANSACTIONS / seconds)}/s (exit ${exported.code})`,
  )
  await service.stop()
  started = performance.now()
  const verified = await coffer(store, ['verify'])
  seconds = (performance.now() - started) / 1000
  log(
    `coffer verify with hashes: ${TRANSACTIONS} transactions in ${fixed(seconds, 1)} s, ${fixed(TRANSACTIONS / seconds)}/s (exit ${verified.code})`,
  )
}

async function schedules(storage: 'sqlite' | 'postgres', server: BenchPostgres | undefined): Promise<void> {
  const running = await startRunning(storage, server, 'schedules')
  // Every schedule due at one instant, far enough ahead for them all to be created and a phase to run before it.
  const dueAt = Date.now() + 20_000 + SCHEDULES * 20 + SECONDS * 1_000
  {
    let made = 0
    await pool(
      Array.from({ length: SCHEDULES }, (_, i) => i),
      8,
      async (i) => {
        const from = running.wallets[i % running.wallets.length]
        const to = running.wallets[(i + 1) % running.wallets.length]
        await call(
          running.base,
          'POST',
          '/wallet/schedules',
          { recipient: to.username, assets: { gold: 1 }, memo: `bench ${i}`, start_at: new Date(dueAt).toISOString() },
          from.token,
        )
        made++
      },
    )
    log(`${made} schedules created, due at ${new Date(dueAt).toISOString()} (${fixed((dueAt - Date.now()) / 1000, 1)} s ahead)`)
  }
  await sleep(Math.max(0, dueAt - Date.now() - SECONDS * 1_000 - 1_500))
  const before = await transfers(running)
  log(`transfers just before the instant: ${figure(before)}${Date.now() > dueAt ? ' (ran past the instant)' : ''}`)
  const ran = async () =>
    Number(
      (
        await running.database.db
          .selectFrom('transactions')
          .select((eb) => eb.fn.countAll().as('n'))
          .where('schedule_id', 'is not', null)
          .executeTakeFirstOrThrow()
      ).n,
    )
  let allRanAt: number | undefined
  const limit = dueAt + 120_000
  const watch = (async () => {
    while (Date.now() < limit) {
      if ((await ran()) >= SCHEDULES) return void (allRanAt = Date.now())
      await sleep(100)
    }
  })()
  await sleep(Math.max(0, dueAt - Date.now()))
  // Phases of 5 s from the instant until the last run: the runner paces them over SCHEDULE_PACE_SECONDS.
  const during: LoadResult[] = []
  while (allRanAt === undefined && Date.now() < limit) {
    const startedAt = Date.now()
    during.push(await transfers(running, 'gold', 5))
    log(`  +${fixed((startedAt - dueAt) / 1000, 1)} s: ${figure(during.at(-1) as LoadResult)}; ${await ran()} ran`)
  }
  await watch
  const perSecond = (results: LoadResult[]) =>
    results.reduce((sum, result) => sum + result.okPerSecond * result.seconds, 0) / results.reduce((sum, result) => sum + result.seconds, 0)
  const after = await transfers(running)
  log(`transfers after the last run: ${figure(after)}`)
  const whileRunning = perSecond(during)
  log(
    `transfers from the instant to the last run: ${fixed(whileRunning)}/s over ${during.length} phases; ÷ before ${fixed(whileRunning / before.okPerSecond, 2)}, ` +
      `÷ after ${fixed(whileRunning / after.okPerSecond, 2)} (target ≥ 0.90)`,
  )
  log(
    allRanAt === undefined
      ? `not all ran within 120 s of falling due (${await ran()} of ${SCHEDULES})`
      : `all ${SCHEDULES} ran ${fixed((allRanAt - dueAt) / 1000, 1)} s after falling due (target: within the minute)`,
  )
}

async function monitors(storage: 'sqlite' | 'postgres', server: BenchPostgres | undefined): Promise<void> {
  const running = await startRunning(storage, server, 'monitors')
  let ids: { token: string; id: number }[] = []
  const withMonitors = async () => {
    ids = await pool(running.wallets, 8, async (wallet) => ({
      token: wallet.token,
      id: (await call(running.base, 'POST', '/wallet/monitors', { asset: 'gold', below: 1 }, wallet.token)).id as number,
    }))
    const result = await transfers(running)
    await pool(ids, 8, (monitor) => call(running.base, 'DELETE', `/wallet/monitors/${monitor.id}`, undefined, monitor.token))
    return result
  }
  const ratio = await alternate('no monitors', () => transfers(running), 'a monitor on every wallet', withMonitors)
  log(`a monitor's cost to a transfer: ${fixed((1 / ratio - 1) * 100, 1)} % (target ≤ 5 %)`)
}

async function expiry(storage: 'sqlite' | 'postgres', server: BenchPostgres | undefined): Promise<void> {
  const running = await startRunning(storage, server, 'expiry')
  const points = await call(running.base, 'POST', '/assets', { name: 'points', value: 1 })
  const day = 86_400_000
  for (let date = 1; date <= 10; date++)
    await call(running.base, 'POST', '/issuances', {
      asset_id: points.id,
      entries: running.wallets.map((wallet) => ({ wallet_id: wallet.walletId, quantity: 100_000_000 })),
      expires_at: new Date(Date.now() + (30 + date) * day).toISOString(),
    })
  log('every wallet holds points of 10 expiry dates')
  const ratio = await alternate(
    'gold (never expiring)',
    () => transfers(running, 'gold'),
    'points (10 expiry dates)',
    () => transfers(running, 'points'),
  )
  log(`an expiring asset's transfer costs ${fixed((1 / ratio - 1) * 100, 1)} % more (target ≤ 20 %)`)
  if (AGAINST) {
    const other = await startRunning(storage, server, 'expirybefore', path.resolve(AGAINST))
    await alternate(
      `gold on ${AGAINST}`,
      () => transfers(other, 'gold'),
      'gold on this build',
      () => transfers(running, 'gold'),
    )
  }
}

/** A wallet key for each wallet, made by its user with `body` (scopes, limits). */
function walletKeys(running: Running, body: Record<string, unknown>): Promise<Wallet[]> {
  return pool(running.wallets, 8, async (wallet) => ({
    ...wallet,
    token: (await call(running.base, 'POST', '/wallet/sessions', { name: 'bench', ...body }, wallet.token)).token as string,
  }))
}

async function keyLimits(storage: 'sqlite' | 'postgres', server: BenchPostgres | undefined): Promise<void> {
  const running = await startRunning(storage, server, 'keylimits')
  const plain = { ...running, wallets: await walletKeys(running, { scopes: ['read', 'send'] }) }
  const limits = {
    per_transfer: { gold: 1_000 },
    per_day: { gold: 100_000_000 },
    recipients: running.wallets.map((wallet) => wallet.walletId),
  }
  const limited = { ...running, wallets: await walletKeys(running, { scopes: ['read', 'send'], limits }) }
  const ratio = await alternate(
    'a key without limits',
    () => transfers(plain),
    'a key with every limit',
    () => transfers(limited),
  )
  log(`a key's limits cost a transfer ${fixed((1 / ratio - 1) * 100, 1)} % more (target ≤ 10 %)`)
}

const SCENARIOS: Record<string, (storage: 'sqlite' | 'postgres', server: BenchPostgres | undefined) => Promise<void>> = {
  journal,
  'journal-upgrade': journalUpgrade,
  schedules,
  monitors,
  expiry,
  'key-limits': keyLimits,
}

for (const storage of storages) {
  cleanups = benchCleanups()
  try {
    const server = storage === 'postgres' ? await startPostgres() : undefined
    if (server) cleanups.push(() => server.stop())
    for (const name of names) {
      tag = `${name} ${storage}`
      console.log(
        `\n[${tag}] load average ${os
          .loadavg()
          .map((value) => value.toFixed(1))
          .join(' ')}`,
      )
      await SCENARIOS[name](storage, server)
    }
  } finally {
    await cleanups.cleanUp()
  }
}
