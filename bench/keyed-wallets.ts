/**
 * The keyed wallets' table, measured side by side in one run on one storage: 100 wallets with a key each
 * and 20 users each, sending by key to a random other wallet by id; their history page at about
 * 100 and about 100,000 transactions each; their balances; and the storage's plain durable loop
 * (SQLite: `references.ts`; PostgreSQL: pgbench tpcb-like, prepared) right before the transfers.
 * `run.ts` starts the service and measures; this file orders the steps and prints the table.
 */
import fs from 'node:fs'
import path from 'node:path'
import { PGBENCH_SCALE, runTpcb, type BenchPostgres } from './postgres.ts'
import { runSqliteLoop } from './references.ts'
import type { KeyedScenario, ScenarioName, ScenarioResult } from './load-jobs.ts'
import { seedHistoryDirectly, seedKeyedHistoryThroughApi, seedKeyedWallets, type Seeded } from './seed.ts'

/** The load: wallets with a key each, and users assigned to each (its owner included). */
export const KEYED_WALLETS = 100
export const USERS_PER_WALLET = 20
/** Transactions in each wallet's history for the short case, written through the API. */
const SHORT_HISTORY = 100
/**
 * Transactions written through the API on top of the long history (written straight into the
 * database), so that the page measured shows rows exactly as the ledger writes them.
 */
const TOP_UP = 20

/** The targets of this load. */
const TARGETS = { historyPerTransfer: 2.5, longHistoryCost: 1.5, transfersPerReference: 1, p99Ms: 25 }

export interface Reference {
  name: string
  perSecond: number
  detail: string
}

export interface KeyedRun {
  results: Partial<Record<KeyedScenario, ScenarioResult>>
  /** The reference right before the transfers (the one the targets compare with), and again right after them: how much the machine moved meanwhile. */
  reference?: Reference
  referenceAfter?: Reference
  /** Transactions in each wallet's history for the long case. */
  longHistory: number
}

export interface KeyedContext {
  storage: 'sqlite' | 'postgres'
  url: string
  adminKey: string
  seeded: Seeded
  dataDir: string
  databaseUrl?: string
  /** PostgreSQL only: the server, with a `pgbench` database that `pgbench -i` has filled. */
  server?: BenchPostgres
  selected: (scenario: KeyedScenario) => boolean
  connections: number
  referenceSeconds: number
  longHistory: number
  measure: (scenario: ScenarioName) => Promise<ScenarioResult>
  log: (message: string) => void
  track: (pid: number) => void
}

/**
 * Seeds the keyed wallets and their short history, then measures the history page, balances, the
 * storage's reference and, right after it, transfers. Before (a)-(h), which write among the same
 * wallets, so that these figures are not moved by them.
 */
export async function runKeyedFirst(context: KeyedContext): Promise<KeyedRun> {
  const { storage, url, seeded, log } = context
  const run: KeyedRun = { results: {}, longHistory: context.longHistory }
  log(
    `${storage}: keyed wallets: ${KEYED_WALLETS} wallets with a key and ${USERS_PER_WALLET} users each, about ${SHORT_HISTORY} transactions of history each (through the API)`,
  )
  const started = Date.now()
  seeded.keyed = await seedKeyedWallets(url, context.adminKey, seeded, seeded.traders.slice(0, KEYED_WALLETS), USERS_PER_WALLET)
  log(`${storage}: keyed wallets: wallets, users and keys in ${((Date.now() - started) / 1000).toFixed(0)} s`)
  await seedKeyedHistoryThroughApi(url, seeded.keyed, SHORT_HISTORY)
  log(`${storage}: keyed wallets: seeded in ${((Date.now() - started) / 1000).toFixed(0)} s`)
  for (const scenario of ['history100', 'balances'] as const)
    if (context.selected(scenario)) run.results[scenario] = await context.measure(scenario)
  if (context.selected('transfers')) {
    run.reference = await measureReference(context, 'before')
    run.results.transfers = await context.measure('transfers')
    run.referenceAfter = await measureReference(context, 'after')
  }
  return run
}

/**
 * Grows every keyed wallet's history to about `longHistory` transactions (straight into the
 * database, then a few through the API on top) and measures the history page again. After
 * (a)-(h), so that the large tables do not move their figures.
 */
export async function runKeyedSecond(context: KeyedContext, run: KeyedRun): Promise<void> {
  const { storage, seeded, log } = context
  if (!context.selected('history100k') || !seeded.keyed) return
  const wallets = seeded.keyed.wallets.map((wallet) => wallet.walletId)
  const count = (context.longHistory * wallets.length) / 2
  log(
    `${storage}: keyed wallets: writing ${count} transactions of history straight into the database (about ${context.longHistory} per wallet)`,
  )
  const started = Date.now()
  await seedHistoryDirectly(
    context.databaseUrl ? { databaseUrl: context.databaseUrl } : { dataDir: context.dataDir },
    wallets,
    seeded.keyed.assetIds,
    count,
  )
  await seedKeyedHistoryThroughApi(context.url, seeded.keyed, TOP_UP)
  log(`${storage}: keyed wallets: history written in ${((Date.now() - started) / 1000).toFixed(0)} s`)
  run.results.history100k = await context.measure('history100k')
}

