/**
 * Storage faults (`npm run test:faults`): runs the real service as a child process under a load of
 * concurrent clients sending transfers with Idempotency-Keys (each unanswered or refused one is
 * retried with its key), breaks its storage mid-load, and checks what an operator would:
 *   - restart:   PostgreSQL restarted (`pg_ctl restart -m fast`);
 *   - outage:    PostgreSQL stopped (`-m immediate`) for 12 s, then started;
 *   - failover:  a primary with a synchronous streaming standby (`pg_basebackup -R`), the primary
 *                killed, the standby promoted; the service on a multi-host URL (read-write);
 *   - disk-full: SQLite on a small tmpfs filled to ENOSPC for 5 s, then freed (needs root to
 *                mount; skipped with a note otherwise, unless REQUIRE_FAULTS=1 as in CI).
 * Each asserts: the service process stays up; only 201 or 503 S001 (with Retry-After) is answered,
 * never a 500, and no answer takes longer than a few seconds; /readyz answers 503 during the fault
 * and 200 after; the first transfer succeeds within 5 s of the storage coming back, with no
 * restart of the service; every acknowledged transfer is stored exactly once with its
 * acknowledged id; holdings match; a reader following the journal's feed (`GET /admin/journal`)
 * through the fault saw every stored transaction exactly once, at positions 1, 2, 3, … in turn;
 * `coffer verify` passes (the hash chain and checkpoints too). It prints the answers by code during
 * each fault and the recovery times (docs/reliability.md).
 * PostgreSQL comes from Debian's `postgresql` package (PG_BIN, by default the newest
 * /usr/lib/postgresql/<version>/bin): the standby needs its `pg_basebackup`. As root the servers
 * run as `postgres`.
 * Usage: npm run test:faults -- [restart|outage|failover|disk-full]…   (default: all)
 */
import { execFileSync, spawn } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import pg from 'pg'
import { openDatabase } from '../../src/db/database.ts'
import { freePort } from '../../scripts/lib/postgres.ts'
import {
  checkExactlyOnce,
  checkHoldings,
  JournalFollower,
  runCoffer,
  seedUsers,
  Service,
  sleep,
  TransferLoad,
  type Reply,
} from './harness.ts'

const PG_BIN = process.env.PG_BIN ?? debianPostgres()
const ADMIN_KEY = 'cfa_fault_test_admin_key_not_secret'
const USERS = 6
const CONCURRENCY = 12
const INITIAL = 1_000_000
const ASSET = 'faultgold'
/** An answer slower than this is a hang. */
const HANG_MS = 5_000
/** The first transfer must succeed this soon after the storage is back. */
const RECOVERY_MS = 5_000
/** Load before the fault, and after the storage is back. */
const WARM_UP_MS = 2_000
const COOL_DOWN_MS = 6_000
/** The most a request may take to be acknowledged, retries included. */
const REQUEST_LIMIT_MS = 60_000
const REQUIRE = process.env.REQUIRE_FAULTS === '1'

// ---------------------------------------------------------------------------------------------
// PostgreSQL servers from Debian's binaries, as `postgres` when run as root.

/** The newest of Debian's PostgreSQL versions installed (`/usr/lib/postgresql/<version>/bin`). */
function debianPostgres(): string {
  const root = '/usr/lib/postgresql'
  const versions = fs.existsSync(root)
    ? fs.readdirSync(root).filter((version) => fs.existsSync(path.join(root, version, 'bin', 'pg_basebackup')))
    : []
  versions.sort((a, b) => Number(b) - Number(a))
  return path.join(root, versions[0] ?? '15', 'bin')
}

const asRoot = process.getuid?.() === 0

function run(command: string, args: string[], options: { allowFailure?: boolean } = {}): Promise<{ code: number; output: string }> {
  const [file, argv] = asRoot ? ['runuser', ['-u', 'postgres', '--', command, ...args]] : [command, args]
  return new Promise((resolve, reject) => {
    const child = spawn(file, argv, { stdio: ['ignore', 'pipe', 'pipe'] })
    let output = ''
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()))
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()))
    child.on('error', reject)
    child.on('exit', (code) => {
      if (code !== 0 && !options.allowFailure) reject(new Error(`${command} ${args.join(' ')} failed (${code}):\n${output}`))
      else resolve({ code: code ?? 1, output })
    })
  })
}

