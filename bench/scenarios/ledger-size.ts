/**
 * A ledger grown to ten million transactions, measured as it grows (`npm run bench -- ledger-size
 * [--transactions=N] [--checkpoints=a,b,…] [--storage=sqlite|postgres] [--seed=api|direct]
 * [--connections=N] [--pipelining=N] [--start-timeout=S] [--no-backup] [--keep] [--out=DIR]
 * [--replot=a.json,b.json]`).
 *
 * For each storage: the service as a child process on a fresh store, 100 wallets with a key each
 * (through the API), then the ledger is built in steps of 100 transactions: atomic batches of 100
 * transfers to random wallets, one in ten sent by the busy wallet, and after every 99 batches one
 * issuance of 1 gold to every wallet. `--seed=api` (the default) sends every step from outside
 * through the API: `POST /wallet/transactions/batch` by key with an Idempotency-Key, and
 * `POST /issuances`, over `--connections` (32) connections with `--pipelining` (1) requests each,
 * and prints the bench's and the service's CPU per transaction. `--seed=direct` stops the service,
 * writes the same steps in process as the rows the write path writes for them (`writeStepsDirectly`:
 * no events, no idempotency rows), positions them with the journal's own sequencer in process, then
 * starts the service again (timed: the start on a store of that size).
 * At each checkpoint (10,000, 100,000, 1,000,000, 10,000,000 transactions, as far as
 * `--transactions`, 10 million by default) it measures, with no other load:
 * - `coffer verify` as a user runs it (the CLI: the ledger, then the journal), first, so that
 *   nothing is measured on a ledger that does not verify (transactions/s);
 * - the busy wallet's history page, first and deep (before its 100th transaction), its balances,
 *   and its balances `as_of` the start of the build: the median of 50 requests each;
 * - the busy wallet's whole CSV statement (once);
 * - the retention job as 31 days later (events pruned, idempotency keys expired), then `coffer
 *   backup` of the live store and `coffer restore` into an empty one, each timed; the restored
 *   store is a compact copy, so its size is the store's size per transfer once retention has run.
 *   `--no-backup` leaves backup and restore out (hours at ten million) and sizes the live store.
 * `coffer verify` is logged with its CPU (the CLI's, and on PostgreSQL the server's) and the load.
 * `--keep` leaves the store (and the PostgreSQL server's directory) on disk and describes it in
 * `ledger-size-store-<storage>.json` in `--out`: `bench/experiments/ledger-reads.ts` measures the
 * reads of two stores so kept taking turns (ten million against ten thousand, on one load).
 * Writes the table as markdown and a plot of each read's cost against the first checkpoint's, by
 * ledger size (`ledger-size.md`, `ledger-size.svg` in `--out`, a temp directory by default), and
 * the figures as `ledger-size.json`; `--replot` writes the table and plot again from such files
 * (runs of each storage taken apart, in one plot), measuring nothing.
 */
import { spawn } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { sql } from 'kysely'
import { Pool } from 'undici'
import { loadConfig } from '../../src/config.ts'
import { openDatabase, type Database } from '../../src/db/database.ts'
import { createToken } from '../../src/http/tokens.ts'
import { backupCommand, restoreCommand } from '../../src/operations/commands.ts'
import { pruneOnce } from '../../src/operations/retention.ts'
import { benchCleanups } from '../cleanups.ts'
import { runStatement } from '../../scripts/lib/postgres.ts'
import { processTreeCpuMs } from '../cpu.ts'
import type { KeptStore } from '../kept-store.ts'
import { startPostgres, type BenchPostgres } from '../postgres.ts'
import { ledgerStep, seedKeyedWallets, seedThroughApi, writeStepsDirectly } from '../seed.ts'
import { startService, type Service } from '../service.ts'
import { plotSvg } from '../plot.ts'

const args = process.argv.slice(2)
const option = (name: string) => args.find((arg) => arg.startsWith(`--${name}=`))?.slice(name.length + 3)
const storageArg = option('storage')
const storages = (storageArg ? [storageArg] : ['sqlite', 'postgres']) as ('sqlite' | 'postgres')[]
const TRANSACTIONS = Number(option('transactions') ?? 10_000_000)
if (!Number.isInteger(TRANSACTIONS) || TRANSACTIONS < 1000) throw new Error('--transactions: a whole number, 1,000 or more')
const CHECKPOINTS = (option('checkpoints')?.split(',').map(Number) ?? [10_000, 100_000, 1_000_000, 10_000_000])
  .filter((count) => count < TRANSACTIONS)
  .concat(TRANSACTIONS)
