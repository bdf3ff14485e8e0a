/**
 * What a feature costs a plain transfer, in process (`npx tsx bench/experiments/transfer-cpu.ts
 * [--storage=sqlite|postgres] (--roots=DIR,DIR | --journal-off | --monitors | --schedules) [--rounds=N] [--transfers=N]
 * [--chunk=N] [--concurrency=N] [--schedules=N] [--statements]`): transfers of 1 gold from a wallet by key to a
 * wallet by id, sent with Fastify's `inject` by `concurrency` clients at once (32), so that group
 * commit forms batches as under load. The figure is CPU per transfer: this process's (user +
 * system) and, on PostgreSQL, the server's (its processes, from /proc). On a busy machine the
 * subjects take turns in chunks (ABBA…), so that the other load weighs on both alike; each round
 * prints both and their ratio, and the end the median ratio and its range. Each chunk's figure
 * counts the `--settle` ms (500) after its last answer, when background jobs (the journal's
 * sequencer) finish the work it left them.
 *
 * - `--roots=A,B,…`: the apps of two or more checkouts (say the commit before a feature landed,
 *   and this one), each on its own store; the ratio of each to the first (B ÷ A, …).
 * - `--journal-off`: the journal alone, this build with and without it: this checkout's `src` copied
 *   to a temporary directory with the journal's work on the write path taken out (its sequencer
 *   never starts nor is woken; on PostgreSQL the default and the index of the writer's id it reads
 *   each transaction by are dropped), against this checkout; ratio on ÷ off.
 * - `--statements` (SQLite): each subject's time in SQLite by statement text, a transfer, ranked
 *   by how much dearer the second subject's is (`bench/statement-timing.ts`).
 * - `--monitors`: one app; chunks of transfers among the same wallets, in turn without monitors and
 *   with a monitor on gold that never crosses (below 1) on every wallet, added before the chunk and
 *   deleted after it. Ratio monitored ÷ plain; `--control` compares plain with plain.
 * - `--schedules`: one app; `--schedules` (1,000) one-off schedules between the same wallets, due at
 *   one instant, while transfers run in chunks from before it until after the last run. Chunks
 *   before the instant are the baseline, those between it and the last run the figure: CPU per
 *   transfer (the runner's work included, as it shares the process) and transfers/s of wall time.
 */
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import type { FastifyInstance } from 'fastify'
import { processTreeCpuMs } from '../cpu.ts'
import type { ProfileWindow } from '../profile.ts'
import { buildAppAt, injector, signUpWithKey } from '../in-process.ts'
import { dropWriterXid, journalOffCopy } from '../journal-off.ts'
import { startPostgres, type BenchPostgres } from '../postgres.ts'
import { StatementTiming } from '../statement-timing.ts'

const args = process.argv.slice(2)
const option = (name: string) => args.find((arg) => arg.startsWith(`--${name}=`))?.slice(name.length + 3)
const STORAGE = (option('storage') ?? 'sqlite') as 'sqlite' | 'postgres'
const JOURNAL_OFF = args.includes('--journal-off')
const ROOTS = option('roots')
  ?.split(',')
  .map((root) => path.resolve(root))
const MODE = ROOTS || JOURNAL_OFF ? 'roots' : args.includes('--schedules') ? 'schedules' : 'monitors'
const ROUNDS = Number(option('rounds') ?? 5)
const TRANSFERS = Number(option('transfers') ?? 4000)
const CHUNK = Number(option('chunk') ?? 500)
const CONCURRENCY = Number(option('concurrency') ?? 32)
const SCHEDULES = Number(option('schedules') ?? 1000)
const WALLETS = 50
/** Idle time counted after each chunk, so that the background work it causes is counted with it. */
const SETTLE_MS = Number(option('settle') ?? 500)
/** `--windows=FILE`: each chunk's label and span (µs of the monotonic clock, as V8's profiles), for `bench/profile.ts --windows`. */
const WINDOWS = option('windows')
/** `--statements` (SQLite): each subject's statements timed by text, printed at the end. */
const statements = args.includes('--statements') ? new StatementTiming() : undefined
/** Transfers measured by subject, for `statements`' figures a transfer. */
const measured = new Map<string, number>()
const windows: ProfileWindow[] = []
const ROOT = path.resolve(import.meta.dirname, '../..')
const ADMIN_KEY = 'cfa_transfer_cpu_bench_admin_key_not_a_secret'

interface Wallet {
  walletId: number
  key: string
  session: string
}