class PgServer {
  constructor(
    readonly dir: string,
    readonly port: number,
  ) {}

  get url(): string {
    return `postgres://postgres@127.0.0.1:${this.port}/postgres`
  }

  /** A new cluster in `dir` (under a directory `postgres` owns), with `settings` added. */
  static async create(dir: string, settings: string[] = []): Promise<PgServer> {
    const port = await freePort()
    await run(`${PG_BIN}/initdb`, ['-D', dir, '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--no-sync'])
    const server = new PgServer(dir, port)
    await server.configure(['wal_level = replica', 'max_wal_senders = 4', 'hot_standby = on', 'max_connections = 100', ...settings])
    return server
  }

  /** A standby of `primary`, cloned with `pg_basebackup -R`, streaming as `name`. */
  static async standbyOf(primary: PgServer, dir: string, name: string): Promise<PgServer> {
    const port = await freePort()
    await run(`${PG_BIN}/pg_basebackup`, [
      '-D',
      dir,
      '-h',
      '127.0.0.1',
      '-p',
      String(primary.port),
      '-U',
      'postgres',
      '-R',
      '-X',
      'stream',
      '-c',
      'fast',
    ])
    const server = new PgServer(dir, port)
    await server.configure([])
    // Its name for synchronous_standby_names (after the line `-R` wrote, so this one counts).
    await server.configure(
      [`primary_conninfo = 'host=127.0.0.1 port=${primary.port} user=postgres application_name=${name}'`],
      'postgresql.auto.conf',
    )
    return server
  }

  private async configure(settings: string[], fileName = 'postgresql.conf'): Promise<void> {
    const lines =
      fileName === 'postgresql.conf'
        ? [`port = ${this.port}`, "listen_addresses = '127.0.0.1'", `unix_socket_directories = '${this.dir}'`, ...settings]
        : settings
    const file = path.join(this.dir, fileName)
    // Written by `postgres`, who owns the directory.
    await run('sh', ['-c', `cat >> '${file}' <<'EOF'\n${lines.join('\n')}\nEOF`])
  }

  start(): Promise<unknown> {
    return run(`${PG_BIN}/pg_ctl`, ['-D', this.dir, '-l', path.join(this.dir, 'server.log'), '-w', '-t', '60', 'start'])
  }

  stop(mode: 'fast' | 'immediate'): Promise<unknown> {
    return run(`${PG_BIN}/pg_ctl`, ['-D', this.dir, '-m', mode, '-w', '-t', '60', 'stop'], { allowFailure: true })
  }

  restart(): Promise<unknown> {
    return run(`${PG_BIN}/pg_ctl`, ['-D', this.dir, '-l', path.join(this.dir, 'server.log'), '-m', 'fast', '-w', '-t', '60', 'restart'])
  }

  promote(): Promise<unknown> {
    return run(`${PG_BIN}/pg_ctl`, ['-D', this.dir, '-w', '-t', '60', 'promote'])
  }

  async query(sql: string, database = 'postgres'): Promise<Record<string, unknown>[]> {
    const client = new pg.Client({ connectionString: `postgres://postgres@127.0.0.1:${this.port}/${database}` })
    client.on('error', () => {})
    await client.connect()
    try {
      return (await client.query(sql)).rows
    } finally {
      await client.end()
    }
  }
}

/** A directory under the system temp dir that `postgres` may write (as root). */
function serverRoot(): string {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'coffer-faults-'))
  if (asRoot) {
    const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim())
    fs.chownSync(root, id('-u'), id('-g'))
  }
  return root
}

// ---------------------------------------------------------------------------------------------
// Readiness while the load runs.

/** Polls /readyz every 50 ms. */
class Readiness {
  readonly replies: { at: number; status: number }[] = []
  private running = true
  private done: Promise<void> = Promise.resolve()

