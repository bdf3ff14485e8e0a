/**
 * Coffer on a Patroni cluster (`npm run test:patroni`): three etcd members, three Patroni nodes
 * (PostgreSQL in Patroni's synchronous mode), HAProxy checking Patroni's REST API and PgBouncer in
 * transaction mode behind it, all from Debian's packages and the files in `deploy/patroni/`, on
 * 127.0.0.1 with free ports under a temporary directory. Three instances of the service run at
 * once, one per way of reaching the primary:
 *   - multi-host: DATABASE_URL lists the three PostgreSQL servers (target_session_attrs=read-write);
 *   - haproxy:    DATABASE_URL is HAProxy's address;
 *   - pgbouncer:  DATABASE_URL is PgBouncer's address (PgBouncer → HAProxy → primary).
 * Each takes transfers from CLIENTS clients, every failed request retried with its Idempotency-Key,
 * while one fault hits the cluster:
 *   - killed-primary:  every process of the primary's PostgreSQL killed (SIGKILL);
 *   - frozen-primary:  every process of the primary's PostgreSQL stopped (SIGSTOP: connections stay
 *                      open and silent, as when a host hangs), resumed once every instance recovered;
 *   - dead-patroni:    the primary's Patroni killed (SIGKILL), its PostgreSQL left running;
 *   - switchover:      a planned switchover to the synchronous standby (Patroni's REST API).
 * Each run checks, per instance: no answer other than 201, 503 S001 or 409 G004 (no 500); every
 * acknowledged transfer stored exactly once with its acknowledged id; holdings match; the first
 * 201 after the fault comes within RECOVERY_BOUND_MS; and `coffer verify` passes. After each fault
 * the cluster is mended (the old primary rejoins as a standby) before the next.
 * Runs listed by `knownFailing` are run and reported, their problems printed as known, without
 * failing the run. Every process started here is stopped by its pid, on failure too.
 * Usage: npx tsx test/system/patroni.ts [killed-primary|frozen-primary|dead-patroni|switchover]…
 *   PATRONI_PATHS=multi-host,haproxy,pgbouncer   (default: all three)
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process'
import crypto from 'node:crypto'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import pg from 'pg'
import { openDatabase, type Database } from '../../src/db/database.ts'
import { freePort } from '../../scripts/lib/postgres.ts'
import {
  checkExactlyOnce,
  checkHoldings,
  runCoffer,
  seedUsers,
  Service,
  sleep,
  TransferLoad,
  type Reply,
  type SeededUser,
  type Sent,
} from './harness.ts'

const HOST = '127.0.0.1'
const DEPLOY = path.resolve('deploy/patroni')
const ADMIN_KEY = 'cfa_patroni_test_admin_key_not_secret'
const SIGNING_KEY = crypto.randomBytes(32).toString('base64')
const CLIENTS = 12
const USERS = 6
const INITIAL = 1_000_000
/**
 * Patroni's timings here (the deploy file keeps Patroni's defaults of 30/10/10): a failover takes
 * about ttl + loop_wait, so the runs stay short.
 */
const TTL = 10
const LOOP_WAIT = 2
const RETRY_TIMEOUT = 3
/**
 * The first 201 after the fault must come this soon after it: a primary that stops renewing its
 * leader key is replaced after at most `ttl` + `loop_wait` (12 s), doubled for a busy machine.
 */
const RECOVERY_BOUND_MS = 2 * (TTL + LOOP_WAIT) * 1000
/** Load before the fault; load after every instance recovered. */
const WARM_UP_MS = 3_000
const COOL_DOWN_MS = 3_000
/** A request is given up on (and reported) after this long, retries included. */
const REQUEST_LIMIT_MS = 60_000
/** One HTTP attempt without an answer this long counts as no answer, and is retried. */
const ATTEMPT_TIMEOUT_MS = 8_000
/** The cluster must be whole again (a leader, two standbys streaming, one synchronous) within this. */
const HEAL_LIMIT_MS = 120_000
/** Reads of the final check, each after the cluster is whole again (`checkedWhenWhole`). */
const CHECK_ATTEMPTS = 3
const REINIT_AFTER_MS = 30_000

type PathName = 'multi-host' | 'haproxy' | 'pgbouncer'
const PATHS: PathName[] = ['multi-host', 'haproxy', 'pgbouncer']
type ScenarioName = 'killed-primary' | 'frozen-primary' | 'dead-patroni' | 'switchover'
/** The frozen primary last: with a Patroni that mishandles it, the cluster may need rebuilding after. */
const SCENARIOS: ScenarioName[] = ['killed-primary', 'switchover', 'dead-patroni', 'frozen-primary']

/** The Patroni command (PATRONI_BIN; by default Debian's `patroni` on the PATH) and its version. */
const PATRONI = process.env.PATRONI_BIN ?? 'patroni'

