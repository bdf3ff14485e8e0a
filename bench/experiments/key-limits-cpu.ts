/**
 * What a wallet key's limits cost a transfer, in process (`npx tsx bench/experiments/key-limits-cpu.ts
 * [--storage=sqlite|postgres] [--root=DIR] [--warmup=N] [--rounds=N] [--transfers=N] [--concurrency=N]`):
 * 20 wallets, each with two keys of scopes `read` and `send`, one without limits and one with
 * every limit (1,000 per transfer, a per_day cap far above what it moves, every wallet as a
 * recipient). Transfers of 1 gold to a wallet by id at random (`POST /wallet/transactions`), sent
 * with Fastify's `inject` by `concurrency` clients at once so that group commit forms batches as
 * under load. First `warmup` transfers (2,000) through each capped key, so that each has that many
 * uses in its window and a cost that grew with them would show; then the two kinds of key take
 * turns in chunks, so that the machine's other load weighs on both alike. Per round it prints the
 * process's CPU (user + system) per transfer of each and the capped key's extra cost. `--root` runs
 * the app of another checkout (say, main) in the same way.
 */
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import type { FastifyInstance } from 'fastify'
import { createDatabase, startPostgres, type TestPostgres } from '../../scripts/lib/postgres.ts'
import { buildAppAt, injector, signUpWithKey } from '../in-process.ts'

const args = process.argv.slice(2)
const option = (name: string) => args.find((arg) => arg.startsWith(`--${name}=`))?.slice(name.length + 3)
const STORAGE = (option('storage') ?? 'sqlite') as 'sqlite' | 'postgres'
const ROOT = path.resolve(option('root') ?? path.join(import.meta.dirname, '../..'))
const WARMUP = Number(option('warmup') ?? 2_000)
const ROUNDS = Number(option('rounds') ?? 3)
const TRANSFERS = Number(option('transfers') ?? 4_000)
const CONCURRENCY = Number(option('concurrency') ?? 32)
const CHUNK = 200
const WALLETS = 20
const ADMIN_KEY = 'cfa_key_limits_cpu_bench_admin_key_not_a_secret'

type Keys = { walletId: number; token: string }[]

/** The app of the checkout at `root` on a fresh store, and its wallets' keys without limits and with every limit. */
async function setUp(databaseUrl: string | undefined) {
  const { app, database, dataDir } = await buildAppAt(ROOT, ADMIN_KEY, databaseUrl, 'coffer-key-limits-cpu')
  const call = injector(app, 'key-limits-cpu')
  const admin = { authorization: `Bearer ${ADMIN_KEY}` }
  const gold = await call({ method: 'POST', url: '/assets', headers: admin, payload: { name: 'gold', value: 1 } }, 201)
  const users: Awaited<ReturnType<typeof signUpWithKey>>[] = []
  for (let i = 0; i < WALLETS; i++) {
    const user = await signUpWithKey(call, `keys${i}`)
    await call({ method: 'POST', url: `/wallets/${user.walletId}/assets`, headers: admin, payload: { id: gold.id, quantity: 1e12 } }, 201)
    users.push(user)
  }
  const keysWith = async (limits?: object): Promise<Keys> =>
    Promise.all(
      users.map(async (user) => {
        const payload = { name: 'bench', scopes: ['read', 'send'], ...(limits ? { limits } : {}) }
        const key = await call(
          { method: 'POST', url: '/wallet/sessions', headers: { authorization: `Bearer ${user.session}` }, payload },
          201,
        )
        return { walletId: user.walletId, token: key.token as string }
      }),
    )
  const plain = await keysWith()
  const capped = await keysWith({
    per_transfer: { gold: 1_000 },
    per_day: { gold: 1e15 },
    recipients: users.map((user) => user.walletId),
  })
  return {
    app,
    plain,
    capped,
    async close() {
      await app.close()
      await database.close()
      fs.rmSync(dataDir, { recursive: true, force: true })
    },
  }
}

/** `count` transfers through `keys` by `CONCURRENCY` clients: this process's CPU they took, in µs. */
async function measure(app: FastifyInstance, keys: Keys, count: number): Promise<number> {
  let left = count
  const client = async () => {
    while (left-- > 0) {
      const from = keys[Math.floor(Math.random() * keys.length)]
      let to = keys[Math.floor(Math.random() * keys.length)]
      while (to.walletId === from.walletId) to = keys[Math.floor(Math.random() * keys.length)]
      const response = await app.inject({
        method: 'POST',
        url: '/wallet/transactions',
        headers: { authorization: `Bearer ${from.token}`, 'content-type': 'application/json' },
        payload: JSON.stringify({ recipient: String(to.walletId), type: 2, assets: { gold: 1 } }),
      })
      if (response.statusCode !== 201) throw new Error(`${response.statusCode} ${response.body}`)
    }
  }
  const before = process.cpuUsage()
  await Promise.all(Array.from({ length: CONCURRENCY }, client))
  const used = process.cpuUsage(before)
  return used.user + used.system
}

async function main(): Promise<void> {
  let server: TestPostgres | undefined
  let url: string | undefined
  if (STORAGE === 'postgres') {
    server = await startPostgres({ name: 'coffer-key-limits-cpu' })
    url = await createDatabase(server.url)
  }
  const subject = await setUp(url)
  try {
    await measure(subject.app, subject.capped, WARMUP * WALLETS)
    await measure(subject.app, subject.plain, 2_000)
    console.log(`${STORAGE}, ${ROOT}, ${WARMUP} uses per capped key first, load average ${os.loadavg()[0].toFixed(1)}`)
    const ratios: number[] = []
    for (let round = 1; round <= ROUNDS; round++) {
      const spent = { plain: 0, capped: 0 }
      for (let done = 0, pair = 0; done < TRANSFERS; done += CHUNK, pair++) {
        const order = pair % 2 === 0 ? (['plain', 'capped'] as const) : (['capped', 'plain'] as const)
        for (const which of order) spent[which] += await measure(subject.app, subject[which], CHUNK)
      }
      const transfers = Math.ceil(TRANSFERS / CHUNK) * CHUNK
      const ratio = spent.capped / spent.plain
      ratios.push(ratio)
      console.log(
        `round ${round} (load ${os.loadavg()[0].toFixed(1)}): without limits ${(spent.plain / transfers).toFixed(1)} µs CPU per transfer, ` +
          `with every limit ${(spent.capped / transfers).toFixed(1)} µs: ${((ratio - 1) * 100).toFixed(1)} % extra`,
      )
    }
    const median = [...ratios].sort((a, b) => a - b)[Math.floor(ratios.length / 2)]
    console.log(`median: ${((median - 1) * 100).toFixed(1)} % extra (target ≤ 10 %), load average ${os.loadavg()[0].toFixed(1)}`)
  } finally {
    await subject.close()
    await server?.stop()
  }
}

await main()