  constructor(private readonly url: string) {}

  start(): void {
    this.done = (async () => {
      while (this.running) {
        let status = 0
        try {
          status = (await fetch(`${this.url}/readyz`, { signal: AbortSignal.timeout(HANG_MS) })).status
        } catch {
          status = 0
        }
        this.replies.push({ at: Date.now(), status })
        await sleep(50)
      }
    })()
  }

  async stop(): Promise<void> {
    this.running = false
    await this.done
  }
}

// ---------------------------------------------------------------------------------------------
// One scenario: storage, service, seed, load, fault, checks.

interface Storage {
  /** DATABASE_URL (PostgreSQL) or '' (SQLite in DATA_DIR). */
  databaseUrl: string
  dataDir: string
  /** Breaks the storage and mends it; resolves with when it broke and when it was back. */
  fault(): Promise<{ start: number; back: number }>
  cleanup(): Promise<void>
}

interface Figures {
  name: string
  faultSeconds: number
  duringByCode: Record<string, number>
  readinessDownSeconds: number
  recoveryMs: number | undefined
  readyAgainMs: number | undefined
  slowestMs: number
  /** Storage-fault log lines by the cause they name. */
  causes: Record<string, number>
  transfers: number
  /** The last position the feed's reader saw. */
  feed: number
  seconds: number
}

/** Only 201, or 503 S001 with Retry-After (and G004 for a retry overtaking its first try); never a hang. */
function checkAnswers(replies: Reply[], problems: string[]): void {
  for (const reply of replies) {
    if (reply.status === 0) problems.push(`a request got no answer (${reply.ms} ms)`)
    else if (reply.status === 503 && reply.code !== 'S001') problems.push(`a 503 carried ${reply.code}, not S001`)
    else if (reply.status === 503 && !(Number(reply.retryAfter) >= 1)) problems.push('a 503 S001 came without Retry-After')
    if (reply.ms > HANG_MS) problems.push(`a request took ${reply.ms} ms to be answered ${reply.status}`)
  }
}

/** How many answers of each status and code (or none). */
function answersByCode(replies: Reply[]): Record<string, number> {
  const byCode: Record<string, number> = {}
  for (const reply of replies) {
    const key = reply.status === 0 ? 'no answer' : `${reply.status}${reply.code ? ` ${reply.code}` : ''}`
    byCode[key] = (byCode[key] ?? 0) + 1
  }
  return byCode
}

/** /readyz: 503 during the fault, 200 for good within RECOVERY_MS of the storage coming back. */
function checkReadiness(
  replies: { at: number; status: number }[],
  start: number,
  back: number,
  problems: string[],
): { readyAgainMs: number | undefined; readinessDownSeconds: number } {
  const readyDuring = replies.filter((reply) => reply.at >= start && reply.at <= back)
  if (!readyDuring.some((reply) => reply.status === 503))
    problems.push(`/readyz never answered 503 during the fault (${readyDuring.length} polls)`)
  if (replies.some((reply) => reply.status !== 200 && reply.status !== 503))
    problems.push('/readyz answered something else than 200 or 503')
  const readyAgain = replies.find(
    (reply) =>
      reply.status === 200 && reply.at >= back && replies.filter((later) => later.at >= reply.at).every((later) => later.status === 200),
  )
  const readyAgainMs = readyAgain ? readyAgain.at - back : undefined
  if (readyAgainMs === undefined || readyAgainMs > RECOVERY_MS)
    problems.push(`/readyz was not 200 for good within ${RECOVERY_MS / 1000} s of the storage coming back (${readyAgainMs ?? 'never'} ms)`)
  const downPolls = replies.filter((reply) => reply.status !== 200)
  const readinessDownSeconds = downPolls.length > 0 ? (downPolls[downPolls.length - 1].at - downPolls[0].at) / 1000 : 0
  return { readyAgainMs, readinessDownSeconds }
}