function patroniVersion(): number[] {
  try {
    const text = execFileSync(PATRONI, ['--version'], { encoding: 'utf8' })
    return (/(\d+)\.(\d+)\.(\d+)/.exec(text) ?? []).slice(1).map(Number)
  } catch {
    return []
  }
}

/** Runs whose failure is known, with why: run and reported with their problems, not counted as a failure. */
function knownFailing(version: number[]): Map<string, string> {
  const known = new Map<string, string>()
  known.set(
    'dead-patroni/multi-host',
    'the orphaned primary (no watchdog here) still takes connections, and its Patroni, restarted, clears ' +
      'synchronous_standby_names before demoting it, so commits waiting there return 201 and are rewound away',
  )
  // Patroni before 3.0.3 (Debian 12 ships 3.0.2) with etcd's v3 API: a leader whose loop was
  // stuck past its lease writes the leader key again when it resumes, over the promoted node's,
  // which is then demoted and rewound: transfers acknowledged by it are lost.
  const [major = 0, minor = 0, patch = 0] = version
  if (major * 1_000_000 + minor * 1_000 + patch < 3_000_003)
    for (const pathName of PATHS)
      known.set(
        `frozen-primary/${pathName}`,
        [
          known.get(`frozen-primary/${pathName}`),
          `Patroni ${version.join('.')} retakes the leader key when the frozen node resumes (fixed in 3.0.3)`,
        ]
          .filter(Boolean)
          .join('; '),
      )
  return known
}

const PG_BIN = process.env.PG_BIN ?? newestPostgres()

function newestPostgres(): string {
  const root = '/usr/lib/postgresql'
  const versions = fs.existsSync(root) ? fs.readdirSync(root).filter((v) => fs.existsSync(path.join(root, v, 'bin', 'pg_rewind'))) : []
  versions.sort((a, b) => Number(b) - Number(a))
  return path.join(root, versions[0] ?? '15', 'bin')
}

// ---------------------------------------------------------------------------------------------
// Processes: every one started here is kept with its pid and stopped by it.

const asRoot = process.getuid?.() === 0
const postgresUser = asRoot
  ? {
      uid: Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim()),
      gid: Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim()),
    }
  : undefined

const started = new Set<ChildProcess>()