const OUT = option('out') ?? fs.mkdtempSync(path.join(os.tmpdir(), 'coffer-ledger-size-'))
const SEED = option('seed') ?? 'api'
if (SEED !== 'api' && SEED !== 'direct') throw new Error('--seed: api or direct')
const CONNECTIONS = Number(option('connections') ?? 32)
const PIPELINING = Number(option('pipelining') ?? 1)
const BACKUP = !args.includes('--no-backup')
const KEEP = args.includes('--keep')
const START_TIMEOUT_MS = Number(option('start-timeout') ?? process.env.BENCH_START_TIMEOUT ?? 600) * 1000
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..')
const WALLETS = 100
/** Transactions per step of the build: a batch of 100 transfers, or an issuance to each of the 100 wallets. */
const STEP = 100
const REPEATS = 50
/** The targets at the largest checkpoint. */
const TARGETS = { readGrowth: 1.5, verifyPerSecond: 100_000, backupSeconds: 600, restoreSeconds: 600, sqliteBytesPerTransfer: 600 }

const cleanups = benchCleanups()
const started = Date.now()
const log = (message: string) => console.error(`[${((Date.now() - started) / 1000).toFixed(0).padStart(4)} s] ${message}`)

interface Checkpoint {
  transactions: number
  /** Seconds the service took to answer /healthz after the direct writes (none for `--seed=api`). */
  startSeconds?: number
  /** Median ms of each read. */
  historyFirst: number
  historyDeep: number
  balance: number
  asOf: number
  statementMs: number
  statementRows: number
  verifyPerSecond: number
  /** `coffer verify`'s CPU µs a transaction: the CLI's, and the PostgreSQL server's; the load average at its end. */
  verifyCpu?: { process: number; server?: number; load: number }
  /** Absent with `--no-backup`. */
  backupSeconds?: number
  restoreSeconds?: number
  bytesPerTransaction: number
  /** With `--no-backup`: the live store's size after retention, not a compact copy's. */
  bytesOfLiveStore?: boolean
}

/** Answers `503 S001` the client retried, as the contract asks (same Idempotency-Key): counted and reported, never hidden. */
let unavailable = 0
const RETRIES = 20

/** The service's connections: `--connections` of them, `--pipelining` requests in flight on each. */
let client: Pool | undefined
const clientOf = (base: string) => {
  if (client && (client as Pool & { base?: string }).base === base) return client
  void client?.close()
  client = Object.assign(new Pool(base, { connections: CONNECTIONS, pipelining: PIPELINING }), { base })
  return client
}

async function call(base: string, method: 'GET' | 'POST', url: string, token: string, body?: unknown, key?: string): Promise<string> {
  const headers: Record<string, string> = { authorization: `Bearer ${token}` }
  if (body !== undefined) headers['content-type'] = 'application/json'
  if (key) headers['idempotency-key'] = key
  const payload = body === undefined ? undefined : JSON.stringify(body)
  for (let attempt = 0; ; attempt++) {
    const response = await clientOf(base).request({ path: url, method, headers, body: payload })
    const text = await response.body.text()
    if (response.statusCode === 503 && attempt < RETRIES) {
      unavailable += 1
      log(`${method} ${url}: 503 ${text.slice(0, 200)}; retrying (${unavailable} so far)`)
      await new Promise((resolve) => setTimeout(resolve, Number(response.headers['retry-after'] ?? 1) * 1000))
      continue
    }
    if (response.statusCode >= 300) throw new Error(`${method} ${url}: ${response.statusCode} ${text.slice(0, 500)}`)
    return text
  }
}

/**
 * The causes of the service's `503 S001` answers in its log (it names each one: the storage's
 * error code and message), counted, so that a storage refusing under load is reported, not hidden.
 */
