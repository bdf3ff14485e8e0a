/**
 * Bulk transfers beside the storage's own speed, in one run (`npm run bench -- bulk
 * [--storage=sqlite|postgres] [--seconds=N] [--connections=N] [--rounds=N] [--root=DIR]`).
 *
 * For each storage: the service as a child process on a fresh store, 100 wallets with a key each
 * (seeded through the API), then, back to back on the same moment of the machine:
 * - Coffer's batch route: atomic batches of 100 transfers of 1 gold from a wallet by its key to
 *   wallets by id at random (`POST /wallet/transactions/batch`), 32 connections;
 * - the references: on SQLite the in-process better-sqlite3 loop with 100 transfers (debit, credit,
 *   journal row) per durable commit (`references.ts`); on PostgreSQL pgbench on the same server,
 *   100 such transfers per transaction one statement at a time, and set-based (one statement per
 *   table for the 100), 32 clients (`postgres.ts`);
 * - single transfers by key (`POST /wallet/transactions`), 32 connections.
 * Beside the batch route, one reader asks for a wallet's history page every 20 ms: how long a read
 * waits behind the commits (on SQLite they hold the service's one thread).
 * Prints transfers/s, p50 and p99 per batch and per read, the ratios against their targets, and
 * `coffer verify`.
 * `--rounds=N` (1): the batch route and the references N times in turn, each round's ratios and
 * their medians (the references vary from run to run as much as the route does).
 *
 * `--root=DIR`: the service from another checkout (a build to compare with, run in turns with this one).
 *
 * `--profile`: the batch route alone, with the service under `node --cpu-prof`; prints what the
 * service spends per transfer, by package or `src/` folder and by function (self time).
 */
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { openDatabase } from '../../src/db/database.ts'
import { createToken } from '../../src/http/tokens.ts'
import { verifyLedger } from '../../src/ledger/verify.ts'
import { benchCleanups } from '../cleanups.ts'
import { median, runLoad, type LoadJob, type LoadResult } from '../load.ts'
import { mainThreadProfile, summariseProfile } from '../profile.ts'
import { initTransferTables, runPgbenchScript, startPostgres, transferScript, type BenchPostgres } from '../postgres.ts'
import { runSqliteBatchedLoop } from '../references.ts'
import { call, seedKeyedWallets, seedThroughApi } from '../seed.ts'
import { startService } from '../service.ts'
import { percentile } from '../webhooks.ts'

const args = process.argv.slice(2)
const option = (name: string) => args.find((arg) => arg.startsWith(`--${name}=`))?.slice(name.length + 3)
const storageArg = option('storage')
const storages = (storageArg ? [storageArg] : ['sqlite', 'postgres']) as ('sqlite' | 'postgres')[]
const SECONDS = Number(option('seconds') ?? 10)
const CONNECTIONS = Number(option('connections') ?? 32)
const PROFILE = args.includes('--profile')
const ROOT = option('root')
const ROUNDS = Number(option('rounds') ?? 1)
const WALLETS = 100
const BATCH = 100
/** The targets: the batch route against each reference, and a batch's p99. */
const TARGETS = { sqliteLoop: 0.4, pgbenchBatched: 2, pgbenchSetBased: 0.5, batchP99Ms: 100 }

const cleanups = benchCleanups()
const started = Date.now()
const log = (message: string) => console.error(`[${((Date.now() - started) / 1000).toFixed(0).padStart(3)} s] ${message}`)

interface Row {
  name: string
  /** None for the row of reads. */
  transfersPerSecond?: number
  p50?: number
  p99?: number
  detail: string
}

/** A reference's row: always a rate, which the ratios divide by. */
type Reference = Row & { transfersPerSecond: number }