/** Starts `command` (as `postgres` when `asPostgres` and run as root), its output appended to `logFile`. */
function startProcess(command: string, args: string[], logFile: string, asPostgres: boolean): ChildProcess {
  const out = fs.openSync(logFile, 'a')
  const child = spawn(command, args, {
    stdio: ['ignore', out, out],
    ...(asPostgres && postgresUser ? postgresUser : {}),
    env: { PATH: process.env.PATH, HOME: path.dirname(logFile), LANG: 'C.UTF-8', LC_ALL: 'C.UTF-8' },
  })
  fs.closeSync(out)
  child.on('error', () => {})
  started.add(child)
  child.once('exit', () => started.delete(child))
  return child
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

function signal(pid: number, name: NodeJS.Signals): void {
  try {
    process.kill(pid, name)
  } catch {
    // already gone
  }
}

async function waitGone(pids: number[], ms: number): Promise<boolean> {
  const deadline = Date.now() + ms
  while (Date.now() < deadline) {
    if (pids.every((pid) => !alive(pid))) return true
    await sleep(100)
  }
  return pids.every((pid) => !alive(pid))
}

/** The postmaster of `dataDir` (its postmaster.pid) and every process it started. */
function postgresProcesses(dataDir: string): number[] {
  let postmaster: number
  try {
    postmaster = Number(fs.readFileSync(path.join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0])
  } catch {
    return []
  }
  if (!postmaster || !alive(postmaster)) return []
  const children = fs
    .readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .filter((entry) => {
      try {
        // The parent pid is the second field after the command in parentheses.
        const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8')
        return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === postmaster
      } catch {
        return false
      }
    })
    .map(Number)
  return [postmaster, ...children]
}

// ---------------------------------------------------------------------------------------------
// The cluster, from the files in deploy/patroni.

/** `deploy/patroni/<name>` with every @KEY@ replaced; a placeholder left unfilled is an error. */
function fill(name: string, values: Record<string, string | number>, edits: [RegExp, string][] = []): string {
  let text = fs.readFileSync(path.join(DEPLOY, name), 'utf8')
  for (const [pattern, replacement] of edits) {
    if (!pattern.test(text)) throw new Error(`deploy/patroni/${name} no longer has ${pattern}`)
    text = text.replace(pattern, replacement)
  }
  // Comment lines (# or ;) are left as they are: they name the placeholders.
  return text
    .split('\n')
    .map((line) =>
      /^\s*[#;]/.test(line)
        ? line
        : line.replace(/@([A-Z0-9_]+)@/g, (whole, key: string) => {
            if (!(key in values)) throw new Error(`deploy/patroni/${name}: nothing fills ${whole}`)
            return String(values[key])
          }),
    )
    .join('\n')
}

interface Node {
  name: string
  pgPort: number
  restPort: number
  dataDir: string
  config: string
  log: string
  patroni?: ChildProcess
}

interface Member {
  name: string
  role: string
  state: string
  host: string
  port: number
}

const usedPorts = new Set<number>()
async function port(): Promise<number> {
  for (;;) {
    const candidate = await freePort()
    if (!usedPorts.has(candidate)) {
      usedPorts.add(candidate)
      return candidate
    }
  }
}

class Cluster {
  readonly nodes: Node[] = []
  readonly passwords = {
    superuser: crypto.randomBytes(12).toString('hex'),
    replication: crypto.randomBytes(12).toString('hex'),
    rewind: crypto.randomBytes(12).toString('hex'),
    coffer: crypto.randomBytes(12).toString('hex'),
  }
  haproxyPort = 0
  pgbouncerPort = 0
  /** Processes stopped with SIGSTOP, resumed before anything is stopped. */
  readonly frozen = new Set<number>()

  constructor(readonly root: string) {}

  async start(): Promise<void> {
    const etcdMembers = await Promise.all([1, 2, 3].map(async (i) => ({ name: `etcd${i}`, client: await port(), peer: await port() })))
    const initialCluster = etcdMembers.map((m) => `${m.name}=http://${HOST}:${m.peer}`).join(',')
    for (const member of etcdMembers) {
      const dir = path.join(this.root, member.name)
      fs.mkdirSync(dir)
      const config = path.join(dir, 'etcd.yml')
      fs.writeFileSync(
        config,
        fill('etcd.yml', {
          NAME: member.name,
          DATA_DIR: path.join(dir, 'data'),
          HOST,
          CLIENT_PORT: member.client,
          PEER_PORT: member.peer,
          INITIAL_CLUSTER: initialCluster,
        }),
      )
      startProcess('etcd', ['--config-file', config], path.join(dir, 'etcd.log'), false)
    }
    const etcdHosts = etcdMembers.map((m) => `${HOST}:${m.client}`).join(',')

    for (const i of [1, 2, 3]) {
      const dir = path.join(this.root, `node${i}`)
      fs.mkdirSync(dir, { mode: 0o700 })
      const node: Node = {
        name: `node${i}`,
        pgPort: await port(),
        restPort: await port(),
        dataDir: path.join(dir, 'data'),
        config: path.join(dir, 'patroni.yml'),
        log: path.join(dir, 'patroni.log'),
      }
      fs.writeFileSync(
        node.config,
        fill(
          'patroni.yml',
          {
            NAME: node.name,
            HOST,
            REST_PORT: node.restPort,
            PG_PORT: node.pgPort,
            ETCD_HOSTS: etcdHosts,
            DATA_DIR: node.dataDir,
            PGPASS: path.join(dir, 'pgpass'),
            BIN_DIR: PG_BIN,
            SOCKET_DIR: dir,
            NETWORK: `${HOST}/32`,
            SUPERUSER_PASSWORD: this.passwords.superuser,
            REPLICATION_PASSWORD: this.passwords.replication,
            REWIND_PASSWORD: this.passwords.rewind,
          },
          [
            [/^ {4}ttl: 30$/m, `    ttl: ${TTL}`],
            [/^ {4}loop_wait: 10$/m, `    loop_wait: ${LOOP_WAIT}`],
            [/^ {4}retry_timeout: 10$/m, `    retry_timeout: ${RETRY_TIMEOUT}`],
            // No watchdog device on a test machine.
            [/^ {2}mode: required$/m, '  mode: off'],
          ],
        ),
      )
      this.chownToPostgres(dir)
      this.nodes.push(node)
    }
    for (const node of this.nodes) this.startPatroni(node)
    await this.waitHealthy(HEAL_LIMIT_MS)

    // Coffer's role and database; its session limits set on the role, where PgBouncer keeps them.
    const leader = await this.leader()
    await this.sql(leader, [
      `create role coffer login password '${this.passwords.coffer}'`,
      "alter role coffer set statement_timeout = '15s'",
      "alter role coffer set lock_timeout = '5s'",
      "alter role coffer set idle_in_transaction_session_timeout = '30s'",
      'create database coffer owner coffer',
    ])

    this.haproxyPort = await port()
    const haproxyDir = path.join(this.root, 'haproxy')
    fs.mkdirSync(haproxyDir)
    const haproxyValues: Record<string, string | number> = { HOST, PRIMARY_PORT: this.haproxyPort }
    this.nodes.forEach((node, i) => {
      haproxyValues[`NODE${i + 1}_NAME`] = node.name
      haproxyValues[`NODE${i + 1}_PG`] = `${HOST}:${node.pgPort}`
      haproxyValues[`NODE${i + 1}_REST_PORT`] = node.restPort
    })
    fs.writeFileSync(path.join(haproxyDir, 'haproxy.cfg'), fill('haproxy.cfg', haproxyValues))
    startProcess('haproxy', ['-db', '-f', path.join(haproxyDir, 'haproxy.cfg')], path.join(haproxyDir, 'haproxy.log'), false)

    this.pgbouncerPort = await port()
    const bouncerDir = path.join(this.root, 'pgbouncer')
    fs.mkdirSync(bouncerDir, { mode: 0o700 })
    fs.writeFileSync(path.join(bouncerDir, 'userlist.txt'), `"coffer" "${this.passwords.coffer}"\n`, { mode: 0o600 })
    fs.writeFileSync(
      path.join(bouncerDir, 'pgbouncer.ini'),
      fill('pgbouncer.ini', {
        HAPROXY_HOST: HOST,
        HAPROXY_PORT: this.haproxyPort,
        HOST,
        PORT: this.pgbouncerPort,
        AUTH_FILE: path.join(bouncerDir, 'userlist.txt'),
        LOG_FILE: path.join(bouncerDir, 'pgbouncer.log'),
        PID_FILE: path.join(bouncerDir, 'pgbouncer.pid'),
      }),
    )
    this.chownToPostgres(bouncerDir)
    // PgBouncer refuses to run as root.
    startProcess('pgbouncer', [path.join(bouncerDir, 'pgbouncer.ini')], path.join(bouncerDir, 'stderr.log'), true)
    for (const target of [this.haproxyPort, this.pgbouncerPort])
      await this.waitForSql(`postgres://coffer:${this.passwords.coffer}@${HOST}:${target}/coffer`)
  }

  url(pathName: PathName): string {
    const auth = `coffer:${this.passwords.coffer}`
    if (pathName === 'haproxy') return `postgres://${auth}@${HOST}:${this.haproxyPort}/coffer`
    if (pathName === 'pgbouncer') return `postgres://${auth}@${HOST}:${this.pgbouncerPort}/coffer?prepared_statements=off`
    return `postgres://${auth}@${this.nodes.map((node) => `${HOST}:${node.pgPort}`).join(',')}/coffer?target_session_attrs=read-write`
  }

  private chownToPostgres(dir: string): void {
    if (!postgresUser) return
    execFileSync('chown', ['-R', `${postgresUser.uid}:${postgresUser.gid}`, dir])
  }

  startPatroni(node: Node): void {
    node.patroni = startProcess(PATRONI, [node.config], node.log, true)
  }

  /** The members as Patroni's REST API of any answering node reports them. */
  async members(): Promise<Member[] | undefined> {
    for (const node of this.nodes) {
      try {
        const response = await fetch(`http://${HOST}:${node.restPort}/cluster`, { signal: AbortSignal.timeout(1500) })
        if (!response.ok) continue
        return ((await response.json()) as { members: Member[] }).members
      } catch {
        // this node's API does not answer
      }
    }
    return undefined
  }

  async leader(): Promise<Node> {
    const members = (await this.members()) ?? []
    const name = members.find((member) => member.role === 'leader')?.name
    const node = this.nodes.find((candidate) => candidate.name === name)
    if (!node) throw new Error(`no leader: ${JSON.stringify(members)}`)
    return node
  }

  /**
   * Whole: a running leader, both others running as replicas, one of them synchronous. A member
   * that stays down or starting for REINIT_AFTER_MS is rebuilt from the leader (Patroni's reinit),
   * as an operator would a node pg_rewind could not bring back.
   */
  async waitHealthy(limitMs: number): Promise<void> {
    const deadline = Date.now() + limitMs
    const downSince = new Map<string, number>()
    let last: Member[] | undefined
    let noSyncSince = Date.now()
    while (Date.now() < deadline) {
      last = await this.members()
      if (!last || last.some((member) => member.role === 'sync_standby')) noSyncSince = Date.now()
      else if (Date.now() - noSyncSince > REINIT_AFTER_MS) {
        // Patroni 3.0.2 can keep failing to write its synchronous key after a node rejoined
        // ("updated by someone else" on every loop); turning synchronous mode off and on again
        // writes it anew.
        console.log(`patroni: no synchronous standby for ${REINIT_AFTER_MS / 1000} s: synchronous mode turned off and on`)
        await this.patchConfig({ synchronous_mode: false })
        await sleep(LOOP_WAIT * 1000 * 2)
        await this.patchConfig({ synchronous_mode: true })
        noSyncSince = Date.now()
      }
      for (const member of last ?? []) {
        if (member.state === 'running' || member.state === 'streaming' || member.role === 'leader') {
          downSince.delete(member.name)
          continue
        }
        const since = downSince.get(member.name) ?? Date.now()
        downSince.set(member.name, since)
        const node = this.nodes.find((candidate) => candidate.name === member.name)
        if (node && Date.now() - since > REINIT_AFTER_MS) {
          console.log(`patroni: ${member.name} ${member.state} for ${REINIT_AFTER_MS / 1000} s: rebuilt from the leader`)
          await fetch(`http://${HOST}:${node.restPort}/reinitialize`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ force: true }),
            signal: AbortSignal.timeout(5_000),
          }).catch(() => {})
          downSince.set(member.name, Date.now())
        }
      }
      if (
        last &&
        last.length === 3 &&
        last.every((member) => member.state === 'running' || member.state === 'streaming') &&
        last.filter((member) => member.role === 'leader').length === 1 &&
        last.some((member) => member.role === 'sync_standby')
      ) {
        // Every node's Patroni is answering too.
        if ((await Promise.all(this.nodes.map((node) => this.restAnswers(node)))).every(Boolean)) return
      }
      await sleep(500)
    }
    throw new Error(`the cluster did not become whole within ${limitMs / 1000} s: ${JSON.stringify(last)}`)
  }

  private async patchConfig(change: Record<string, unknown>): Promise<void> {
    const leader = await this.leader().catch(() => this.nodes[0])
    await fetch(`http://${HOST}:${leader.restPort}/config`, {
      method: 'PATCH',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(change),
      signal: AbortSignal.timeout(5_000),
    }).catch(() => {})
  }

  private async restAnswers(node: Node): Promise<boolean> {
    try {
      await fetch(`http://${HOST}:${node.restPort}/health`, { signal: AbortSignal.timeout(1500) })
      return true
    } catch {
      return false
    }
  }

  /** Resolves with when a node other than `old` holds the leader key (polled every 100 ms), or undefined after `ms`. */
  async waitNewLeader(old: Node, ms: number): Promise<number | undefined> {
    const deadline = Date.now() + ms
    while (Date.now() < deadline) {
      const members = await this.members()
      if (members?.some((member) => member.role === 'leader' && member.name !== old.name)) return Date.now()
      await sleep(100)
    }
    return undefined
  }

  async sql(node: Node, statements: string[]): Promise<void> {
    const client = new pg.Client({
      host: HOST,
      port: node.pgPort,
      user: 'postgres',
      password: this.passwords.superuser,
      database: 'postgres',
    })
    client.on('error', () => {})
    await client.connect()
    try {
      for (const statement of statements) await client.query(statement)
    } finally {
      await client.end()
    }
  }

  private async waitForSql(url: string): Promise<void> {
    const deadline = Date.now() + 30_000
    for (;;) {
      const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 })
      client.on('error', () => {})
      try {
        await client.connect()
        await client.query('select 1')
        await client.end()
        return
      } catch (error) {
        void client.end().catch(() => {})
        if (Date.now() > deadline) throw new Error(`${url.replace(/:[^:@/]*@/, ':…@')} never answered: ${String(error)}`)
        await sleep(300)
      }
    }
  }

  /** Stops everything started here, by pid: Patroni first (it stops its PostgreSQL), then what is left. */
  async stop(): Promise<void> {
    for (const pid of this.frozen) signal(pid, 'SIGCONT')
    this.frozen.clear()
    const patronis = this.nodes.flatMap((node) => (node.patroni?.pid !== undefined && alive(node.patroni.pid) ? [node.patroni.pid] : []))
    for (const pid of patronis) signal(pid, 'SIGTERM')
    await waitGone(patronis, 20_000)
    const postgres = this.nodes.flatMap((node) => postgresProcesses(node.dataDir))
    for (const pid of postgres) signal(pid, 'SIGKILL')
    const rest = [...started].flatMap((child) => (child.pid !== undefined ? [child.pid] : []))
    for (const pid of rest) signal(pid, 'SIGKILL')
    await waitGone([...postgres, ...rest], 10_000)
  }
}