function reportUnavailable(storage: string, logFile: string): void {
  const causes = new Map<string, number>()
  const lines = fs.existsSync(logFile) ? fs.readFileSync(logFile, 'utf8').split('\n') : []
  for (const line of lines) {
    const cause = /"msg":"(storage unavailable: [^"]*)"/.exec(line)?.[1]
    if (cause) causes.set(cause, (causes.get(cause) ?? 0) + 1)
  }
  log(`${storage}: ${unavailable} answers 503 retried by the bench; the service logged ${causes.size === 0 ? 'no storage faults' : ''}`)
  for (const [cause, times] of causes) log(`${storage}:   ${times} × ${cause}`)
}

/** User and system CPU seconds of a process so far (Linux `/proc`). */
function cpuSeconds(pid: number): number {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ')
  return (Number(fields[11]) + Number(fields[12])) / 100
}

/** CPU ms of this process's children that have exited and been waited for (`cutime` + `cstime`). */
function childrenCpuMs(): number {
  const text = fs.readFileSync('/proc/self/stat', 'utf8')
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ')
  return (Number(fields[13]) + Number(fields[14])) * 10
}

/** `coffer verify` as a user runs it (the CLI on the store): its exit status, output, seconds and CPU ms (its own, from our `cutime`). */
function cofferVerify(env: Record<string, string>): Promise<{ code: number; output: string; seconds: number; cpuMs: number }> {
  const at = performance.now()
  const childrenAt = childrenCpuMs()
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [path.join(ROOT, 'bin/coffer.js'), 'verify'], {
      env: { ...process.env, ...env, LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    if (child.pid) cleanups.track(child.pid)
    let output = ''
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()))
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()))
    child.on('exit', (code) =>
      resolve({ code: code ?? 1, output, seconds: (performance.now() - at) / 1000, cpuMs: childrenCpuMs() - childrenAt }),
    )
  })
}

async function median(repeats: number, work: () => Promise<unknown>): Promise<number> {
  const times: number[] = []
  for (let i = 0; i < repeats; i++) {
    const at = performance.now()
    await work()
    times.push(performance.now() - at)
  }
  times.sort((a, b) => a - b)
  return times[Math.floor(times.length / 2)]
}

async function storeSize(database: Database): Promise<number> {
  if (database.dialect === 'postgres')
    return Number((await sql<{ size: string }>`select pg_database_size(current_database()) as size`.execute(database.db)).rows[0].size)
  await sql`pragma wal_checkpoint(truncate)`.execute(database.db)
  const { rows } = await sql<{
    pages: number
    size: number
  }>`select page_count as pages, page_size as size from pragma_page_count(), pragma_page_size()`.execute(database.db)
  return rows[0].pages * rows[0].size
}