async function runStorage(storage: 'sqlite' | 'postgres'): Promise<string[]> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), `coffer-bench-bulk-${storage}-`))
  cleanups.push(async () => fs.rmSync(dataDir, { recursive: true, force: true }))
  let server: BenchPostgres | undefined
  let databaseUrl: string | undefined
  if (storage === 'postgres') {
    log('postgres: starting an embedded server')
    server = await startPostgres()
    cleanups.push(() => (server as BenchPostgres).stop())
    databaseUrl = await server.createDatabase('coffer')
    await server.createDatabase('reference')
    await initTransferTables(server, 'reference')
  }
  const adminKey = createToken('admin')
  // Kept after the run, for a closer look (Chrome DevTools, or `npx tsx bench/profile.ts <file>`).
  const profileDir = PROFILE ? fs.mkdtempSync(path.join(os.tmpdir(), `coffer-bench-bulk-profile-${storage}-`)) : undefined
  const spawned = Date.now()
  const service = await startService({ dataDir, databaseUrl, adminKey, profileDir, root: ROOT }, cleanups.track)
  let stopService = service.stop
  cleanups.push(() => stopService())
  log(`${storage}: seeding ${WALLETS} wallets with a key each through the API`)
  const seeded = await seedThroughApi(service.url, adminKey, WALLETS)
  const keyed = await seedKeyedWallets(service.url, adminKey, seeded, seeded.traders, 1)
  const senders = keyed.wallets.map((wallet) => ({ token: wallet.key, name: String(wallet.walletId) }))
  const base = {
    url: service.url,
    connections: CONNECTIONS,
    senders,
    recipients: senders.map((sender) => sender.name),
    recipientType: 2 as const,
  }

  const warmUp = async (job: Omit<LoadJob, 'seconds'>) => {
    await runLoad({ ...job, seconds: 2 })
    // The warm-up's requests still in flight (a batch or a transfer a connection) are answered first.
    await sleep(1_000)
  }
  const measure = async (job: Omit<LoadJob, 'seconds'>): Promise<LoadResult> => {
    await warmUp(job)
    return runLoad({ ...job, seconds: SECONDS })
  }
  const rows: Row[] = []
  if (profileDir) {
    const skipMs = Date.now() - spawned
    const result = await runLoad({ ...base, kind: 'batch', batchSize: BATCH, seconds: SECONDS })
    await service.stop()
    stopService = async () => {}
    await server?.stop()
    const file = mainThreadProfile(profileDir)
    if (!file) throw new Error(`no CPU profile in ${profileDir}`)
    return profileReport(storage, file, skipMs, result)
  }
  const errors = (result: LoadResult) => result.non2xx + result.socketErrors + result.timeouts
  const rounds: { batches: LoadResult; reads: number[]; references: Reference[] }[] = []
  for (let round = 0; round < ROUNDS; round++) {
    const job = { ...base, kind: 'batch' as const, batchSize: BATCH }
    await warmUp(job)
    const reader = readPages(service.url, senders[0].token)
    const batches = await runLoad({ ...job, seconds: SECONDS })
    const reads = await reader.stop()
    log(`${storage}: batch route ${(batches.okPerSecond * BATCH).toFixed(0)} transfers/s, p99 ${batches.p99.toFixed(1)} ms per batch`)
    const references = await measureReferences(dataDir, server)
    for (const reference of references) log(`${storage}: ${reference.name}: ${reference.transfersPerSecond.toFixed(0)} transfers/s`)
    rounds.push({ batches, reads, references })
  }
  // The tables show the last round; every round's ratios follow them.
  const { batches, reads, references } = rounds[rounds.length - 1]
  rows.push({
    name: `Coffer batch route, atomic batches of ${BATCH}`,
    transfersPerSecond: batches.okPerSecond * BATCH,
    p50: batches.p50,
    p99: batches.p99,
    detail: `${batches.okPerSecond.toFixed(1)} batches/s, ${errors(batches)} errors`,
  })
  rows.push({
    name: '  beside it, a history page every 20 ms',
    p50: percentile(reads, 0.5),
    p99: percentile(reads, 0.99),
    detail: `${reads.length} pages, longest ${Math.max(...reads).toFixed(1)} ms`,
  })
  rows.push(...references)

  const single = await measure({ ...base, kind: 'transfer' })
  rows.push({
    name: 'Coffer single transfers',
    transfersPerSecond: single.okPerSecond,
    p50: single.p50,
    p99: single.p99,
    detail: `${errors(single)} errors`,
  })
  await service.stop()
  stopService = async () => {}
  // Another checkout's store has its own schema: this checkout's `verifyLedger` checks only its own.
  const database = ROOT ? undefined : openDatabase({ databaseUrl, dataDir })
  const report = database && (await verifyLedger(database.db).finally(() => database.close()))
  await server?.stop()

  const ms = (value: number | undefined) => (value === undefined ? '' : `${value.toFixed(1)} ms`)
  const out = [
    '',
    `== ${storage}: ${WALLETS} wallets by key, ${CONNECTIONS} connections, ${SECONDS} s each ==`,
    table([
      ['', 'transfers/s', 'p50', 'p99', ''],
      ...rows.map((row) => [row.name, row.transfersPerSecond?.toFixed(0) ?? '', ms(row.p50), ms(row.p99), row.detail]),
    ]),
    '',
  ]
  const ratios: string[][] = [['ratio', 'value', 'target', ROUNDS > 1 ? `each of ${ROUNDS} rounds` : '']]
  // With several rounds, the median of the rounds' ratios, each round's beside it.
  const ratioRow = (name: string, of: (round: (typeof rounds)[number]) => number, target: number) => {
    const values = rounds.map(of)
    const value = median(values)
    const each = ROUNDS > 1 ? values.map((v) => v.toFixed(2)).join(', ') + '; ' : ''
    return [name, value.toFixed(2), `≥ ${target}`, `${each}${value >= target ? 'met' : 'MISSED'}`]
  }
  const route = (round: (typeof rounds)[number]) => round.batches.okPerSecond * BATCH
  const against = (i: number) => (round: (typeof rounds)[number]) => route(round) / round.references[i].transfersPerSecond
  if (server) {
    ratios.push(ratioRow('batch route ÷ pgbench batched', against(0), TARGETS.pgbenchBatched))
    ratios.push(ratioRow('batch route ÷ pgbench set-based', against(1), TARGETS.pgbenchSetBased))
  } else ratios.push(ratioRow('batch route ÷ in-process batched loop', against(0), TARGETS.sqliteLoop))
  ratios.push(['batch route ÷ single transfers', (route(rounds[rounds.length - 1]) / single.okPerSecond).toFixed(2), '', ''])
  const p99s = rounds.map((round) => round.batches.p99)
  const p99 = median(p99s)
  const eachP99 = ROUNDS > 1 ? p99s.map((v) => v.toFixed(0)).join(', ') + ' ms; ' : ''
  ratios.push(['p99 per batch', ms(p99), `< ${TARGETS.batchP99Ms} ms`, `${eachP99}${p99 < TARGETS.batchP99Ms ? 'met' : 'MISSED'}`])
  out.push(table(ratios), '')
  out.push(
    !report
      ? `ledger not verified: the service ran from ${ROOT}`
      : report.ok
        ? `ledger verified: ${report.transactions} transactions`
        : `LEDGER VERIFICATION FAILED: ${report.problems.slice(0, 5).join('; ')}`,
  )
  return out
}