// ---------------------------------------------------------------------------------------------
// Instances of the service, one per path, seeded once.

interface Instance {
  path: PathName
  env: NodeJS.ProcessEnv
  service: Service
  users: SeededUser[]
  asset: string
  /** Every transfer acknowledged on this instance so far, over every scenario (for the holdings). */
  acknowledged: Map<number, Sent>
}

async function startInstance(cluster: Cluster, root: string, pathName: PathName): Promise<Instance> {
  const servicePort = await port()
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PORT: String(servicePort),
    HOST,
    DATA_DIR: path.join(root, `service-${pathName}`),
    DATABASE_URL: cluster.url(pathName),
    ADMIN_API_KEY: ADMIN_KEY,
    // Instances of one database sign its journal with one key (docs/journal.md).
    SIGNING_KEY,
    AUTH_RATE_LIMIT: '0',
    LOG_LEVEL: 'warn',
  }
  const service = new Service(env, servicePort)
  await service.start()
  const asset = `pat${pathName.replace(/[^a-z]/g, '')}`.slice(0, 16)
  const users = await seedUsers(service.url, ADMIN_KEY, {
    tag: `p${pathName.replace(/[^a-z]/g, '').slice(0, 6)}${Date.now().toString(36)}`,
    count: USERS,
    asset,
    initial: INITIAL,
  })
  return { path: pathName, env, service, users, asset, acknowledged: new Map() }
}

