/**
 * `coffer verify`'s two halves in process, two checkouts taking turns on one ledger
 * (`npx tsx bench/experiments/verify-cpu.ts [--storage=sqlite|postgres] [--transactions=300000]
 * [--roots=DIR,DIR] [--rounds=3] [--keep=DIR]`).
 *
 * Writes a ledger of `--transactions` through the ledger's write path (batches of 500 moves, 100
 * wallets, one asset, an issuance every 5,000, transfers with a memo and a metadata key), positions
 * and hashes it with the journal's sequencer, then runs `verifyLedger` and `verifyJournal` of each
 * checkout in `--roots` in turn, `--rounds` times (and both at once, the journal on its own thread, as
 * `coffer verify` runs them, where the checkout has that): per half and checkout the wall time, transactions
 * per second and the process's CPU (all threads) per transaction, on PostgreSQL also the server's
 * (its processes' times in /proc), with the load average; where several threads ran, each one's CPU
 * (and until when, in seconds from the start, it used any) and the share of the cores the process used. A
 * checkout whose verify finds a problem on this sound ledger is reported. With `--keep=<dir>` the
 * ledger (SQLite's file, PostgreSQL's server directory) stays there and is used again. Nothing here asserts a time.
 */
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { randomBytes } from 'node:crypto'
import { openPostgres } from '../../src/db/postgres.ts'
import { openSqlite, type Database, type DatabaseOptions } from '../../src/db/database.ts'
import { inTransaction } from '../../src/db/dialect.ts'
import { migrateToLatest } from '../../src/db/migrate.ts'
import { JournalSequencer } from '../../src/journal/sequencer.ts'
import { hasUnpositioned } from '../../src/journal/journal.repository.ts'
import { applyMoves, type Move } from '../../src/ledger/moves.ts'
import { parseSigningKey } from '../../src/secrets/signing-key.ts'
import { startPostgres, type BenchPostgres } from '../postgres.ts'
import { goldAndWallets, noEvents } from '../seed.ts'

const args = process.argv.slice(2)
const option = (name: string) => args.find((arg) => arg.startsWith(`--${name}=`))?.slice(name.length + 3)
const storage = (option('storage') ?? 'sqlite') as 'sqlite' | 'postgres'
const TRANSACTIONS = Number(option('transactions') ?? 300_000)
const ROUNDS = Number(option('rounds') ?? 3)
const ROOTS = (option('roots') ?? '.').split(',').map((root) => path.resolve(root))
const kept = option('keep')
const dir = kept ?? fs.mkdtempSync(path.join(os.tmpdir(), 'coffer-verify-cpu-'))
fs.mkdirSync(dir, { recursive: true })
const fixed = (value: number, digits = 0) => value.toLocaleString('en', { maximumFractionDigits: digits, minimumFractionDigits: digits })
const load = () => os.loadavg()[0].toFixed(1)

const keyFile = path.join(dir, 'signing-key')
if (!fs.existsSync(keyFile)) fs.writeFileSync(keyFile, randomBytes(32).toString('base64'))
const key = parseSigningKey(fs.readFileSync(keyFile, 'utf8'))!

async function build(database: Database): Promise<void> {
  await migrateToLatest(database.db)
  const { asset, walletIds } = await goldAndWallets(database, 'verify')
  const n = walletIds.length
  for (let done = 0; done < TRANSACTIONS; done += 500) {
    const moves = Array.from({ length: Math.min(500, TRANSACTIONS - done) }, (_, i): Move => {
      const k = done + i
      if (k % 5_000 < n) return { from: 1, to: walletIds[k % n], kind: 'issuance', lines: [{ asset, quantity: 1_000_000 }], memo: 'issue' }
      const [from, to] = [walletIds[k % n], walletIds[(k + 1 + (k % (n - 1))) % n]]
      return { from, to, kind: 'transfer', lines: [{ asset, quantity: 1 }], memo: 'history', metadata: { order: `o${k}` } }
    })
    await inTransaction(database, (trx) => applyMoves(trx, moves, noEvents))
    if (done % 50_000 === 0) console.log(`  built ${fixed(done)} (load ${load()})`)
  }
  const sequencer = new JournalSequencer({ database, key, checkpointIntervalMs: 5_000, batch: 5_000 })
  sequencer.start()
  while (await hasUnpositioned(database.db)) await new Promise((resolve) => setTimeout(resolve, 200))
  await sequencer.stop()
}

