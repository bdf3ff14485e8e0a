/**
 * A backup's check, restore and backup by phase, two or more checkouts taking turns on one file
 * (`npx tsx bench/experiments/restore-phases.ts --from=<backup> [--storage=sqlite|postgres]
 * [--roots=<before>,<after>] [--rounds=2] [--no-backup] [--verify] [--check-only]`).
 *
 * Each round, each checkout in turn: `checkBackup` and `restoreBackup` into an empty store as the
 * CLI runs them, then a backup of the restored store. Prints wall and this process's CPU per step;
 * the restore's loading by table (from its progress calls), and after the rows its index builds,
 * keys, the journal's queue and `ANALYZE` (timed at the driver); on PostgreSQL the server
 * backend's CPU from /proc. `--check-only` times just the check. `--verify` runs both verifies on each restored store (the signing key
 * read beside the backup, as `ledger-ops.ts` keeps it). Make the backup once with `ledger-ops.ts --keep`. Nothing asserts a time.
 */
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import pg from 'pg'
import { startPostgres, type BenchPostgres } from '../postgres.ts'

const args = process.argv.slice(2)
const option = (name: string) => args.find((arg) => arg.startsWith(`--${name}=`))?.slice(name.length + 3)
const storage = (option('storage') ?? 'sqlite') as 'sqlite' | 'postgres'
const from = option('from')
if (!from) throw new Error('--from=<backup> is required')
const roots = (option('roots') ?? '.').split(',').map((root) => path.resolve(root))
const rounds = Number(option('rounds') ?? 2)
const backup = !args.includes('--no-backup')
const verify = args.includes('--verify')
const checkOnly = args.includes('--check-only')
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'coffer-restore-phases-'))
const TICKS = 100

interface Modules {
  database: typeof import('../../src/db/database.ts')
  postgres: typeof import('../../src/db/postgres.ts')
  statements: typeof import('../../src/db/sqlite-statements.ts')
  restore: typeof import('../../src/operations/restore.ts')
  backup: typeof import('../../src/operations/backup.ts')
  signing: typeof import('../../src/secrets/signing-key.ts')
  verifyLedger: typeof import('../../src/ledger/verify.ts')
  verifyJournal: typeof import('../../src/journal/verify-journal.ts')
}

async function load(root: string): Promise<Modules> {
  const at = (file: string) => import(path.join(root, 'src', file))
  return {
    database: await at('db/database.ts'),
    postgres: await at('db/postgres.ts'),
    statements: await at('db/sqlite-statements.ts'),
    restore: await at('operations/restore.ts'),
    backup: await at('operations/backup.ts'),
    signing: await at('secrets/signing-key.ts'),
    verifyLedger: await at('ledger/verify.ts'),
    verifyJournal: await at('journal/verify-journal.ts'),
  }
}

/** Wall seconds and CPU seconds (this process) of the step, and its phases. */
class Clock {
  private wall = performance.now()
  private cpu = process.cpuUsage()
  readonly phases = new Map<string, { wall: number; cpu: number }>()

  /** Charges the time since the last mark to `phase`. */
  mark(phase: string): void {
    const wall = performance.now()
    const cpu = process.cpuUsage()
    const spent = this.phases.get(phase) ?? { wall: 0, cpu: 0 }
    spent.wall += (wall - this.wall) / 1000
    spent.cpu += (cpu.user - this.cpu.user + cpu.system - this.cpu.system) / 1e6
    this.phases.set(phase, spent)
    this.wall = wall
    this.cpu = cpu
  }
}

function serverCpu(pid: number | undefined): number {
  if (!pid) return 0
  try {
    const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ')
    return (Number(fields[11]) + Number(fields[12])) / TICKS
  } catch {
    return 0
  }
}

const fixed = (value: number) => value.toFixed(1)
let server: BenchPostgres | undefined
const results = new Map<string, Map<string, { wall: number[]; cpu: number[] }>>()

function record(root: string, step: string, clock: Clock): void {
  const byStep = results.get(root) ?? new Map()
  results.set(root, byStep)
  let total = { wall: 0, cpu: 0 }
  for (const [phase, spent] of clock.phases) {
    total = { wall: total.wall + spent.wall, cpu: total.cpu + spent.cpu }
    const name = `${step}: ${phase}`
    const seen = byStep.get(name) ?? { wall: [], cpu: [] }
    seen.wall.push(spent.wall)
    seen.cpu.push(spent.cpu)
    byStep.set(name, seen)
  }
  const seen = byStep.get(`${step} (all)`) ?? { wall: [], cpu: [] }
  seen.wall.push(total.wall)
  seen.cpu.push(total.cpu)
  byStep.set(`${step} (all)`, seen)
  const phases = [...clock.phases]
    .filter(([, spent]) => spent.wall >= 0.1 || spent.cpu >= 0.1)
    .map(([phase, spent]) => `${phase} ${fixed(spent.wall)} (${fixed(spent.cpu)})`)
    .join(', ')
  console.log(
    `${path.basename(root)} ${step}: ${fixed(total.wall)} s (${fixed(total.cpu)} CPU), load ${os.loadavg()[0].toFixed(1)}: ${phases}`,
  )
}