// ---------------------------------------------------------------------------------------------
// The faults. Each breaks the cluster and returns what mends it (run once every instance recovered
// or gave up), and the node that was primary.

interface Fault {
  old: Node
  mend(): Promise<void>
}

async function killedPrimary(cluster: Cluster): Promise<Fault> {
  const old = await cluster.leader()
  for (const pid of postgresProcesses(old.dataDir)) signal(pid, 'SIGKILL')
  // Patroni notices and starts it again (as primary if it kept the key, else as a standby).
  return { old, mend: async () => {} }
}

async function frozenPrimary(cluster: Cluster): Promise<Fault> {
  const old = await cluster.leader()
  const pids = postgresProcesses(old.dataDir)
  if (pids.length === 0) throw new Error(`${old.name}'s PostgreSQL is not running`)
  for (const pid of pids) {
    cluster.frozen.add(pid)
    signal(pid, 'SIGSTOP')
  }
  return {
    old,
    async mend() {
      for (const pid of pids) signal(pid, 'SIGCONT')
      for (const pid of pids) cluster.frozen.delete(pid)
    },
  }
}

async function deadPatroni(cluster: Cluster): Promise<Fault> {
  const old = await cluster.leader()
  const pid = old.patroni?.pid
  if (pid === undefined) throw new Error(`${old.name}'s Patroni is not running`)
  signal(pid, 'SIGKILL')
  await waitGone([pid], 5_000)
  return {
    old,
    // Started again, it finds its PostgreSQL running, no longer the leader, and makes it a standby.
    mend: async () => cluster.startPatroni(old),
  }
}

