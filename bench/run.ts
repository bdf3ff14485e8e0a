/**
 * The bench (`npm run bench -- <scenario>… [options]`, `npm run bench -- --list`): each scenario is
 * a program in bench/scenarios/, run as a child process with the options given; the HTTP load
 * scenarios named together share one run (one service and one seeding per storage). What each
 * scenario measures and prints: bench/README.md.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { fileURLToPath } from 'node:url'

interface Scenario {
  name: string
  program: string
  load: string
}

const HTTP_LOAD = 'http-load.ts'
/** Programs that run every scenario named for them in one run. */
const SHARED = [HTTP_LOAD, 'features.ts']

const SCENARIOS: Scenario[] = [
  {
    name: 'transfers',
    program: HTTP_LOAD,
    load: 'transfers among 1,000 wallets over HTTP: spread out, to one hot receiver, from one hot sender, batches of 100, holds; /healthz',
  },
  { name: 'history', program: HTTP_LOAD, load: "a wallet's history page at 100 and at 100,000 transactions" },
  {
    name: 'keyed-wallets',
    program: HTTP_LOAD,
    load: '100 wallets with a key and 20 users each: transfers by key, balances, history pages; beside the storage’s durable loop',
  },
  { name: 'history-under-writes', program: HTTP_LOAD, load: 'history pages of the keyed wallets read while their transfers commit' },
  { name: 'request-ladder', program: HTTP_LOAD, load: 'requests that run more and more of a transfer’s path, from /healthz to a transfer' },
  { name: 'connection-sweep', program: HTTP_LOAD, load: 'transfers and /healthz at 1 to 128 connections, among 10 to 1,000 wallets' },
  {
    name: 'webhooks',
    program: HTTP_LOAD,
    load: 'transfers with webhooks at a slow and a fast origin, then both at 50 ms; the backlog drains',
  },
  {
    name: 'several-instances',
    program: 'several-instances.ts',
    load: 'webhook delivery under transfer load, one instance then three sharing the work (PostgreSQL)',
  },
  {
    name: 'bulk',
    program: 'bulk.ts',
    load: 'atomic batches of 100 transfers by key beside the storage’s batched references (in-process loop; pgbench), single transfers',
  },
  {
    name: 'ledger-size',
    program: 'ledger-size.ts',
    load: 'a ledger built to 10 million transactions through the API, its reads, verify, backup, restore and size at checkpoints',
  },
  { name: 'statements', program: 'statements.ts', load: 'balances in time and a whole CSV statement at 100,000 transactions of history' },
  { name: 'retention-size', program: 'retention-size.ts', load: 'database size per million transfers, before and after the retention job' },
  { name: 'verify-repair', program: 'verify-repair.ts', load: '`coffer verify` and `--repair` on a ledger of 200,000 transactions' },
  {
    name: 'journal',
    program: 'features.ts',
    load: 'transfers with and without the journal (--against), position and checkpoint lag, export, proofs, verify',
  },
  {
    name: 'journal-upgrade',
    program: 'features.ts',
    load: 'migration 0015 and the sequencer over a ledger of --transactions (100,000) written before it',
  },
  {
    name: 'schedules',
    program: 'features.ts',
    load: '1,000 schedules due at one instant beside transfers: time until all ran, transfers/s meanwhile',
  },
  { name: 'monitors', program: 'features.ts', load: 'transfers with a monitor on every wallet against none, taking turns' },
  {
    name: 'expiry',
    program: 'features.ts',
    load: 'transfers of an asset never expiring against one with 10 expiry dates per sender (--against)',
  },
  {
    name: 'key-limits',
    program: 'features.ts',
    load: 'transfers through wallet keys with every limit against keys without, taking turns',
  },
  { name: 'request-floor', program: 'request-floor.ts', load: 'CPU per request for requests that do little, in process (no socket)' },
]

const argv = process.argv.slice(2)
const names = argv.filter((arg) => !arg.startsWith('--'))
const options = argv.filter((arg) => arg.startsWith('--') && arg !== '--list')

if (names.length === 0 || argv.includes('--list')) {
  const width = Math.max(...SCENARIOS.map((scenario) => scenario.name.length))
  console.log('npm run bench -- <scenario>… [options]   (see bench/README.md)\n')
  for (const scenario of SCENARIOS) console.log(`  ${scenario.name.padEnd(width)}  ${scenario.load}`)
  process.exit(names.length === 0 && !argv.includes('--list') ? 2 : 0)
}

const unknown = names.filter((name) => !SCENARIOS.some((scenario) => scenario.name === name))
if (unknown.length > 0) {
  console.error(`unknown scenario ${unknown.join(', ')}; npm run bench -- --list names them`)
  process.exit(2)
}

/** The runs, in the order asked: the HTTP load scenarios together (at the first one's place), each other one alone. */
const runs: { program: string; names: string[] }[] = []
for (const name of names) {
  const { program } = SCENARIOS.find((scenario) => scenario.name === name) as Scenario
  const shared = SHARED.includes(program) ? runs.find((run) => run.program === program) : undefined
  if (shared) shared.names.push(name)
  else runs.push({ program, names: SHARED.includes(program) ? [name] : [] })
}

// Ctrl-C reaches the child too (same process group); a SIGTERM is passed on. Either way the child
// stops what it started, and this waits for it.
let running: ChildProcess | undefined
process.on('SIGINT', () => {})
process.on('SIGTERM', () => running?.kill('SIGTERM'))

for (const run of runs) {
  const file = fileURLToPath(new URL(`scenarios/${run.program}`, import.meta.url))
  const code = await new Promise<number>((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', file, ...run.names, ...options], { stdio: 'inherit' })
    running = child
    child.on('exit', (exitCode, signal) => resolve(exitCode ?? (signal ? 130 : 1)))
  })
  if (code !== 0) process.exit(code)
}