async function runStorage(storage: 'sqlite' | 'postgres'): Promise<Checkpoint[]> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), `coffer-bench-ledger-${storage}-`))
  if (!KEEP) cleanups.push(async () => fs.rmSync(dataDir, { recursive: true, force: true }))
  let server: BenchPostgres | undefined
  let databaseUrl: string | undefined
  if (storage === 'postgres') {
    log('postgres: starting an embedded server')
    server = await startPostgres({ keep: KEEP })
    cleanups.push(() => (server as BenchPostgres).stop())
    databaseUrl = await server.createDatabase('coffer')
  }
  const adminKey = createToken('admin')
  const startOptions = { dataDir, databaseUrl, adminKey, startTimeoutMs: START_TIMEOUT_MS }
  let service: Service | undefined = await startService(startOptions, cleanups.track)
  cleanups.push(async () => service?.stop())
  // Read before the store goes, however the run ends.
  cleanups.push(async () => reportUnavailable(storage, service?.logFile ?? path.join(dataDir, 'service.log')))
  let base = service.url
  log(`${storage}: seeding ${WALLETS} wallets with a key each through the API`)
  const seeded = await seedThroughApi(base, adminKey, WALLETS)
  const keyed = await seedKeyedWallets(base, adminKey, seeded, seeded.traders, 1)
  const wallets = keyed.wallets
  const busy = wallets[0]
  const store = openDatabase({ databaseUrl, dataDir })
  cleanups.push(() => store.close())
  const count = async () =>
    Number(
      (
        await store.db
          .selectFrom('transactions')
          .select((eb) => eb.fn.countAll<number>().as('n'))
          .executeTakeFirstOrThrow()
      ).n,
    )
  const walletIds = wallets.map((wallet) => wallet.walletId)

  let step = 0
  /** One request of the build through the API: the step's batch by its sender's key, or its issuance. */
  const sendStep = async () => {
    const index = step++
    const next = ledgerStep(index, walletIds.length)
    if (next.kind === 'issuance') {
      const entries = wallets.map((wallet) => ({ wallet_id: wallet.walletId, quantity: 1 }))
      await call(base, 'POST', '/issuances', adminKey, { asset_id: seeded.asset.id, entries })
      return
    }
    const transfers = next.recipients.map((recipient) => ({ recipient: String(walletIds[recipient]), type: 2, assets: { gold: 1 } }))
    await call(base, 'POST', '/wallet/transactions/batch', wallets[next.sender].key, { transfers, atomic: true }, `build-${index}`)
  }
  let built = await count()
  let startSeconds: number | undefined
  const buildThroughApi = async (until: number) => {
    const live = service as Service
    const [ownAt, serviceAt] = [process.cpuUsage(), cpuSeconds(live.pid)]
    let planned = built
    let reported = built
    const worker = async () => {
      while (planned < until) {
        planned += STEP
        await sendStep()
        built += STEP
        if (Math.floor(built / 1_000_000) > Math.floor(reported / 1_000_000)) log(`${storage}:   ${(reported = built)} transactions`)
      }
    }
    await Promise.all(Array.from({ length: CONNECTIONS * PIPELINING }, worker))
    const own = process.cpuUsage(ownAt)
    return { ownCpu: (own.user + own.system) / 1e6, serviceCpu: cpuSeconds(live.pid) - serviceAt }
  }
  /** The same steps in process through the ledger's write path, the service stopped, then started again on the store. */
  const buildDirectly = async (until: number) => {
    await service?.stop()
    service = undefined
    const ownAt = process.cpuUsage()
    const steps = Math.ceil((until - built) / STEP)
    await writeStepsDirectly(store, {
      walletIds,
      assetId: seeded.asset.id,
      first: step,
      steps,
      dataDir,
      onProgress: (message) => log(`${storage}:   ${message}`),
    })
    step += steps
    const ownCpu = process.cpuUsage(ownAt)
    const at = performance.now()
    service = await startService(startOptions, cleanups.track)
    startSeconds = (performance.now() - at) / 1000
    base = service.url
    log(`${storage}: the service answered /healthz ${startSeconds.toFixed(1)} s after it was started on the store`)
    return { ownCpu: (ownCpu.user + ownCpu.system) / 1e6, serviceCpu: 0 }
  }
  const build = async (until: number) => {
    const at = Date.now()
    const from = built
    const cpu = SEED === 'direct' ? await buildDirectly(until) : await buildThroughApi(until)
    built = await count()
    const seconds = (Date.now() - at) / 1000
    const perTransaction = (cpuSecondsUsed: number) => ((cpuSecondsUsed / (built - from)) * 1e6).toFixed(0)
    log(
      `${storage}: built to ${built} transactions (${((built - from) / seconds).toFixed(0)}/s ${SEED === 'direct' ? 'directly, with the start' : 'through the API'}; ` +
        `CPU per transaction: the bench ${perTransaction(cpu.ownCpu)} µs, the service ${perTransaction(cpu.serviceCpu)} µs; ` +
        `load average ${os.loadavg()[0].toFixed(1)})`,
    )
    // Every transaction positioned in the journal before anything is measured (after direct writes the service does it at start).
    const positionedAt = performance.now()
    for (;;) {
      const page = JSON.parse(await call(base, 'GET', `/admin/journal?after=${built - 1}&limit=1`, adminKey)) as { entries: unknown[] }
      if (page.entries.length > 0) break
      await new Promise((resolve) => setTimeout(resolve, 500))
    }
    log(`${storage}: the journal positioned the history ${((performance.now() - positionedAt) / 1000).toFixed(1)} s later`)
  }

  // The start of the build: `as_of` looks back to it, and the deep history page starts before the busy wallet's 100th transaction.
  await build(Math.min(2_000, CHECKPOINTS[0]))
  const asOf = new Date().toISOString()
  await new Promise((resolve) => setTimeout(resolve, 10))
  const early = JSON.parse(await call(base, 'GET', '/wallet/transactions?limit=100', busy.key)) as { id: number }[]
  const deepBefore = early[early.length - 1].id
  /** With `--keep`: what another run needs to use the store, written again at each checkpoint (a run stopped midway leaves the last). */
  const describeKept = () => {
    if (!KEEP) return
    const kept: KeptStore = {
      storage,
      transactions: built,
      dataDir,
      postgresDir: server?.databaseDir,
      database: server ? 'coffer' : undefined,
      adminKey,
      busyKey: busy.key,
      deepBefore,
      asOf,
    }
    const file = path.join(OUT, `ledger-size-store-${storage}.json`)
    fs.mkdirSync(OUT, { recursive: true })
    fs.writeFileSync(file, JSON.stringify(kept, null, 1) + '\n')
    log(`${storage}: the store is kept (${dataDir}${server ? `, the server's directory ${server.databaseDir}` : ''}), described in ${file}`)
  }
  describeKept()

  /** `coffer backup` of the live store and `coffer restore` into an empty one, timed; the restored (compact) store's size. */
  const backupAndRestore = async (target: number) => {
    const config = loadConfig({ DATA_DIR: dataDir, DATABASE_URL: databaseUrl, ADMIN_API_KEY: adminKey, LOG_LEVEL: 'silent' })
    const file = path.join(dataDir, `backup-${target}`)
    let at = performance.now()
    await backupCommand(config, file)
    const backupSeconds = (performance.now() - at) / 1000
    const restoreDir = path.join(dataDir, `restore-${target}`)
    fs.mkdirSync(restoreDir)
    const restoreUrl = server ? await server.createDatabase(`restore${target}`) : undefined
    at = performance.now()
    await restoreCommand(loadConfig({ DATA_DIR: restoreDir, DATABASE_URL: restoreUrl, ADMIN_API_KEY: adminKey, LOG_LEVEL: 'silent' }), file)
    const restoreSeconds = (performance.now() - at) / 1000
    const restored = openDatabase({ databaseUrl: restoreUrl, dataDir: restoreDir })
    const bytes = await storeSize(restored).finally(() => restored.close())
    fs.rmSync(file, { force: true })
    fs.rmSync(restoreDir, { recursive: true, force: true })
    // The copy goes, so that it takes no disk beside a ten-million store and a kept server holds only the store.
    if (server) await runStatement(server.url('postgres'), `drop database restore${target}`)
    return { backupSeconds, restoreSeconds, bytes }
  }

  const checkpoints: Checkpoint[] = []
  for (const target of CHECKPOINTS) {
    startSeconds = undefined
    await build(target)
    const serverAt = server ? processTreeCpuMs(server.pid) : NaN
    const verified = await cofferVerify({ DATA_DIR: dataDir, DATABASE_URL: databaseUrl ?? '', ADMIN_API_KEY: adminKey })
    if (verified.code !== 0) throw new Error(`coffer verify failed at ${built}:\n${verified.output.slice(-3000)}`)
    const verifyCpu = {
      process: (verified.cpuMs * 1000) / built,
      server: server ? ((processTreeCpuMs(server.pid) - serverAt) * 1000) / built : undefined,
      load: os.loadavg()[0],
    }
    log(
      `${storage}: coffer verify passed over ${built} transactions in ${verified.seconds.toFixed(1)} s (${(built / verified.seconds).toFixed(0)}/s; ` +
        `CPU a transaction: the CLI ${verifyCpu.process.toFixed(1)} µs${server ? `, the server ${verifyCpu.server?.toFixed(1)} µs` : ''}; ` +
        `load average ${verifyCpu.load.toFixed(1)})`,
    )
    const historyFirst = await median(REPEATS, () => call(base, 'GET', '/wallet/transactions?limit=10', busy.key))
    const historyDeep = await median(REPEATS, () => call(base, 'GET', `/wallet/transactions?limit=10&before=${deepBefore}`, busy.key))
    const balance = await median(REPEATS, () => call(base, 'GET', '/wallet/assets', busy.key))
    const balanceAsOf = await median(REPEATS, () => call(base, 'GET', `/wallet/assets?as_of=${encodeURIComponent(asOf)}`, busy.key))
    let statementRows = 0
    const statementMs = await median(1, async () => {
      statementRows = (await call(base, 'GET', '/wallet/transactions?format=csv', busy.key)).split('\n').filter(Boolean).length - 1
    })
    const config = loadConfig({ DATA_DIR: dataDir, DATABASE_URL: databaseUrl, ADMIN_API_KEY: adminKey, LOG_LEVEL: 'silent' })
    // The retention job as 31 days later: events past retention and expired idempotency keys go.
    const pruned = await pruneOnce(
      store,
      {
        eventRetentionDays: config.eventRetentionDays,
        idempotencyRetentionHours: config.idempotencyRetentionHours,
        sessionIdleDays: 0,
      },
      Date.now() + 31 * 86_400_000,
    )
    const copied: { backupSeconds?: number; restoreSeconds?: number; bytes: number } = BACKUP
      ? await backupAndRestore(target)
      : { bytes: await storeSize(store) }
    const checkpoint: Checkpoint = {
      transactions: built,
      startSeconds,
      historyFirst,
      historyDeep,
      balance,
      asOf: balanceAsOf,
      statementMs,
      statementRows,
      verifyPerSecond: built / verified.seconds,
      verifyCpu,
      backupSeconds: copied.backupSeconds,
      restoreSeconds: copied.restoreSeconds,
      bytesPerTransaction: copied.bytes / built,
      bytesOfLiveStore: BACKUP ? undefined : true,
    }
    checkpoints.push(checkpoint)
    describeKept()
    log(`${storage}: at ${built}: ${JSON.stringify({ ...checkpoint, pruned })}`)
  }
  await service?.stop()
  service = undefined
  await client?.close()
  client = undefined
  return checkpoints
}