async function switchover(cluster: Cluster): Promise<Fault> {
  const old = await cluster.leader()
  const candidate = ((await cluster.members()) ?? []).find((member) => member.role === 'sync_standby')?.name
  if (!candidate) throw new Error('no synchronous standby to switch over to')
  const response = await fetch(`http://${HOST}:${old.restPort}/switchover`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ leader: old.name, candidate }),
    signal: AbortSignal.timeout(60_000),
  })
  if (!response.ok) throw new Error(`switchover refused: ${response.status} ${await response.text()}`)
  return { old, mend: async () => {} }
}

const FAULTS: Record<ScenarioName, (cluster: Cluster) => Promise<Fault>> = {
  'killed-primary': killedPrimary,
  'frozen-primary': frozenPrimary,
  'dead-patroni': deadPatroni,
  switchover,
}

/** The longest time from `since` without a 201: between `since` and the first, or between two; undefined if none came. */
function longestWithout201(replies: Reply[], since: number): number | undefined {
  const times = replies
    .filter((reply) => reply.status === 201 && reply.at > since)
    .map((reply) => reply.at)
    .sort((a, b) => a - b)
  if (times.length === 0) return undefined
  let longest = times[0] - since
  for (let i = 1; i < times.length; i++) longest = Math.max(longest, times[i] - times[i - 1])
  return longest
}

function seconds(ms: number | undefined): string {
  return ms === undefined ? 'never' : `${(ms / 1000).toFixed(1)} s`
}

// ---------------------------------------------------------------------------------------------
// One scenario: load on every instance, the fault, recovery, the mend, the checks.

interface Outcome {
  path: PathName
  problems: string[]
  /** The longest time without a 201 from the fault on: what a client waits for (undefined: none came). */
  outageMs?: number
  /** The first 201 after the new leader held its key (after the fault when none was awaited). */
  afterLeaderMs?: number
  byCode: Record<string, number>
  slowestMs: number
  transfers: number
}