/** The storage's plain durable loop, for as long as a scenario is measured (SQLite's on a fresh file each time). */
async function measureReference(context: KeyedContext, when: 'before' | 'after'): Promise<Reference> {
  const seconds = context.referenceSeconds
  let reference: Reference
  if (context.server) {
    const result = await runTpcb(context.server, 'pgbench', context.connections, seconds, context.track)
    reference = {
      name: 'pgbench tpcb-like (TPS)',
      perSecond: result.tps,
      detail: `pgbench -s ${PGBENCH_SCALE} -c ${context.connections} -j 2 -T ${seconds} -M prepared, average latency ${result.latencyMs.toFixed(2)} ms`,
    }
  } else {
    const dir = path.join(context.dataDir, `reference-${when}`)
    fs.mkdirSync(dir, { recursive: true })
    const result = runSqliteLoop(dir, seconds)
    reference = {
      name: 'plain SQLite durable loop (commits/s)',
      perSecond: result.commitsPerSecond,
      detail: `${result.commits} commits in ${result.seconds.toFixed(1)} s, one thread, WAL, synchronous=FULL`,
    }
  }
  context.log(
    `${context.storage}: keyed wallets: reference ${when} the transfers, ${reference.name}: ${reference.perSecond.toFixed(0)}/s (${reference.detail})`,
  )
  return reference
}

/** The table for one storage: figures, ratios, and each target met or missed. */
export function keyedRows(storage: string, run: KeyedRun): string[][] {
  const { transfers, history100, history100k, balances } = run.results
  const perSecond = (result: ScenarioResult | undefined) => (result ? `${result.okPerSecond.toFixed(0)}/s` : '-')
  const p99 = (result: ScenarioResult | undefined) => (result ? `${result.p99.toFixed(1)} ms` : '-')
  const verdict = (ok: boolean | undefined) => (ok === undefined ? '' : ok ? 'met' : 'MISSED')
  const ratio = (numerator: number | undefined, denominator: number | undefined) =>
    numerator !== undefined && denominator ? numerator / denominator : undefined
  const fixed = (value: number | undefined) => (value === undefined ? '-' : value.toFixed(2))
  const rows: string[][] = [[`${storage}: keyed wallets`, 'req/s', 'p99', 'ratio', 'target', '']]
  rows.push([
    'transfers (POST /wallet/transactions)',
    perSecond(transfers),
    p99(transfers),
    '',
    `p99 ≤ ${TARGETS.p99Ms} ms`,
    verdict(transfers && transfers.p99 <= TARGETS.p99Ms),
  ])
  for (const [name, result] of [
    ['history page, ~100 txs', history100],
    [`history page, ~${run.longHistory.toLocaleString('en')} txs`, history100k],
  ] as const) {
    const share = ratio(result?.okPerSecond, transfers?.okPerSecond)
    const ok = result && share !== undefined ? share >= TARGETS.historyPerTransfer && result.p99 <= TARGETS.p99Ms : undefined
    rows.push([
      `${name} (GET /wallet/transactions?limit=10)`,
      perSecond(result),
      p99(result),
      `${fixed(share)} × transfers`,
      `≥ ${TARGETS.historyPerTransfer} ×, p99 ≤ ${TARGETS.p99Ms} ms`,
      verdict(ok),
    ])
  }
  // The cost of a page: its time from outside (1 ÷ req/s), and the service's CPU per page beside it.
  const cost = ratio(history100?.okPerSecond, history100k?.okPerSecond)
  const cpu = ratio(history100k?.serviceCpuUs, history100?.serviceCpuUs)
  rows.push([
    'history page cost, long ÷ short (service CPU)',
    '',
    '',
    `${fixed(cost)} (${fixed(cpu)})`,
    `≤ ${TARGETS.longHistoryCost}`,
    verdict(cost === undefined ? undefined : cost <= TARGETS.longHistoryCost),
  ])
  rows.push([
    'balances (GET /wallet/assets)',
    perSecond(balances),
    p99(balances),
    `${fixed(ratio(balances?.okPerSecond, transfers?.okPerSecond))} × transfers`,
    '',
    '',
  ])
  const { reference, referenceAfter } = run
  const after = referenceAfter ? `${referenceAfter.perSecond.toFixed(0)}/s right after` : ''
  rows.push([
    reference ? `${reference.name}, right before` : 'reference',
    reference ? `${reference.perSecond.toFixed(0)}/s` : '-',
    '',
    after,
    '',
    '',
  ])
  const beat = ratio(transfers?.okPerSecond, reference?.perSecond)
  rows.push([
    'transfers ÷ reference',
    '',
    '',
    fixed(beat),
    `≥ ${TARGETS.transfersPerReference.toFixed(1)}`,
    verdict(beat === undefined ? undefined : beat >= TARGETS.transfersPerReference),
  ])
  return rows
}
