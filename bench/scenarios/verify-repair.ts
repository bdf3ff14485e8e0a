/**
 * `coffer verify --repair` on a large ledger
 * (`npm run bench -- verify-repair [--storage=sqlite|postgres] [--count=N] [--wallets=N]`).
 *
 * Writes `count` transactions straight into a fresh database between `wallets` wallets
 * (`seed.ts` seedHistoryDirectly: the running balances as the write path writes them), then
 * times, in this process: verify; a repair that finds nothing; after damaging one running balance
 * in a hundred (7 added, as if counted from another start, like the PostgreSQL race's), a repair and the
 * verify after it; and a second repair. Prints each time and the process's peak memory, which
 * must not grow with the ledger (the repair works set-based, one range of wallets at a time).
 * Asserts nothing about time. Everything started here is stopped at the end.
 */
import { sql } from 'kysely'
import { migrateToLatest } from '../../src/db/migrate.ts'
import { repairRunningBalances } from '../../src/ledger/repair.ts'
import { verifyLedger } from '../../src/ledger/verify.ts'
import { openBenchStore } from '../postgres.ts'
import { seedHistoryDirectly } from '../seed.ts'

const args = process.argv.slice(2)
const option = (name: string, fallback: string) => args.find((arg) => arg.startsWith(`--${name}=`))?.slice(name.length + 3) ?? fallback
const storage = option('storage', 'sqlite') as 'sqlite' | 'postgres'
const count = Number(option('count', '200000'))
const walletCount = Number(option('wallets', '5000'))

const log = (line: string) => console.log(`[repair ${storage}] ${line}`)

async function timed<T>(what: string, work: () => Promise<T>, describe: (result: T) => string): Promise<T> {
  const started = process.hrtime.bigint()
  const result = await work()
  const ms = Number(process.hrtime.bigint() - started) / 1e6
  log(`${what}: ${(ms / 1000).toFixed(2)} s, ${describe(result)}, peak RSS ${Math.round(process.resourceUsage().maxRSS / 1024)} MiB`)
  return result
}

async function main(): Promise<void> {
  const { database, databaseUrl, dataDir, close } = await openBenchStore(storage, 'repair', 4)
  try {
    const { db } = database
    await migrateToLatest(db)
    const now = new Date().toISOString()
    const owner = await db
      .insertInto('users')
      .values({ username: 'bench', username_key: 'bench', password_hash: 'x', primary_wallet_id: null, created_at: now })
      .returning('id')
      .executeTakeFirstOrThrow()
    const wallets: number[] = []
    for (let start = 0; start < walletCount; start += 500) {
      const rows = Array.from({ length: Math.min(500, walletCount - start) }, (_, i) => ({
        address: `bench${start + i}`,
        user_id: owner.id,
        created_at: now,
        deleted_at: null,
      }))
      wallets.push(...(await db.insertInto('wallets').values(rows).returning('id').execute()).map((row) => Number(row.id)))
    }
    const assets = await db
      .insertInto('assets')
      .values(['gold', 'silver'].map((name) => ({ name, name_key: name, value: 1, created_at: now, deleted_at: null })))
      .returning('id')
      .execute()
    await timed(
      'seeding',
      () =>
        seedHistoryDirectly(
          databaseUrl ? { databaseUrl } : { dataDir },
          wallets,
          assets.map((asset) => Number(asset.id)),
          count,
        ),
      () => `${count} transactions between ${walletCount} wallets`,
    )
    const rows = await db
      .selectFrom('running_balances')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .executeTakeFirstOrThrow()
    log(`${rows.n} running balances`)

    await timed(
      'verify',
      () => verifyLedger(db),
      (report) => (report.ok ? 'ok' : `${report.problems.length} problems`),
    )
    await timed(
      'repair of a sound ledger',
      () => repairRunningBalances(db),
      (repair) => `${repair.rewritten + repair.added + repair.removed} rows changed`,
    )
    const damaged = await sql`update running_balances set quantity = quantity + 7 where transaction_id % 100 = 0`.execute(db)
    log(`damaged ${damaged.numAffectedRows} running balances`)
    await timed(
      'verify of the damaged ledger',
      () => verifyLedger(db),
      (report) => `${report.wrongRunningBalances} running balances named wrong`,
    )
    await timed(
      'repair',
      () => repairRunningBalances(db),
      (repair) => `${repair.rewritten} rewritten, ${repair.added} added, ${repair.removed} removed, ${repair.holdings} holdings`,
    )
    await timed(
      'verify after the repair',
      () => verifyLedger(db),
      (report) => (report.ok ? 'ok' : `${report.problems.length} problems`),
    )
    await timed(
      'second repair',
      () => repairRunningBalances(db),
      (repair) => `${repair.rewritten + repair.added + repair.removed} rows changed`,
    )
  } finally {
    await close()
  }
}

await main()