interface App {
  app: FastifyInstance
  call: ReturnType<typeof injector>
  database: { db: import('kysely').Kysely<any> } // eslint-disable-line @typescript-eslint/no-explicit-any
  close(): Promise<void>
}

/** A subject: wallets that send among themselves, in an app. */
interface Subject {
  label: string
  app: FastifyInstance
  wallets: Wallet[]
  /** Set-up and tear-down around each of its chunks, outside the measurement. */
  before?(): Promise<void>
  after?(): Promise<void>
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? NaN
const load = () =>
  os
    .loadavg()
    .map((value) => value.toFixed(1))
    .join(' ')

/** The app of the checkout at `root` on a fresh store (a new database on `server` for PostgreSQL). */
async function buildAt(root: string, server: BenchPostgres | undefined, name: string): Promise<App> {
  const databaseUrl = server ? await server.createDatabase(`${name}_${Date.now().toString(36)}`) : undefined
  const { app, database, close } = await buildAppAt(root, ADMIN_KEY, databaseUrl, 'coffer-transfer-cpu')
  return {
    app,
    call: injector(app, root),
    database,
    close,
  }
}

/** `count` users holding a billion gold each (the asset made first when `gold` is undefined), with a key each. */
async function wallets({ call }: App, prefix: string, count: number, gold: { id: number }): Promise<Wallet[]> {
  const admin = { authorization: `Bearer ${ADMIN_KEY}` }
  const made: Wallet[] = []
  for (let i = 0; i < count; i++) {
    const wallet = await signUpWithKey(call, `${prefix}${i}`)
    await call({ method: 'POST', url: `/wallets/${wallet.walletId}/assets`, headers: admin, payload: { id: gold.id, quantity: 1e9 } }, 201)
    made.push(wallet)
  }
  return made
}

const goldIn = ({ call }: App) =>
  call({ method: 'POST', url: '/assets', headers: { authorization: `Bearer ${ADMIN_KEY}` }, payload: { name: 'gold', value: 1 } }, 201)

/** `count` transfers among the subject's wallets by CONCURRENCY clients: CPU µs of this process and of the server, and wall µs. */
async function measure(subject: Subject, count: number, serverPid?: number): Promise<{ cpu: number; server: number; wall: number }> {
  await subject.before?.()
  let left = count
  const { wallets } = subject
  const client = async () => {
    while (left-- > 0) {
      const from = wallets[Math.floor(Math.random() * wallets.length)]
      let to = wallets[Math.floor(Math.random() * wallets.length)]
      while (to === from) to = wallets[Math.floor(Math.random() * wallets.length)]
      const response = await subject.app.inject({
        method: 'POST',
        url: '/wallet/transactions',
        headers: { authorization: `Bearer ${from.key}`, 'content-type': 'application/json' },
        payload: JSON.stringify({ recipient: String(to.walletId), type: 2, assets: { gold: 1 } }),
      })
      if (response.statusCode !== 201) throw new Error(`${subject.label}: ${response.statusCode} ${response.body}`)
    }
  }
  const serverBefore = serverPid ? processTreeCpuMs(serverPid) : 0
  const before = process.cpuUsage()
  const started = process.hrtime.bigint()
  if (statements) statements.label = subject.label
  await Promise.all(Array.from({ length: CONCURRENCY }, client))
  const wall = Number(process.hrtime.bigint() - started) / 1000
  // The work a chunk leaves to background jobs (the journal's sequencer waits up to 250 ms after a commit) is counted with it.
  await new Promise((resolve) => setTimeout(resolve, SETTLE_MS))
  if (statements) statements.label = undefined
  measured.set(subject.label, (measured.get(subject.label) ?? 0) + count)
  const used = process.cpuUsage(before)
  const server = serverPid ? (processTreeCpuMs(serverPid) - serverBefore) * 1000 : 0
  if (WINDOWS) windows.push({ label: subject.label, start: Number(started / 1000n), end: Number(process.hrtime.bigint() / 1000n), count })
  await subject.after?.()
  return { cpu: used.user + used.system, server, wall }
}

/** Subjects taking turns in chunks (forward, then backward), ROUNDS times; prints CPU per transfer and each ratio to the first. */
async function alternate(subjects: Subject[], serverPid: number | undefined): Promise<void> {
  for (const subject of subjects) await measure(subject, CHUNK, serverPid)
  // The warm-up chunks are not counted.
  statements?.spent.clear()
  measured.clear()
  const ratios: number[][] = subjects.slice(1).map(() => [])
  const serverRatios: number[][] = subjects.slice(1).map(() => [])
  const order = subjects.map((_, i) => i)
  for (let round = 1; round <= ROUNDS; round++) {
    const spent = subjects.map(() => ({ cpu: 0, server: 0, count: 0 }))
    for (let done = 0, pass = 0; done < TRANSFERS; done += CHUNK, pass++) {
      for (const which of pass % 2 === 0 ? order : [...order].reverse()) {
        const { cpu, server } = await measure(subjects[which], CHUNK, serverPid)
        spent[which].cpu += cpu
        spent[which].server += server
        spent[which].count += CHUNK
      }
    }
    const per = spent.map(({ cpu, server, count }) => ({ cpu: cpu / count, server: server / count }))
    for (let i = 1; i < subjects.length; i++) {
      ratios[i - 1].push((per[i].cpu + per[i].server) / (per[0].cpu + per[0].server))
      if (serverPid) serverRatios[i - 1].push(per[i].server / per[0].server)
    }
    const shown = per.map(
      ({ cpu, server }, i) => `${subjects[i].label} ${cpu.toFixed(0)}${serverPid ? ` + server ${server.toFixed(0)}` : ''}`,
    )
    const last = ratios.map((each) => each.at(-1)?.toFixed(3)).join(' ')
    console.log(`round ${round} (load ${load()}): ${shown.join('   ')} µs/transfer; ratio ${last}`)
  }
  const range = (values: number[]) => `${Math.min(...values).toFixed(3)}-${Math.max(...values).toFixed(3)}`
  for (let i = 1; i < subjects.length; i++) {
    const label = `${subjects[i].label} ÷ ${subjects[0].label}`
    console.log(`${label}, CPU per transfer: median ${median(ratios[i - 1]).toFixed(3)} (range ${range(ratios[i - 1])})`)
    if (serverPid)
      console.log(`  the server's part alone: median ${median(serverRatios[i - 1]).toFixed(3)} (range ${range(serverRatios[i - 1])})`)
  }
  if (statements) console.log(statements.report(measured))
}

async function roots(server: BenchPostgres | undefined, apps: App[]): Promise<void> {
  const copy = JOURNAL_OFF ? journalOffCopy(ROOT) : undefined
  const subjects: Subject[] = []
  for (const [i, root] of (copy ? [copy.root, ROOT] : (ROOTS as string[])).entries()) {
    const built = await buildAt(root, server, `roots${i}`)
    apps.push(built)
    if (copy && i === 0) {
      const close = built.close
      built.close = async () => {
        await close()
        copy.remove()
      }
      if (server) await dropWriterXid(built.database.db)
    }
    subjects.push({
      label: copy ? (i === 0 ? 'journal off' : 'journal on') : path.basename(root) || root,
      app: built.app,
      wallets: await wallets(built, 'cpu', WALLETS, await goldIn(built)),
    })
  }
  await alternate(subjects, server?.pid)
}

async function monitors(server: BenchPostgres | undefined, apps: App[]): Promise<void> {
  const built = await buildAt(ROOT, server, 'monitors')
  apps.push(built)
  const group = await wallets(built, 'cpu', WALLETS, await goldIn(built))
  const as = (wallet: Wallet) => ({ authorization: `Bearer ${wallet.session}` })
  let ids: number[] = []
  // The same wallets either way: each of their chunks starts by adding the monitors and ends by deleting them.
  const watched: Subject = {
    label: 'a monitor each',
    app: built.app,
    wallets: group,
    async before() {
      ids = []
      for (const wallet of group)
        ids.push(
          (await built.call({ method: 'POST', url: '/wallet/monitors', headers: as(wallet), payload: { asset: 'gold', below: 1 } }, 201))
            .id,
        )
    },
    async after() {
      for (const [i, wallet] of group.entries()) {
        const response = await built.app.inject({ method: 'DELETE', url: `/wallet/monitors/${ids[i]}`, headers: as(wallet) })
        if (response.statusCode !== 204) throw new Error(`deleting a monitor: ${response.statusCode} ${response.body}`)
      }
    },
  }
  // `--control`: both sides without monitors, the noise floor of the comparison.
  const control = { label: 'no monitor again', app: built.app, wallets: group }
  await alternate([{ label: 'no monitor', app: built.app, wallets: group }, args.includes('--control') ? control : watched], server?.pid)
}

async function schedules(server: BenchPostgres | undefined, apps: App[]): Promise<void> {
  const built = await buildAt(ROOT, server, 'schedules')
  apps.push(built)
  const subject: Subject = { label: 'transfers', app: built.app, wallets: await wallets(built, 'sched', WALLETS, await goldIn(built)) }
  await measure(subject, CHUNK, server?.pid)
  const dueAt = Math.ceil((Date.now() + 20_000 + SCHEDULES * 30) / 1000) * 1000
  for (let i = 0; i < SCHEDULES; i++) {
    const from = subject.wallets[i % WALLETS]
    await built.call(
      {
        method: 'POST',
        url: '/wallet/schedules',
        headers: { authorization: `Bearer ${from.session}` },
        payload: {
          recipient: `sched${(i + 1) % WALLETS}`,
          assets: { gold: 1 },
          memo: `bench ${i}`,
          start_at: new Date(dueAt).toISOString(),
        },
      },
      201,
    )
  }
  console.log(`${SCHEDULES} schedules due at ${new Date(dueAt).toISOString()}, ${((dueAt - Date.now()) / 1000).toFixed(1)} s ahead`)
  const ran = async () =>
    Number(
      (
        await built.database.db
          .selectFrom('transactions')
          .select((eb) => eb.fn.countAll().as('n'))
          .where('schedule_id', 'is not', null)
          .executeTakeFirstOrThrow()
      ).n,
    )
  let lastRunAt: number | undefined
  let stop = false
  const watch = (async () => {
    while (!stop && lastRunAt === undefined) {
      if (Date.now() >= dueAt && (await ran()) >= SCHEDULES) lastRunAt = Date.now()
      else await new Promise((resolve) => setTimeout(resolve, 250))
    }
  })()
  const chunks: { start: number; end: number; cpu: number; server: number; wall: number }[] = []
  const baselineFrom = dueAt - 15_000
  while (Date.now() < baselineFrom) await new Promise((resolve) => setTimeout(resolve, 100))
  while (lastRunAt === undefined ? Date.now() < dueAt + 120_000 : Date.now() < lastRunAt + 15_000) {
    const start = Date.now()
    const figures = await measure(subject, CHUNK, server?.pid)
    chunks.push({ start, end: Date.now(), ...figures })
  }
  stop = true
  await watch
  if (lastRunAt === undefined) console.log(`not all ran within 120 s: ${await ran()} of ${SCHEDULES}`)
  const end = lastRunAt ?? dueAt + 120_000
  console.log(`all ${SCHEDULES} ran ${((end - dueAt) / 1000).toFixed(1)} s after falling due (load ${load()})`)
  const phase = (name: string, keep: (chunk: (typeof chunks)[number]) => boolean) => {
    const kept = chunks.filter(keep)
    const sum = (pick: (chunk: (typeof chunks)[number]) => number) => kept.reduce((total, chunk) => total + pick(chunk), 0)
    const count = kept.length * CHUNK
    const figure = { cpu: sum((c) => c.cpu + c.server) / count, perSecond: count / (sum((c) => c.wall) / 1e6) }
    console.log(
      `${name}: ${kept.length} chunks, ${figure.cpu.toFixed(0)} µs CPU per transfer${server ? ' (service + server)' : ''}, ${figure.perSecond.toFixed(0)} transfers/s`,
    )
    return figure
  }
  const before = phase('before the instant', (chunk) => chunk.end <= dueAt)
  const during = phase('while they ran', (chunk) => chunk.start >= dueAt && chunk.end <= end)
  const after = phase('after the last run', (chunk) => chunk.start >= end)
  console.log(
    `while ÷ before: CPU per transfer ${(during.cpu / before.cpu).toFixed(3)}, transfers/s ${(during.perSecond / before.perSecond).toFixed(3)}; ` +
      `while ÷ after: CPU ${(during.cpu / after.cpu).toFixed(3)}, transfers/s ${(during.perSecond / after.perSecond).toFixed(3)}`,
  )
}

async function main(): Promise<void> {
  const server = STORAGE === 'postgres' ? await startPostgres() : undefined
  const apps: App[] = []
  console.log(`${MODE}, ${STORAGE}, load average ${load()}, ${CONCURRENCY} clients, chunks of ${CHUNK}`)
  statements?.install()
  try {
    await { roots, monitors, schedules }[MODE](server, apps)
  } finally {
    for (const built of apps) await built.close()
    await server?.stop()
    if (WINDOWS) fs.writeFileSync(WINDOWS, JSON.stringify(windows))
  }
}

await main()