async function codeOf(root: string, options: DatabaseOptions) {
  const verify = await import(path.join(root, 'src/ledger/verify.ts'))
  const journal = await import(path.join(root, 'src/journal/verify-journal.ts'))
  // Each checkout's own storage code: its state (SQLite's statements) is kept by its own modules.
  const opened = ((await import(path.join(root, 'src/db/database.ts'))) as typeof import('../../src/db/database.ts')).openDatabase({
    ...options,
    poolSize: 4,
  })
  return {
    label: path.basename(root),
    database: opened,
    verifyLedger: verify.verifyLedger as typeof import('../../src/ledger/verify.ts').verifyLedger,
    verifyJournal: journal.verifyJournal as typeof import('../../src/journal/verify-journal.ts').verifyJournal,
    verifyJournalInThread: journal.verifyJournalInThread as
      typeof import('../../src/journal/verify-journal.ts').verifyJournalInThread | undefined,
  }
}

/** Clock ticks a second in /proc's CPU times (USER_HZ, 100 on Linux). */
const TICKS = 100

/**
 * CPU microseconds the PostgreSQL server spent so far: the postmaster's own and its reaped children's,
 * plus its live backends'; undefined without /proc or a server.
 */
function serverCpu(): number | undefined {
  if (!server || !fs.existsSync('/proc/self/stat')) return undefined
  // The fields after the name (which may hold spaces): state is [0], ppid [1], utime [11], stime [12], cutime [13], cstime [14].
  const fields = (pid: string) => {
    try {
      const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
      return stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    } catch {
      return undefined
    }
  }
  const postmaster = fields(String(server.pid))
  if (!postmaster) return undefined
  let ticks = [11, 12, 13, 14].reduce((sum, i) => sum + Number(postmaster[i]), 0)
  for (const pid of fs.readdirSync('/proc').filter((name) => /^\d+$/.test(name))) {
    const child = fields(pid)
    if (child && Number(child[1]) === server.pid) ticks += Number(child[11]) + Number(child[12])
  }
  return (ticks * 1e6) / TICKS
}

/** CPU seconds of each of this process's threads so far, by thread id (/proc/self/task); empty without /proc. */
function threadCpu(): Map<string, number> {
  const seconds = new Map<string, number>()
  if (!fs.existsSync('/proc/self/task')) return seconds
  for (const tid of fs.readdirSync('/proc/self/task')) {
    try {
      const stat = fs.readFileSync(`/proc/self/task/${tid}/stat`, 'utf8')
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
      seconds.set(tid, (Number(fields[11]) + Number(fields[12])) / TICKS)
    } catch {
      // The thread ended meanwhile.
    }
  }
  return seconds
}