const ms = (value: number) => value.toFixed(value < 10 ? 2 : 0)
const thousands = (value: number) => Math.round(value).toLocaleString('en')

function markdown(storage: string, checkpoints: Checkpoint[]): string[] {
  const first = checkpoints[0]
  const growth = (checkpoint: Checkpoint, key: 'historyFirst' | 'historyDeep' | 'balance' | 'asOf') =>
    `${ms(checkpoint[key])} (${(checkpoint[key] / first[key]).toFixed(2)} ×)`
  return [
    `| ${storage}: transactions | history page, first, ms | history page, deep, ms | balances, ms | as_of, ms | statement of the busy wallet | coffer verify, transactions/s | backup, s | restore, s | bytes per transaction after retention | the service's start on the store, s |`,
    '|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
    ...checkpoints.map(
      (checkpoint) =>
        `| ${thousands(checkpoint.transactions)} | ${growth(checkpoint, 'historyFirst')} | ${growth(checkpoint, 'historyDeep')} | ${growth(checkpoint, 'balance')} | ${growth(checkpoint, 'asOf')} | ${thousands(checkpoint.statementRows)} rows in ${(checkpoint.statementMs / 1000).toFixed(1)} s | ${thousands(checkpoint.verifyPerSecond)} | ${checkpoint.backupSeconds?.toFixed(1) ?? '–'} | ${checkpoint.restoreSeconds?.toFixed(1) ?? '–'} | ${thousands(checkpoint.bytesPerTransaction)}${checkpoint.bytesOfLiveStore ? ' (live store)' : ''} | ${checkpoint.startSeconds?.toFixed(1) ?? '–'} |`,
    ),
  ]
}