/** Each storage fault is logged once per request with its cause: the count of each cause. */
function faultCauses(log: string[], problems: string[]): Record<string, number> {
  const faultLines = log.filter((line) => line.includes('storage unavailable'))
  if (faultLines.some((line) => line.includes('unknown cause')))
    problems.push(`a storage fault was logged without its cause: ${faultLines.find((line) => line.includes('unknown cause'))}`)
  const causes: Record<string, number> = {}
  for (const line of faultLines) {
    const cause = /storage unavailable: ([^:]+):/.exec(line)?.[1] ?? 'unknown cause'
    causes[cause] = (causes[cause] ?? 0) + 1
  }
  return causes
}

async function runScenario(name: string, storage: Storage): Promise<{ figures: Figures; problems: string[] }> {
  const started = Date.now()
  const port = await freePort()
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PORT: String(port),
    HOST: '127.0.0.1',
    DATA_DIR: storage.dataDir,
    DATABASE_URL: storage.databaseUrl,
    ADMIN_API_KEY: ADMIN_KEY,
    AUTH_RATE_LIMIT: '0',
    LOG_LEVEL: 'warn',
  }
  const service = new Service(env, port, true)
  const problems: string[] = []
  await service.start()
  try {
    const tag = `fault${name.replace(/[^a-z]/g, '')}${Date.now().toString(36)}`
    const users = await seedUsers(service.url, ADMIN_KEY, { tag, count: USERS, asset: ASSET, initial: INITIAL })
    const load = new TransferLoad({
      url: service.url,
      users,
      asset: ASSET,
      tag,
      clients: CONCURRENCY,
      attemptTimeoutMs: HANG_MS + 1_000,
      requestLimitMs: REQUEST_LIMIT_MS,
    })
    const readiness = new Readiness(service.url)
    const follower = new JournalFollower(service.url, ADMIN_KEY)
    follower.start()
    load.start()
    readiness.start()
    await sleep(WARM_UP_MS)
    const before = load.replies.filter((reply) => reply.status === 201).length
    if (before === 0) problems.push('no transfer succeeded before the fault')
    const { start, back } = await storage.fault()
    await sleep(COOL_DOWN_MS)
    await load.stop()
    await readiness.stop()
    problems.push(...load.problems)

    // The process stayed up, never restarted.
    if (service.diedWith) problems.push(`the service process died: ${service.diedWith}`)

    checkAnswers(load.replies, problems)
    const duringByCode = answersByCode(load.replies.filter((reply) => reply.at >= start && reply.at <= back))

    // The first transfer after the storage came back, without restarting the service.
    const firstAfter = load.replies.find((reply) => reply.status === 201 && reply.at >= back)
    const recoveryMs = firstAfter ? firstAfter.at - back : undefined
    if (recoveryMs === undefined || recoveryMs > RECOVERY_MS)
      problems.push(
        `no transfer succeeded within ${RECOVERY_MS / 1000} s of the storage coming back (first after ${recoveryMs ?? 'never'} ms)`,
      )

    const { readyAgainMs, readinessDownSeconds } = checkReadiness(readiness.replies, start, back, problems)

    // Nothing lost, nothing doubled.
    await checkHoldings(service.url, users, load.sent, ASSET, INITIAL, problems)
    await follower.finish([...load.sent.values()].map((sent) => sent.transactionId).filter((id): id is number => id !== undefined))
    await service.kill('SIGTERM')
    const database = openDatabase({ databaseUrl: storage.databaseUrl || undefined, dataDir: storage.dataDir })
    let transfers = 0
    try {
      const stored = await checkExactlyOnce(database, `${tag} #`, load.sent, problems)
      transfers = stored.transfers
      follower.check(
        stored.rows.map((row) => row.id),
        problems,
      )
    } finally {
      await database.close()
    }
    const verified = await runCoffer(['verify'], env)
    if (verified.code !== 0) problems.push(`coffer verify failed (${verified.code}):\n${verified.output}`)

    const causes = faultCauses(service.log, problems)

    const slowestMs = Math.max(0, ...load.replies.map((reply) => reply.ms))
    return {
      figures: {
        name,
        faultSeconds: (back - start) / 1000,
        duringByCode,
        readinessDownSeconds,
        recoveryMs,
        readyAgainMs,
        slowestMs,
        causes,
        transfers,
        feed: follower.last,
        seconds: (Date.now() - started) / 1000,
      },
      problems,
    }
  } finally {
    await service.kill('SIGTERM')
  }
}

