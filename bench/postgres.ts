import { spawn } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import pg from 'pg'
import { openPostgres, openSqlite, type Database } from '../src/db/database.ts'
import { freePort, startPostgres as startServer } from '../scripts/lib/postgres.ts'

export { freePort }

/** A throwaway PostgreSQL server for one bench run, with the server's default durability (fsync on). */
export interface BenchPostgres {
  host: string
  port: number
  user: string
  password: string
  /** The postmaster's process id (its backends are its children). */
  pid: number
  /** Its data directory (removed by `stop` unless kept). */
  databaseDir: string
  /** URL of a database on this server. */
  url(database: string): string
  createDatabase(name: string): Promise<string>
  stop(): Promise<void>
}

/**
 * `keep` leaves the server's directory at `stop`, so a later run can start a server on the same
 * store again (`databaseDir`: a directory so kept).
 */
export async function startPostgres(options: { keep?: boolean; databaseDir?: string } = {}): Promise<BenchPostgres> {
  const { port, databaseDir, stop } = await startServer({
    name: 'coffer-bench-pg',
    ...options,
    // Enough connections for the service pool plus pgbench; the rest is PostgreSQL's defaults.
    // BENCH_PG_STATEMENTS=1 preloads pg_stat_statements: the webhook scenario then prints statement counts.
    flags: [
      '-c',
      'max_connections=200',
      '-c',
      'shared_buffers=256MB',
      '-c',
      'listen_addresses=127.0.0.1',
      ...(process.env.BENCH_PG_STATEMENTS ? ['-c', 'shared_preload_libraries=pg_stat_statements'] : []),
    ],
  })
  const url = (database: string) => `postgres://postgres:postgres@127.0.0.1:${port}/${database}`
  const pid = Number(fs.readFileSync(path.join(databaseDir, 'postmaster.pid'), 'utf8').split('\n')[0])
  return {
    host: '127.0.0.1',
    port,
    pid,
    databaseDir,
    user: 'postgres',
    password: 'postgres',
    url,
    async createDatabase(name: string) {
      const client = new pg.Client({ connectionString: url('postgres') })
      await client.connect()
      try {
        await client.query(`create database ${name}`)
      } finally {
        await client.end()
      }
      return url(name)
    },
    stop,
  }
}

/** pgbench's scale (`pgbench -i -s 10`: a million accounts), the keyed transfers' reference. */
export const PGBENCH_SCALE = 10

export interface PgbenchResult {
  tps: number
  latencyMs: number
  transactions: number
  failed: number
}

/** Runs pgbench with the given arguments against a database; resolves with its output. */
function runPgbench(
  server: BenchPostgres,
  database: string,
  args: string[],
  timeoutMs: number,
  track: (pid: number) => void,
): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn('pgbench', ['-h', server.host, '-p', String(server.port), '-U', server.user, ...args, database], {
      env: { ...process.env, PGPASSWORD: server.password },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    if (child.pid) track(child.pid)
    let output = ''
    child.stdout.on('data', (chunk) => (output += chunk))
    child.stderr.on('data', (chunk) => (output += chunk))
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs)
    child.on('error', (error) => {
      clearTimeout(timer)
      reject(error)
    })
    child.on('exit', (code) => {
      clearTimeout(timer)
      if (code === 0) resolve(output)
      else reject(new Error(`pgbench ${args.join(' ')} exited with ${code}:\n${output.slice(-2000)}`))
    })
  })
}

/** `pgbench -i -s <scale>` (server-side data generation) into a fresh database. */
export async function initPgbench(server: BenchPostgres, database: string, scale: number, track: (pid: number) => void): Promise<void> {
  await runPgbench(server, database, ['-i', '-s', String(scale), '-I', 'dtGvp', '-q'], 120_000, track)
}

/**
 * The built-in tpcb-like script at `clients` clients for `seconds` seconds, two threads, prepared
 * statements (`pgbench -c <clients> -j 2 -T <seconds> -M prepared`): the keyed transfers' reference.
 */
export async function runTpcb(
  server: BenchPostgres,
  database: string,
  clients: number,
  seconds: number,
  track: (pid: number) => void,
): Promise<PgbenchResult> {
  const output = await runPgbench(
    server,
    database,
    ['-c', String(clients), '-j', '2', '-T', String(seconds), '-M', 'prepared'],
    (seconds + 60) * 1000,
    track,
  )
  return parsePgbench(output)
}

/** A fresh store for a bench run in this process: a new SQLite file, or a new database on a throwaway server. */
export interface BenchStore {
  database: Database
  /** The PostgreSQL database's URL (undefined on SQLite). */
  databaseUrl: string | undefined
  /** A new temp directory: the SQLite file's, and the data directory of a service on either storage. */
  dataDir: string
  /** Closes the store, stops the server, removes the directory. */
  close(): Promise<void>
}