function targets(storage: 'sqlite' | 'postgres', checkpoints: Checkpoint[]): string[] {
  const [first, last] = [checkpoints[0], checkpoints[checkpoints.length - 1]]
  const rows: [string, string, string, boolean][] = []
  for (const key of ['historyFirst', 'historyDeep', 'balance', 'asOf'] as const) {
    const growth = last[key] / first[key]
    rows.push([
      `${key} at ${thousands(last.transactions)} ÷ at ${thousands(first.transactions)}`,
      growth.toFixed(2),
      `≤ ${TARGETS.readGrowth}`,
      growth <= TARGETS.readGrowth,
    ])
  }
  rows.push([
    'coffer verify, transactions/s',
    thousands(last.verifyPerSecond),
    `≥ ${thousands(TARGETS.verifyPerSecond)}`,
    last.verifyPerSecond >= TARGETS.verifyPerSecond,
  ])
  if (last.backupSeconds !== undefined && last.restoreSeconds !== undefined) {
    rows.push(['backup, s', last.backupSeconds.toFixed(1), `≤ ${TARGETS.backupSeconds}`, last.backupSeconds <= TARGETS.backupSeconds])
    rows.push(['restore, s', last.restoreSeconds.toFixed(1), `≤ ${TARGETS.restoreSeconds}`, last.restoreSeconds <= TARGETS.restoreSeconds])
  }
  if (storage === 'sqlite')
    rows.push([
      'bytes per transaction after retention',
      thousands(last.bytesPerTransaction),
      `≤ ${TARGETS.sqliteBytesPerTransfer}`,
      last.bytesPerTransaction <= TARGETS.sqliteBytesPerTransfer,
    ])
  return rows.map(([name, value, target, ok]) => `${storage}: ${name}: ${value} (target ${target}: ${ok ? 'met' : 'MISSED'})`)
}