async function runScenario(
  name: ScenarioName,
  cluster: Cluster,
  instances: Instance[],
): Promise<{ outcomes: Outcome[]; promotedMs?: number; leaders: string; verify: string | undefined }> {
  await cluster.waitHealthy(HEAL_LIMIT_MS)
  for (const instance of instances) {
    if (instance.service.diedWith) throw new Error(`the ${instance.path} instance died: ${instance.service.diedWith}`)
  }
  const loads = instances.map(
    (instance) =>
      new TransferLoad({
        url: instance.service.url,
        users: instance.users,
        asset: instance.asset,
        tag: `${name.replace(/[^a-z]/g, '')}${instance.path.replace(/[^a-z]/g, '')}${Date.now().toString(36)}`,
        clients: CLIENTS,
        attemptTimeoutMs: ATTEMPT_TIMEOUT_MS,
        requestLimitMs: REQUEST_LIMIT_MS,
      }),
  )
  for (const load of loads) load.start()
  await sleep(WARM_UP_MS)
  const faultAt = Date.now()
  const fault = await FAULTS[name](cluster)
  const promotedAt = name === 'killed-primary' ? undefined : await cluster.waitNewLeader(fault.old, RECOVERY_BOUND_MS * 2)
  // Until every instance has a 201 after the fault, or the bound has long passed.
  const leaderAt = promotedAt ?? faultAt
  const recovered = () => loads.every((load) => load.replies.some((reply) => reply.status === 201 && reply.at > leaderAt))
  while (!recovered() && Date.now() - faultAt < RECOVERY_BOUND_MS * 2) await sleep(200)
  await sleep(COOL_DOWN_MS)
  await fault.mend()
  await Promise.all(loads.map((load) => load.stop(30_000)))
  await cluster.waitHealthy(HEAL_LIMIT_MS)

  const outcomes: Outcome[] = []
  for (const [i, instance] of instances.entries()) {
    const load = loads[i]
    const problems = [...load.problems]
    if (instance.service.diedWith) problems.push(`the service process died: ${instance.service.diedWith}`)
    const byCode: Record<string, number> = {}
    for (const reply of load.replies) {
      const key = reply.status === 0 ? 'no answer' : `${reply.status}${reply.code ? ` ${reply.code}` : ''}`
      byCode[key] = (byCode[key] ?? 0) + 1
      if (reply.status >= 500 && !(reply.status === 503 && reply.code === 'S001'))
        problems.push(`answered ${reply.status} ${reply.code ?? ''}`)
    }
    const first = load.replies.find((reply) => reply.status === 201 && reply.at > leaderAt)
    const afterLeaderMs = first ? first.at - leaderAt : undefined
    const outageMs = longestWithout201(load.replies, faultAt)
    if (outageMs === undefined || outageMs > RECOVERY_BOUND_MS)
      problems.push(
        `${outageMs === undefined ? 'no 201 after the fault' : `${outageMs} ms without a 201 after the fault`} (bound ${RECOVERY_BOUND_MS} ms)`,
      )
    const transfers = await checkedWhenWhole(cluster, (database) => checkExactlyOnce(database, `${load.tag} #`, load.sent, problems))
    for (const transfer of load.sent.values())
      if (transfer.transactionId !== undefined) instance.acknowledged.set(instance.acknowledged.size, transfer)
    if (!instance.service.diedWith)
      await checkHoldings(instance.service.url, instance.users, instance.acknowledged, instance.asset, INITIAL, problems)
    outcomes.push({
      path: instance.path,
      problems,
      outageMs,
      afterLeaderMs,
      byCode,
      slowestMs: Math.max(0, ...load.replies.map((r) => r.ms)),
      transfers,
    })
  }
  const verified = await runCoffer(['verify'], instances[0].env)
  return {
    outcomes,
    promotedMs: promotedAt === undefined ? undefined : promotedAt - faultAt,
    leaders: `leader ${fault.old.name} before, ${(await cluster.leader()).name} after`,
    verify: verified.code === 0 ? undefined : `coffer verify failed (${verified.code}):\n${verified.output}`,
  }
}

/**
 * The check, read through HAProxy, again once the cluster is whole if it failed: a
 * Patroni that retakes the leader key after it resumes (`knownFailing`) changes leaders after
 * `waitHealthy` has passed, which ends the checker's connection, not a request of the load.
 */
async function checkedWhenWhole(cluster: Cluster, check: (database: Database) => Promise<{ transfers: number }>): Promise<number> {
  for (let attempt = 1; ; attempt++) {
    const database = openDatabase({ databaseUrl: cluster.url('haproxy'), dataDir: os.tmpdir() })
    try {
      return (await check(database)).transfers
    } catch (error) {
      if (attempt === CHECK_ATTEMPTS) throw error
      console.log(`patroni: the check failed (${(error as Error).message}); read again once the cluster is whole`)
      await cluster.waitHealthy(HEAL_LIMIT_MS)
    } finally {
      await database.close()
    }
  }
}

// ---------------------------------------------------------------------------------------------

/** Copies every log of a failed run (not the data) to a directory of its own, named in the output. */
function keepLogs(root: string): void {
  const kept = fs.mkdtempSync(path.join(os.tmpdir(), 'coffer-patroni-logs-'))
  for (const entry of fs.readdirSync(root, { recursive: true }) as string[]) {
    if (!entry.endsWith('.log') || entry.includes(`${path.sep}data${path.sep}`)) continue
    fs.copyFileSync(path.join(root, entry), path.join(kept, entry.replaceAll(path.sep, '-')))
  }
  console.log(`patroni: the logs of this run are in ${kept}`)
}