export async function openBenchStore(storage: 'sqlite' | 'postgres', name: string, poolSize: number): Promise<BenchStore> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), `coffer-bench-${name}-`))
  const postgres = storage === 'postgres' ? await startPostgres() : undefined
  const databaseUrl = await postgres?.createDatabase(name)
  const database = databaseUrl ? openPostgres(databaseUrl, poolSize) : openSqlite(path.join(dataDir, 'coffer.sqlite'))
  return {
    database,
    databaseUrl,
    dataDir,
    async close() {
      await database.close()
      await postgres?.stop()
      fs.rmSync(dataDir, { recursive: true, force: true })
    },
  }
}

/** Accounts the batched pgbench scripts move units between (as many as the bulk scenario's wallets). */
const SCRIPT_ACCOUNTS = 100

/** The tables of the batched pgbench scripts, made in `database`: a balance per account and a journal. */
export async function initTransferTables(server: BenchPostgres, database: string): Promise<void> {
  const client = new pg.Client({ connectionString: server.url(database) })
  await client.connect()
  try {
    await client.query(`
      create table balances (id integer primary key, quantity bigint not null);
      create table journal (id bigserial primary key, from_id integer not null, to_id integer not null, quantity bigint not null, created_at timestamptz not null);
      insert into balances select id, 1000000000000 from generate_series(1, ${SCRIPT_ACCOUNTS}) id;`)
  } finally {
    await client.end()
  }
}

/**
 * A pgbench script of `batch` transfers per transaction, each from a random account to another:
 * `batched` sends them one statement at a time (debit, credit, journal row), as a plain program
 * would; `set-based` sends one statement per table for the whole batch. Both lock the batch's
 * accounts in id order first, as Coffer does, so that 32 clients never deadlock.
 */
export function transferScript(kind: 'batched' | 'set-based', batch: number): string {
  const lines: string[] = []
  const indexes = Array.from({ length: batch }, (_, i) => i + 1)
  for (const i of indexes) {
    lines.push(`\\set f${i} random(1, ${SCRIPT_ACCOUNTS})`)
    lines.push(`\\set t${i} 1 + (:f${i} + random(0, ${SCRIPT_ACCOUNTS - 2})) % ${SCRIPT_ACCOUNTS}`)
  }
  const ids = indexes.flatMap((i) => [`:f${i}`, `:t${i}`]).join(', ')
  lines.push('begin;')
  lines.push(`select id from balances where id in (${ids}) order by id for update;`)
  if (kind === 'batched') {
    for (const i of indexes) {
      lines.push(`update balances set quantity = quantity - 1 where id = :f${i};`)
      lines.push(`update balances set quantity = quantity + 1 where id = :t${i};`)
      lines.push(`insert into journal (from_id, to_id, quantity, created_at) values (:f${i}, :t${i}, 1, now());`)
    }
  } else {
    const moves = indexes.map((i) => `(:f${i}::integer, :t${i}::integer)`).join(', ')
    lines.push(
      `update balances b set quantity = b.quantity + d.delta from (select id, sum(delta) as delta from (values ${indexes
        .flatMap((i) => [`(:f${i}::integer, -1)`, `(:t${i}::integer, 1)`])
        .join(', ')}) v(id, delta) group by id) d where b.id = d.id;`,
    )
    lines.push(`insert into journal (from_id, to_id, quantity, created_at) select f, t, 1, now() from (values ${moves}) v(f, t);`)
  }
  lines.push('commit;')
  return lines.join('\n') + '\n'
}

/** A custom script at `clients` clients for `seconds` seconds, two threads, prepared statements; `tps` counts the script's transactions. */
export async function runPgbenchScript(
  server: BenchPostgres,
  database: string,
  scriptFile: string,
  clients: number,
  seconds: number,
  track: (pid: number) => void,
): Promise<PgbenchResult> {
  const output = await runPgbench(
    server,
    database,
    ['-n', '-f', scriptFile, '-c', String(clients), '-j', '2', '-T', String(seconds), '-M', 'prepared'],
    (seconds + 60) * 1000,
    track,
  )
  return parsePgbench(output)
}

function parsePgbench(output: string): PgbenchResult {
  const tps = /tps = ([\d.]+)/.exec(output)
  const latency = /latency average = ([\d.]+) ms/.exec(output)
  const processed = /number of transactions actually processed: (\d+)/.exec(output)
  const failed = /number of failed transactions: (\d+)/.exec(output)
  if (!tps) throw new Error(`could not read pgbench output:\n${output}`)
  return {
    tps: Number(tps[1]),
    latencyMs: latency ? Number(latency[1]) : NaN,
    transactions: processed ? Number(processed[1]) : NaN,
    failed: failed ? Number(failed[1]) : 0,
  }
}