interface Run {
  storage: 'sqlite' | 'postgres'
  /** How the run was taken: cores, node, load average at its start, how the ledger was built. */
  stamp: string
  load: number
  checkpoints: Checkpoint[]
}

/** `ledger-size.md`, `ledger-size.svg` and `ledger-size.json` (the runs, for `--replot`) in OUT. */
function writeOutputs(runs: Run[]): string[] {
  const busy = 'A busy machine: these figures only show that the scenario runs; they are not results.'
  const lines: string[] = []
  for (const run of runs) lines.push(`Ledger size, ${run.storage}: ${run.stamp}.${run.load >= 2 ? ` ${busy}` : ''}`, '')
  for (const run of runs) lines.push(...markdown(run.storage, run.checkpoints), '')
  for (const run of runs) lines.push(...targets(run.storage, run.checkpoints))
  fs.mkdirSync(OUT, { recursive: true })
  fs.writeFileSync(path.join(OUT, 'ledger-size.md'), lines.join('\n') + '\n')
  fs.writeFileSync(path.join(OUT, 'ledger-size.json'), JSON.stringify(runs, null, 1) + '\n')
  const series = runs.flatMap((run) =>
    (['historyFirst', 'historyDeep', 'balance', 'asOf'] as const).map((key, colour) => ({
      colour,
      name: `${run.storage}: ${{ historyFirst: 'history page, first', historyDeep: 'history page, deep', balance: 'balances', asOf: 'as_of' }[key]}`,
      dashed: run.storage === 'postgres',
      points: run.checkpoints.map((checkpoint) => ({ x: checkpoint.transactions, y: checkpoint[key] / run.checkpoints[0][key] })),
    })),
  )
  const loads = runs.map((run) => run.load.toFixed(1)).join(', ')
  fs.writeFileSync(
    path.join(OUT, 'ledger-size.svg'),
    plotSvg({
      title: `Cost of a read against the ledger's size (× its cost at ${thousands(runs[0].checkpoints[0].transactions)})`,
      subtitle: `${runs.map((run) => run.storage).join(', ')}: ${runs[0].stamp.replace(/load average [^,]*/, `load average ${loads}`)}`,
      note: runs.some((run) => run.load >= 2) ? busy : undefined,
      xLabel: 'transactions in the ledger',
      yLabel: '× cost at the first checkpoint',
      target: { y: TARGETS.readGrowth, label: `target ${TARGETS.readGrowth} ×` },
      series,
    }),
  )
  return lines
}

let failed = false
try {
  const replot = option('replot')
  let runs: Run[] = []
  if (replot) {
    // The outputs again from the `ledger-size.json` of earlier runs (one per storage, say), nothing measured.
    runs = replot.split(',').flatMap((file) => JSON.parse(fs.readFileSync(file, 'utf8')) as Run[])
  } else {
    const built = SEED === 'direct' ? 'written directly (--seed=direct)' : 'built through the API'
    for (const storage of storages) {
      const load = os.loadavg()[0]
      const stamp = `${os.cpus().length} cores, node ${process.version}, load average ${load.toFixed(1)} at the start, the ledger ${built}`
      runs.push({ storage, stamp, load, checkpoints: await runStorage(storage) })
    }
  }
  const lines = writeOutputs(runs)
  console.log(lines.join('\n'))
  console.log(`\nwritten: ${['md', 'svg', 'json'].map((kind) => path.join(OUT, `ledger-size.${kind}`)).join(', ')}`)
} catch (error) {
  failed = true
  if (!cleanups.interrupted) console.error('bench failed:', error instanceof Error ? (error.stack ?? error.message) : error)
} finally {
  await cleanups.cleanUp()
}
process.exit(cleanups.interrupted ? 130 : failed ? 1 : 0)