async function measure(what: string, work: () => Promise<{ ok: boolean; problems: string[] }>): Promise<void> {
  const cpu = process.cpuUsage()
  const serverBefore = serverCpu()
  // Each thread's CPU, sampled as it runs (a thread's time leaves /proc with it): where the cores went.
  const threadsBefore = threadCpu()
  const threads = new Map<string, number>()
  // When each thread last used CPU, seconds from the start: which ended early and left its core idle.
  const busyUntil = new Map<string, number>()
  const sample = () => {
    for (const [tid, seconds] of threadCpu()) {
      const used = seconds - (threadsBefore.get(tid) ?? 0)
      if (used > (threads.get(tid) ?? 0)) busyUntil.set(tid, (performance.now() - started) / 1000)
      threads.set(tid, used)
    }
  }
  const started = performance.now()
  const sampler = setInterval(sample, 250)
  const report = await work().finally(() => clearInterval(sampler))
  sample()
  const seconds = (performance.now() - started) / 1000
  const used = process.cpuUsage(cpu)
  const perTransaction = (used.user + used.system) / TRANSACTIONS
  const serverAfter = serverCpu()
  const onServer =
    serverBefore === undefined || serverAfter === undefined
      ? ''
      : ` + server ${fixed((serverAfter - serverBefore) / TRANSACTIONS, 1)} µs/tx`
  console.log(
    `${what.padEnd(28)} ${fixed(seconds, 2).padStart(7)} s ${fixed(TRANSACTIONS / seconds).padStart(9)}/s ` +
      `CPU ${fixed(perTransaction, 1).padStart(6)} µs/tx${onServer} (load ${load()})` +
      `${report.ok ? '' : ` PROBLEMS: ${report.problems.slice(0, 3).join('; ')}`}`,
  )
  const busy = [...threads.entries()].filter(([, used]) => used >= 0.1).sort((a, b) => b[1] - a[1])
  if (busy.length > 1)
    console.log(
      `${''.padEnd(28)} threads ${busy.map(([tid, used]) => `${fixed(used, 1)} (to ${fixed(busyUntil.get(tid) ?? 0, 1)})`).join(' + ')} s CPU; ` +
        `the process used ${fixed((100 * (used.user + used.system)) / 1e6 / seconds / os.availableParallelism())}% of ${os.availableParallelism()} cores`,
    )
}

let server: BenchPostgres | undefined
try {
  let database: Database
  // Where a thread opens the same ledger (`openDatabase`'s options).
  let options: DatabaseOptions
  if (storage === 'sqlite') {
    const file = path.join(dir, `ledger-${TRANSACTIONS}.sqlite`)
    const built = fs.existsSync(file)
    database = openSqlite(file)
    if (!built) await build(database)
    const dataDir = path.join(dir, `data-${TRANSACTIONS}`)
    fs.mkdirSync(dataDir, { recursive: true })
    if (!fs.existsSync(path.join(dataDir, 'coffer.sqlite'))) fs.symlinkSync(file, path.join(dataDir, 'coffer.sqlite'))
    options = { databaseUrl: undefined, dataDir }
  } else {
    // Kept: the server's directory under `--keep`, its ledger (database `verify<n>`) used again.
    const serverDir = kept === undefined ? undefined : path.join(dir, 'postgres')
    const built = serverDir !== undefined && fs.existsSync(path.join(serverDir, `built-${TRANSACTIONS}`))
    server = await startPostgres(serverDir === undefined ? {} : { databaseDir: serverDir })
    const name = kept === undefined ? `verify${Date.now().toString(36)}` : `verify${TRANSACTIONS}`
    const url = built ? server.url(name) : await server.createDatabase(name)
    database = await openPostgres(url, 4)
    if (!built) await build(database)
    if (serverDir !== undefined) fs.writeFileSync(path.join(serverDir, `built-${TRANSACTIONS}`), '')
    options = { databaseUrl: url, dataDir: dir }
  }
  await database.close()
  const codes = await Promise.all(ROOTS.map((root) => codeOf(root, options)))
  console.log(`[${storage} ${fixed(TRANSACTIONS)}] ${codes.map((code) => code.label).join(' against ')}`)
  for (let round = 1; round <= ROUNDS; round++) {
    for (const code of round % 2 === 1 ? codes : [...codes].reverse()) {
      await measure(`${round} ${code.label} ledger`, () => code.verifyLedger(code.database.db))
      await measure(`${round} ${code.label} journal`, () => code.verifyJournal(code.database.db, key))
      // As `coffer verify` runs them: the journal on a thread of its own beside the ledger.
      const inThread = code.verifyJournalInThread
      if (inThread)
        await measure(`${round} ${code.label} both at once`, async () => {
          const [ledger, journal] = await Promise.all([code.verifyLedger(code.database.db), inThread(options, key)])
          return { ok: ledger.ok && journal.ok, problems: [...ledger.problems, ...journal.problems] }
        })
    }
  }
  for (const code of codes) await code.database.close()
} finally {
  await server?.stop()
  if (!kept) fs.rmSync(dir, { recursive: true, force: true })
}