/** One reader beside the load: a wallet's first history page, then 20 ms apart; each page's wait in ms. */
function readPages(url: string, token: string): { stop(): Promise<number[]> } {
  const waits: number[] = []
  let stopping = false
  const reading = (async () => {
    while (!stopping) {
      const sent = performance.now()
      await call(url, 'GET', '/wallet/transactions', undefined, token)
      waits.push(performance.now() - sent)
      await sleep(20)
    }
  })()
  // A failed read fails the run when it stops, not the process before then.
  reading.catch(() => {})
  return {
    stop: async () => {
      stopping = true
      await reading
      return waits
    },
  }
}

/** The storage's own speed beside the route: pgbench's batched and set-based scripts, or the in-process loop. */
async function measureReferences(dataDir: string, server: BenchPostgres | undefined): Promise<Reference[]> {
  const references: Reference[] = []
  if (server) {
    for (const kind of ['batched', 'set-based'] as const) {
      const script = path.join(dataDir, `${kind}.sql`)
      fs.writeFileSync(script, transferScript(kind, BATCH))
      const result = await runPgbenchScript(server, 'reference', script, CONNECTIONS, SECONDS, cleanups.track)
      references.push({
        name: `pgbench, ${kind} script, ${BATCH} transfers per transaction`,
        transfersPerSecond: result.tps * BATCH,
        detail: `${result.tps.toFixed(1)} transactions/s, average ${result.latencyMs.toFixed(1)} ms, ${result.failed} failed, ${CONNECTIONS} clients`,
      })
    }
  } else {
    const dir = fs.mkdtempSync(path.join(dataDir, 'reference-'))
    const result = runSqliteBatchedLoop(dir, SECONDS, BATCH)
    references.push({
      name: `in-process better-sqlite3, ${BATCH} transfers per durable commit`,
      transfersPerSecond: result.transfersPerSecond,
      detail: `${result.commitsPerSecond.toFixed(0)} commits/s, one thread, WAL, synchronous=FULL`,
    })
  }
  return references
}