/** Names the statement a phase after the rows runs, or undefined for the rest. */
function phaseOf(text: string): string | undefined {
  const t = text.trimStart().toLowerCase()
  if (t.startsWith('create index') || t.startsWith('create unique index')) return 'indexes'
  if (t.startsWith('alter table') && t.includes('add constraint')) return t.includes('foreign key') ? 'references' : 'keys'
  if (t.startsWith('insert into journal_pending')) return 'journal queue'
  if (t.startsWith('analyze')) return 'analyze'
  return undefined
}

async function run(root: string, modules: Modules, round: number): Promise<void> {
  const name = `r${round}${path.basename(root).replace(/\W/g, '')}${Date.now().toString(36)}`
  const database =
    storage === 'sqlite'
      ? modules.database.openSqlite(path.join(dir, `${name}.sqlite`))
      : modules.postgres.openPostgres(await server!.createDatabase(name), 4)
  let backendPid: number | undefined
  let serverAt = 0
  try {
    const clock = new Clock()
    // Statements of the phases after the rows, timed where they run.
    let table = ''
    let after = false
    const timed = (text: string) => {
      const phase = phaseOf(text)
      if (phase) clock.mark(after ? 'between' : table ? `rows of ${table}` : 'migrations')
      if (phase) after = true
      return phase
    }
    const statements = modules.statements.sqliteStatementsOf(database.db)
    if (statements) {
      const prepare = statements.prepare.bind(statements)
      statements.prepare = (text: string) => {
        const statement = prepare(text)
        const phase = phaseOf(text)
        if (!phase) return statement
        return new Proxy(statement, {
          get(target, key) {
            if (key !== 'run') return Reflect.get(target, key, target)
            return (...values: unknown[]) => {
              timed(text)
              const result = target.run(...values)
              clock.mark(phase)
              return result
            }
          },
        })
      }
    } else {
      const connect = database.postgresClient!.bind(database)
      database.postgresClient = async () => {
        const client = await connect()
        const query = client.query.bind(client) as (...values: unknown[]) => unknown
        backendPid = (await client.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0].pid
        serverAt = serverCpu(backendPid)
        ;(client as { query: unknown }).query = (...values: unknown[]) => {
          const text = typeof values[0] === 'string' ? values[0] : undefined
          const phase = text ? timed(text) : undefined
          const result = query(...values)
          if (phase && result instanceof Promise) return result.finally(() => clock.mark(phase))
          return result
        }
        return client
      }
    }
    const checked = await modules.restore.checkBackup(from!)
    clock.mark('check')
    if (checkOnly) {
      record(root, 'check', clock)
      return
    }
    await modules.restore.restoreBackup(database, checked, (current) => {
      if (current !== table) clock.mark(table ? `rows of ${table}` : 'migrations')
      table = current
      after = false
    })
    clock.mark('the rest')
    if (backendPid) clock.phases.set('server CPU', { wall: 0, cpu: serverCpu(backendPid) - serverAt })
    record(root, 'restore', clock)
    if (verify) {
      const key = modules.signing.parseSigningKey(fs.readFileSync(path.join(path.dirname(from!), 'signing-key'), 'utf8'))!
      const ledger = await modules.verifyLedger.verifyLedger(database.db)
      const journal = await modules.verifyJournal.verifyJournal(database.db, key)
      console.log(
        `${path.basename(root)} verify after restore: ledger ${ledger.ok ? 'OK' : ledger.problems.slice(0, 3).join('; ')}, ` +
          `journal ${journal.ok ? 'OK' : journal.problems.slice(0, 3).join('; ')}`,
      )
    }
    if (backup) {
      const file = path.join(dir, `${name}.coffer`)
      const backupClock = new Clock()
      let backing = ''
      await modules.backup.createBackup(database, file, {
        progress: (current) => {
          if (current !== backing && backing) backupClock.mark(backing)
          backing = current
        },
      })
      backupClock.mark(backing)
      record(root, 'backup', backupClock)
      fs.rmSync(file, { force: true })
    }
  } finally {
    await database.close()
    if (storage === 'sqlite')
      for (const suffix of ['', '-wal', '-shm', '-journal']) fs.rmSync(path.join(dir, `${name}.sqlite${suffix}`), { force: true })
    else {
      const client = new pg.Client({ connectionString: server!.url('postgres') })
      await client.connect()
      await client.query(`drop database ${name}`).finally(() => client.end())
    }
  }
}

try {
  if (storage === 'postgres') server = await startPostgres()
  const loaded = new Map<string, Modules>()
  for (const root of roots) loaded.set(root, await load(root))
  for (let round = 1; round <= rounds; round++) for (const root of roots) await run(root, loaded.get(root)!, round)
  console.log(`\n${storage}, ${rounds} rounds, ${from}: wall s (CPU s), min-max over rounds`)
  const steps = [...new Set([...results.values()].flatMap((byStep) => [...byStep.keys()]))]
  for (const step of steps) {
    // Phases under a tenth of a second in every run are left out.
    if (!step.endsWith('(all)') && roots.every((root) => Math.max(...(results.get(root)?.get(step)?.wall ?? [0])) < 0.1)) continue
    const cells = roots.map((root) => {
      const seen = results.get(root)?.get(step)
      if (!seen) return '–'
      const range = (values: number[]) => `${fixed(Math.min(...values))}-${fixed(Math.max(...values))}`
      return `${range(seen.wall)} (${range(seen.cpu)})`
    })
    console.log(`  ${step.padEnd(40)} ${cells.map((cell) => cell.padEnd(26)).join(' ')}`)
  }
} finally {
  await server?.stop()
  fs.rmSync(dir, { recursive: true, force: true })
}