// ---------------------------------------------------------------------------------------------
// The faults.

/** One PostgreSQL server with a `coffer` database, broken and mended by `breakAndMend`. */
async function singleServer(breakAndMend: (server: PgServer) => Promise<unknown>): Promise<Storage> {
  const root = serverRoot()
  const server = await PgServer.create(path.join(root, 'primary'))
  const cleanup = async () => {
    await server.stop('immediate')
    fs.rmSync(root, { recursive: true, force: true })
  }
  try {
    await server.start()
    await server.query('create database coffer')
  } catch (error) {
    await cleanup()
    throw error
  }
  return {
    databaseUrl: `postgres://postgres@127.0.0.1:${server.port}/coffer`,
    dataDir: root,
    async fault() {
      const start = Date.now()
      await breakAndMend(server)
      return { start, back: Date.now() }
    },
    cleanup,
  }
}

function postgresRestart(): Promise<Storage> {
  return singleServer((server) => server.restart())
}

function postgresOutage(): Promise<Storage> {
  return singleServer(async (server) => {
    await server.stop('immediate')
    await sleep(12_000)
    await server.start()
  })
}

async function postgresFailover(): Promise<Storage> {
  const root = serverRoot()
  const primary = await PgServer.create(path.join(root, 'primary'))
  let standby: PgServer | undefined
  const cleanup = async () => {
    await primary.stop('immediate')
    await standby?.stop('immediate')
    fs.rmSync(root, { recursive: true, force: true })
  }
  try {
    await primary.start()
    await primary.query('create database coffer')
    standby = await PgServer.standbyOf(primary, path.join(root, 'standby'), 'coffer_standby')
    await standby.start()
    // Synchronous from now on (set after the clone, so the standby, once promoted, waits for no
    // standby of its own): every commit waits for the standby to have it.
    await primary.query("alter system set synchronous_standby_names = 'coffer_standby'")
    await primary.query('select pg_reload_conf()')
    for (let i = 0; ; i++) {
      const rows = await primary.query("select sync_state from pg_stat_replication where application_name = 'coffer_standby'")
      if (rows[0]?.sync_state === 'sync') break
      if (i > 100) throw new Error('the standby never became synchronous')
      await sleep(100)
    }
  } catch (error) {
    await cleanup()
    throw error
  }
  const promoted = standby
  return {
    databaseUrl: `postgres://postgres@127.0.0.1:${primary.port},127.0.0.1:${promoted.port}/coffer?target_session_attrs=read-write`,
    dataDir: root,
    async fault() {
      const start = Date.now()
      await primary.stop('immediate')
      // An operator (or a failover manager) notices, then promotes the standby.
      await sleep(2_000)
      await promoted.promote()
      return { start, back: Date.now() }
    },
    cleanup,
  }
}

/**
 * SQLite on a 512 MiB tmpfs; a note instead when it cannot be mounted here. The filler takes all
 * the room there is, so the size only decides how much the load may write around the fault: on
 * an idle machine the load wrote 64 MiB of ledger by itself and filled the disk again after the
 * fault ended.
 */
async function sqliteDiskFull(): Promise<Storage | string> {
  if (!asRoot) return 'mounting a tmpfs needs root'
  const mountPoint = fs.mkdtempSync(path.join(os.tmpdir(), 'coffer-disk-full-'))
  const mounted = await runQuiet('mount', ['-t', 'tmpfs', '-o', 'size=512m', 'tmpfs', mountPoint])
  if (mounted.code !== 0) {
    fs.rmSync(mountPoint, { recursive: true, force: true })
    return `mount -t tmpfs failed: ${mounted.output.trim()}`
  }
  const filler = path.join(mountPoint, 'filler')
  return {
    databaseUrl: '',
    dataDir: path.join(mountPoint, 'data'),
    async fault() {
      const start = Date.now()
      fillDisk(filler)
      await sleep(5_000)
      fs.rmSync(filler, { force: true })
      return { start, back: Date.now() }
    },
    async cleanup() {
      await runQuiet('umount', [mountPoint])
      fs.rmSync(mountPoint, { recursive: true, force: true })
    },
  }
}

