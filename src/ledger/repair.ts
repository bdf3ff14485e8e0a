import { sql } from 'kysely'
import type { Db, Trx } from '../db/database.ts'
import { isPostgres } from '../db/dialect.ts'
import { withRetries } from '../db/retry.ts'
import { runningBalanceDifferences, type WalletRange } from './verify.ts'

/** What the repair changed of one holding's running balances (one wallet and asset). */
export interface HoldingRepair {
  wallet_id: number
  asset_id: number
  /** Rows whose quantity was not the journal's, now rewritten. */
  rewritten: number
  /** Sides of a journal line that had no row, now added. */
  added: number
  /** Rows that no journal line gives, now removed. */
  removed: number
}

export interface RunningBalancesRepair {
  rewritten: number
  added: number
  removed: number
  /** Holdings (wallet and asset) with any row changed. */
  holdings: number
  /** The first holdings changed, by wallet and asset id, up to REPAIRS_NAMED. */
  named: HoldingRepair[]
}

/** At most this many holdings are named with their counts; the totals count every one. */
const REPAIRS_NAMED = 20

/**
 * Ranges of wallets are repaired independently; a range's width follows how long its read took, so
 * a write on SQLite (which holds the one writer) stays well under a second. PostgreSQL holds no
 * writer up, so its ranges are wider.
 */
const FIRST_WIDTH = 100
const READ_MS = { sqlite: { slow: 200, fast: 50 }, postgres: { slow: 2_000, fast: 500 } }
const MAX_WIDTH = 100_000

/**
 * `coffer verify --repair`: rewrites the running balances the journal does not give, from the
 * journal; nothing else is written, and a second run changes nothing. Returns what it changed.
 * Safe beside a serving instance: each range is one transaction over one snapshot
 * (`docs/decisions.md#repairing-running-balances`).
 */
export async function repairRunningBalances(db: Db, progress?: (done: number, total: number) => void): Promise<RunningBalancesRepair> {
  // Every wallet that has a row or could have one (a row naming no wallet is repaired too).
  const { rows } = await sql<{ low: number | string | null; high: number | string | null }>`
    select min(low) as low, max(high) as high from (
      select min(id) as low, max(id) as high from wallets
      union all
      select min(wallet_id), max(wallet_id) from running_balances
    ) as ids`.execute(db)
  const low = Number(rows[0].low ?? 0)
  const high = Number(rows[0].high ?? -1)
  const repair: RunningBalancesRepair = { rewritten: 0, added: 0, removed: 0, holdings: 0, named: [] }
  let width = FIRST_WIDTH
  const readMsLimits = READ_MS[isPostgres(db) ? 'postgres' : 'sqlite']
  for (let from = low; from <= high;) {
    const wallets = { from, to: Math.min(from + width - 1, high) }
    const started = Date.now()
    const found = await withRetries(() =>
      db
        .transaction()
        .setIsolationLevel('repeatable read')
        .setAccessMode('read only')
        .execute((trx) => countDifferences(trx, wallets)),
    )
    const readMs = Date.now() - started
    const changed =
      found.length === 0
        ? []
        : await withRetries(() =>
            db
              .transaction()
              .setIsolationLevel('repeatable read')
              .execute((trx) => repairWallets(trx, wallets)),
          )
    for (const holding of changed) {
      repair.rewritten += holding.rewritten
      repair.added += holding.added
      repair.removed += holding.removed
      repair.holdings += 1
      if (repair.named.length < REPAIRS_NAMED) repair.named.push(holding)
    }
    progress?.(wallets.to - low + 1, high - low + 1)
    from = wallets.to + 1
    if (readMs > readMsLimits.slow) width = Math.max(1, Math.floor(width / 2))
    else if (readMs < readMsLimits.fast) width = Math.min(MAX_WIDTH, width * 2)
  }
  return repair
}

/** Removes, rewrites and adds exactly the differing rows of `wallets` in the caller's transaction; returns the counts. */
async function repairWallets(trx: Trx, wallets: WalletRange): Promise<HoldingRepair[]> {
  const found = await countDifferences(trx, wallets)
  if (found.length === 0) return found
  const differences = runningBalanceDifferences(wallets)
  await sql`
    delete from running_balances
    where wallet_id between ${wallets.from} and ${wallets.to}
      and (wallet_id, asset_id, created_at, transaction_id) in (
        select wallet_id, asset_id, created_at, transaction_id from (${differences}) as d where d.journal is null)`.execute(trx)
  await sql`
    update running_balances set quantity = d.journal
    from (${differences}) as d
    where running_balances.wallet_id = d.wallet_id and running_balances.asset_id = d.asset_id
      and running_balances.created_at = d.created_at and running_balances.transaction_id = d.transaction_id
      and d.journal is not null and d.stored is not null`.execute(trx)
  await sql`
    insert into running_balances (wallet_id, asset_id, created_at, transaction_id, quantity)
    select wallet_id, asset_id, created_at, transaction_id, journal from (${differences}) as d where d.stored is null
    on conflict (wallet_id, asset_id, created_at, transaction_id) do nothing`.execute(trx)
  return found
}

/** The differences of the wallets in `wallets`, counted by holding (wallet and asset). */
async function countDifferences(trx: Trx, wallets: WalletRange): Promise<HoldingRepair[]> {
  const { rows } = await sql<{
    wallet_id: number | string
    asset_id: number | string
    rewritten: number | string
    added: number | string
    removed: number | string
  }>`
    select wallet_id, asset_id,
      sum(case when journal is not null and stored is not null then 1 else 0 end) as rewritten,
      sum(case when stored is null then 1 else 0 end) as added,
      sum(case when journal is null then 1 else 0 end) as removed
    from (${runningBalanceDifferences(wallets)}) as d
    group by wallet_id, asset_id
    order by wallet_id, asset_id`.execute(trx)
  return rows.map((row) => ({
    wallet_id: Number(row.wallet_id),
    asset_id: Number(row.asset_id),
    rewritten: Number(row.rewritten),
    added: Number(row.added),
    removed: Number(row.removed),
  }))
}