/** What the service spent per transfer carried by the batches, by package or folder and by function. */
function profileReport(storage: string, file: string, skipMs: number, result: LoadResult): string[] {
  const summary = summariseProfile(file, 25, skipMs)
  const transfers = (result.requests - result.non2xx) * BATCH
  const busyUs = summary.totalMs * 1000 * (1 - summary.idleShare)
  const perTransfer = busyUs / Math.max(1, transfers)
  const entry = (share: number, name: string) =>
    `${(share * 100).toFixed(1).padStart(5)} %  ${(share * perTransfer).toFixed(1).padStart(6)} µs  ${name}`
  return [
    '',
    `== ${storage}: the service's CPU during ${result.seconds} s of atomic batches of ${BATCH} (${file}) ==`,
    `${transfers} transfers; busy ${(busyUs / 1e6).toFixed(1)} s, idle ${(summary.idleShare * 100).toFixed(0)} %: ${perTransfer.toFixed(1)} µs of the service's CPU per transfer`,
    '  by package / folder (share of busy time, µs per transfer):',
    ...summary.groups.map((group) => `    ${entry(group.share, group.name)}`),
    '  top functions (self time):',
    ...summary.functions.map((fn) => `    ${entry(fn.share, fn.name)}`),
  ]
}

function table(rows: string[][]): string {
  const widths = rows[0].map((_, column) => Math.max(...rows.map((row) => row[column].length)))
  return rows
    .map((row) => row.map((cell, column) => (column === 0 ? cell.padEnd(widths[column]) : cell.padStart(widths[column]))).join('  '))
    .join('\n')
}

let failed = false
try {
  const load = os.loadavg()[0]
  const out = [
    `Coffer bulk bench on ${os.cpus().length} × ${os.cpus()[0]?.model ?? 'CPU'}, node ${process.version}, load average ${load.toFixed(1)}${load >= 2 ? ' (a busy machine: figures are not results)' : ''}`,
  ]
  for (const storage of storages) out.push(...(await runStorage(storage)))
  console.log(out.join('\n'))
} catch (error) {
  failed = true
  if (!cleanups.interrupted) console.error('bench failed:', error instanceof Error ? (error.stack ?? error.message) : error)
} finally {
  await cleanups.cleanUp()
}
process.exit(cleanups.interrupted ? 130 : failed ? 1 : 0)
