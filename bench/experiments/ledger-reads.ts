/**
 * The reads of two ledgers kept by `ledger-size --keep`, taking turns on one machine under one load
 * (`npx tsx bench/experiments/ledger-reads.ts --stores=<small.json>,<large.json> [--rounds=9]
 * [--repeats=50]`): ten million against ten thousand, say, where two runs hours apart would compare
 * two loads instead of two sizes.
 *
 * Starts a service on each store (on PostgreSQL first a server on each kept directory, both with
 * the bench's settings) and, after one discarded block each to warm the caches, reads in rounds:
 * per read (the busy wallet's first history page, a deep page, its balances, its balances `as_of`
 * the start of the build) the median of `--repeats` requests on one store, then on the other, the
 * order swapped each round. Prints each round's medians and the ratio large ÷ small, then per read
 * the median ratio over the rounds (the figure against a target of 1.5), with the service's CPU a
 * request over all rounds (and the PostgreSQL server's; background work included) and the load
 * average. The stores stay as they were.
 */
import os from 'node:os'
import fs from 'node:fs'
import { Pool } from 'undici'
import { benchCleanups } from '../cleanups.ts'
import { processCpuMs, processTreeCpuMs } from '../cpu.ts'
import type { KeptStore } from '../kept-store.ts'
import { startPostgres } from '../postgres.ts'
import { startService } from '../service.ts'

const args = process.argv.slice(2)
const option = (name: string) => args.find((arg) => arg.startsWith(`--${name}=`))?.slice(name.length + 3)
const files = option('stores')?.split(',') ?? []
if (files.length !== 2) throw new Error('--stores=<small.json>,<large.json>: two files written by ledger-size --keep')
const ROUNDS = Number(option('rounds') ?? 9)
const REPEATS = Number(option('repeats') ?? 50)
const load = () => os.loadavg()[0].toFixed(1)

const cleanups = benchCleanups()

interface Opened {
  kept: KeptStore
  client: Pool
  servicePid: number
  serverPid?: number
}

async function open(file: string): Promise<Opened> {
  const kept = JSON.parse(fs.readFileSync(file, 'utf8')) as KeptStore
  let databaseUrl: string | undefined
  let serverPid: number | undefined
  if (kept.storage === 'postgres') {
    const server = await startPostgres({ databaseDir: kept.postgresDir })
    cleanups.push(() => server.stop())
    databaseUrl = server.url(kept.database as string)
    serverPid = server.pid
  }
  const service = await startService(
    { dataDir: kept.dataDir, databaseUrl, adminKey: kept.adminKey, logLevel: 'warn', startTimeoutMs: 600_000 },
    cleanups.track,
  )
  cleanups.push(() => service.stop())
  const client = new Pool(service.url, { connections: 1 })
  cleanups.push(() => client.close())
  return { kept, client, servicePid: service.pid, serverPid }
}

const reads = (kept: KeptStore): [string, string][] => [
  ['history, first page', '/wallet/transactions?limit=10'],
  ['history, deep page', `/wallet/transactions?limit=10&before=${kept.deepBefore}`],
  ['balances', '/wallet/assets'],
  ['balances as_of the start', `/wallet/assets?as_of=${encodeURIComponent(kept.asOf)}`],
]

/** The median ms of `REPEATS` requests of one read, and the CPU µs a request of the service and its server. */
async function block(store: Opened, url: string): Promise<{ ms: number; service: number; server: number }> {
  const times: number[] = []
  const [serviceAt, serverAt] = [processCpuMs(store.servicePid), store.serverPid ? processTreeCpuMs(store.serverPid) : NaN]
  for (let i = 0; i < REPEATS; i++) {
    const at = performance.now()
    const response = await store.client.request({ path: url, method: 'GET', headers: { authorization: `Bearer ${store.kept.busyKey}` } })
    const text = await response.body.text()
    if (response.statusCode !== 200) throw new Error(`GET ${url}: ${response.statusCode} ${text.slice(0, 300)}`)
    times.push(performance.now() - at)
  }
  times.sort((a, b) => a - b)
  return {
    ms: times[Math.floor(times.length / 2)],
    service: ((processCpuMs(store.servicePid) - serviceAt) * 1000) / REPEATS,
    server: store.serverPid ? ((processTreeCpuMs(store.serverPid) - serverAt) * 1000) / REPEATS : NaN,
  }
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]
const fixed = (value: number, digits = 2) => (Number.isNaN(value) ? '–' : value.toFixed(digits))

let failed = false
try {
  const stores = [] as Opened[]
  for (const file of files) stores.push(await open(file))
  const [small, large] = stores
  const names = stores.map((store) => store.kept.transactions.toLocaleString('en'))
  console.log(
    `${small.kept.storage} ${names[0]} against ${large.kept.storage} ${names[1]}: ${ROUNDS} rounds, medians of ${REPEATS}, load ${load()}`,
  )
  const kinds = reads(small.kept).map(([name], index) => ({ name, index }))
  for (const store of stores) for (const [, url] of reads(store.kept)) await block(store, url)
  const results = kinds.map(() => ({ ratios: [] as number[], small: [] as number[], large: [] as number[], cpu: [[], []] as number[][][] }))
  for (let round = 0; round < ROUNDS; round++) {
    const line: string[] = []
    for (const { name, index } of kinds) {
      const order = round % 2 === 0 ? [0, 1] : [1, 0]
      const measured: { ms: number; service: number; server: number }[] = []
      for (const which of order) measured[which] = await block(stores[which], reads(stores[which].kept)[index][1])
      const result = results[index]
      result.small.push(measured[0].ms)
      result.large.push(measured[1].ms)
      result.ratios.push(measured[1].ms / measured[0].ms)
      for (const which of [0, 1]) result.cpu[which].push([measured[which].service, measured[which].server])
      line.push(`${name} ${fixed(measured[0].ms)} / ${fixed(measured[1].ms)} ms (${fixed(measured[1].ms / measured[0].ms)} ×)`)
    }
    console.log(`round ${round + 1} (load ${load()}): ${line.join('; ')}`)
  }
  console.log(`\nmedians over ${ROUNDS} rounds, ${names[0]} → ${names[1]} (load ${load()}):`)
  for (const { name, index } of kinds) {
    const result = results[index]
    // Over all rounds: /proc counts in ticks of 10 ms, too coarse for one block.
    const mean = (values: number[]) => values.reduce((sum, value) => sum + value, 0) / values.length
    const cpu = (which: number) =>
      `${fixed(mean(result.cpu[which].map(([service]) => service)), 0)}${
        stores[which].serverPid ? ` + server ${fixed(mean(result.cpu[which].map(([, server]) => server)), 0)}` : ''
      } µs`
    console.log(
      `  ${name}: ${fixed(median(result.small))} → ${fixed(median(result.large))} ms, ratio ${fixed(median(result.ratios))} × ` +
        `(rounds ${fixed(Math.min(...result.ratios))}-${fixed(Math.max(...result.ratios))}); CPU a request ${cpu(0)} → ${cpu(1)}`,
    )
  }
} catch (error) {
  failed = true
  if (!cleanups.interrupted) console.error('failed:', error instanceof Error ? (error.stack ?? error.message) : error)
} finally {
  await cleanups.cleanUp()
}
process.exit(cleanups.interrupted ? 130 : failed ? 1 : 0)