/** Writes `file` until the filesystem has no room left (ENOSPC). */
function fillDisk(file: string): void {
  const chunk = Buffer.alloc(64 * 1024, 1)
  const fd = fs.openSync(file, 'w')
  try {
    for (let size = chunk.length; size >= 512;) {
      try {
        fs.writeSync(fd, chunk, 0, size)
      } catch (error) {
        if ((error as { code?: string }).code !== 'ENOSPC') throw error
        size = Math.floor(size / 2)
      }
    }
  } finally {
    fs.closeSync(fd)
  }
}

function runQuiet(command: string, args: string[]): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] })
    let output = ''
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()))
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()))
    child.on('error', (error) => resolve({ code: 1, output: error.message }))
    child.on('exit', (code) => resolve({ code: code ?? 1, output }))
  })
}

// ---------------------------------------------------------------------------------------------

const SCENARIOS: Record<string, () => Promise<Storage | string>> = {
  restart: postgresRestart,
  outage: postgresOutage,
  failover: postgresFailover,
  'disk-full': sqliteDiskFull,
}

function postgresMissing(): string | undefined {
  for (const tool of ['initdb', 'pg_ctl', 'pg_basebackup'])
    if (!fs.existsSync(path.join(PG_BIN, tool))) return `${PG_BIN}/${tool} not found (Debian's postgresql package)`
  return undefined
}

const requested = process.argv.slice(2)
for (const name of requested)
  if (!(name in SCENARIOS)) throw new Error(`unknown fault "${name}": one of ${Object.keys(SCENARIOS).join(', ')}`)
let failed = false
for (const name of requested.length > 0 ? requested : Object.keys(SCENARIOS)) {
  const missing = name === 'disk-full' ? undefined : postgresMissing()
  const storage = missing ?? (await SCENARIOS[name]())
  if (typeof storage === 'string') {
    console.log(`${name}: SKIPPED: ${storage}`)
    if (REQUIRE) failed = true
    continue
  }
  try {
    const { figures, problems } = await runScenario(name, storage)
    const counts = (table: Record<string, number>) =>
      Object.entries(table)
        .map(([code, count]) => `${count} × ${code}`)
        .join(', ')
    const during = counts(figures.duringByCode)
    console.log(
      `${name}: storage away ${figures.faultSeconds.toFixed(1)} s; answers meanwhile: ${during || 'none'}; /readyz not 200 for ${figures.readinessDownSeconds.toFixed(1)} s; ` +
        `first transfer ${figures.recoveryMs ?? '–'} ms and /readyz 200 ${figures.readyAgainMs ?? '–'} ms after the storage was back; slowest answer ${figures.slowestMs} ms; ` +
        `causes logged: ${counts(figures.causes) || 'none'}; ${figures.transfers} transfers checked exactly once, the feed followed to position ${figures.feed} — ${figures.seconds.toFixed(1)} s`,
    )
    if (problems.length > 0) {
      failed = true
      console.log(`${name}: ${problems.length} problem(s):`)
      for (const problem of problems.slice(0, 30)) console.log(`  - ${problem}`)
    } else {
      console.log(`${name}: the process stayed up, only 201 and 503 S001, nothing lost, nothing doubled, coffer verify passed`)
    }
  } catch (error) {
    failed = true
    console.log(`${name}: the fault test could not run: ${error instanceof Error ? error.stack : String(error)}`)
  } finally {
    await storage.cleanup().catch((error) => console.log(`${name}: cleanup failed: ${String(error)}`))
  }
}
process.exit(failed ? 1 : 0)