function missingTools(): string[] {
  const missing: string[] = []
  for (const tool of ['etcd', PATRONI, 'haproxy', 'pgbouncer']) {
    try {
      execFileSync('sh', ['-c', `command -v ${tool} || test -x /usr/sbin/${tool}`], { stdio: 'ignore' })
    } catch {
      missing.push(tool)
    }
  }
  if (!fs.existsSync(path.join(PG_BIN, 'pg_rewind'))) missing.push(`${PG_BIN}/pg_rewind`)
  return missing
}

async function main(): Promise<number> {
  const requested = process.argv.slice(2) as ScenarioName[]
  for (const name of requested) if (!SCENARIOS.includes(name)) throw new Error(`unknown scenario "${name}": one of ${SCENARIOS.join(', ')}`)
  const paths = (process.env.PATRONI_PATHS?.split(',') ?? PATHS) as PathName[]
  for (const name of paths) if (!PATHS.includes(name)) throw new Error(`unknown path "${name}": one of ${PATHS.join(', ')}`)
  const version = patroniVersion()
  const known = knownFailing(version)
  const missing = missingTools()
  if (missing.length > 0) {
    console.log(`patroni: cannot run, missing ${missing.join(', ')} (Debian: patroni etcd-server haproxy pgbouncer postgresql)`)
    return 1
  }
  if (!asRoot) {
    console.log('patroni: needs root (the servers run as postgres)')
    return 1
  }

  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'coffer-patroni-'))
  fs.chmodSync(root, 0o755)
  const cluster = new Cluster(root)
  const instances: Instance[] = []
  let failed = false
  const stopAll = async () => {
    for (const instance of instances) await instance.service.kill('SIGKILL')
    await cluster.stop()
  }
  const onSignal = () => {
    void stopAll().finally(() => process.exit(130))
  }
  process.once('SIGINT', onSignal)
  process.once('SIGTERM', onSignal)
  const began = Date.now()
  try {
    await cluster.start()
    console.log(`patroni: cluster whole in ${((Date.now() - began) / 1000).toFixed(1)} s (leader ${(await cluster.leader()).name})`)
    for (const pathName of paths) instances.push(await startInstance(cluster, root, pathName))
    for (const name of requested.length > 0 ? requested : SCENARIOS) {
      const scenarioBegan = Date.now()
      const { outcomes, promotedMs, leaders, verify } = await runScenario(name, cluster, instances)
      console.log(
        `${name}: ${promotedMs === undefined ? 'no promotion awaited' : `new leader ${(promotedMs / 1000).toFixed(1)} s after the fault`}; ` +
          `${leaders}; ${((Date.now() - scenarioBegan) / 1000).toFixed(0)} s with the mend`,
      )
      if (verify) {
        failed = true
        console.log(`${name}: ${verify}`)
      }
      for (const outcome of outcomes) {
        const key = `${name}/${outcome.path}`
        const answers = Object.entries(outcome.byCode)
          .map(([code, count]) => `${count} × ${code}`)
          .join(', ')
        console.log(
          `  ${outcome.path}: ${seconds(outcome.outageMs)} without a 201 from the fault on, first 201 ${seconds(outcome.afterLeaderMs)} after ${promotedMs === undefined ? 'the fault' : 'the new leader'}; ` +
            `answers ${answers}; slowest ${outcome.slowestMs} ms; ${outcome.transfers} transfers checked exactly once`,
        )
        if (outcome.problems.length === 0) {
          console.log(`  ${outcome.path}: passed${known.has(key) ? ` (listed as known failing: take ${key} off the list)` : ''}`)
          continue
        }
        if (known.has(key))
          console.log(`  ${outcome.path}: KNOWN FAILING (${known.get(key)}), not counted: ${outcome.problems.length} problem(s):`)
        else {
          failed = true
          console.log(`  ${outcome.path}: FAILED: ${outcome.problems.length} problem(s):`)
        }
        for (const problem of outcome.problems.slice(0, 12)) console.log(`    - ${problem}`)
      }
    }
  } catch (error) {
    failed = true
    console.log(`patroni: could not run: ${error instanceof Error ? error.stack : String(error)}`)
    for (const node of cluster.nodes) {
      try {
        console.log(`--- ${node.name} patroni.log (tail)\n${fs.readFileSync(node.log, 'utf8').slice(-3000)}`)
      } catch {
        // no log
      }
    }
  } finally {
    await stopAll()
    if (failed) keepLogs(root)
    fs.rmSync(root, { recursive: true, force: true })
  }
  if (known.size > 0) console.log(`patroni: known failing, reported above and not counted: ${[...known.keys()].join(', ')}`)
  console.log(`patroni: ${failed ? 'FAILED' : 'passed'} in ${((Date.now() - began) / 1000).toFixed(0)} s`)
  return failed ? 1 : 0
}

process.exit(await main())
