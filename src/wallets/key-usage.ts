import { CompiledQuery } from 'kysely'
import type { Executor } from '../db/database.ts'
import { sqliteStatementsOf } from '../db/sqlite-statements.ts'

/** The window of a `per_day` cap: any rolling 24 hours. */
const DAY_MS = 24 * 60 * 60 * 1000

/**
 * Running totals are kept modulo 2^53, so they always fit a number: what a key moves within a day
 * is at most its cap, below 2^53, so the difference of two totals taken modulo it is exact.
 */
const WRAP = 2 ** 53

/** One capped asset of a move made through a key with a `per_day` cap (`key_uses`, migrations 0017 and 0027). */
export interface KeyUse {
  keyId: number
  assetId: number
  quantity: number
  createdAt: string
  /** A hold's use counts what the hold still reserves or captured. */
  holdId: number | null
}

/** One `per_day` cap of a key at an instant: what counts against it, and where its running total stands. */
export interface KeyTally {
  used: number
  /** The running total and time of the key's last use of the asset without a hold: 0 and null before the first. */
  running: number
  at: string | null
}

type TallyRow = {
  key_id: number | string
  asset_id: number | string
  last_running: number | string | null
  last_at: string | null
  base_running: number | string | null
  held: number | string | null
}

/** The read of `readKeyUsage` for capped pairs `p` (`key_id`, `asset_id`), given `since` and `at` in the dialect's parameters. */
function tallyQuery(pairs: string, since: string, at: string): string {
  const plain = 'from key_uses u where u.key_id = p.key_id and u.asset_id = p.asset_id and u.hold_id is null'
  const latest = 'order by u.created_at desc, u.id desc limit 1'
  return `select p.key_id, p.asset_id,
      (select u.running ${plain} ${latest}) as last_running,
      (select u.created_at ${plain} ${latest}) as last_at,
      (select u.running ${plain} and u.created_at <= ${since} ${latest}) as base_running,
      (select sum(case
          when h.status = 'pending' and h.expires_at > ${at} then u.quantity
          when h.status = 'captured' then coalesce((select ta.quantity from transaction_assets ta
            where ta.transaction_id = h.transaction_id and ta.asset_id = u.asset_id), 0)
          else 0 end)
        from key_uses u join holds h on h.id = u.hold_id
        where u.key_id = p.key_id and u.asset_id = p.asset_id and u.hold_id is not null and u.created_at > ${since}) as held
    from ${pairs}`
}

// Fixed texts, run without a query builder: this read and the insert below come with every commit of a capped key's moves.
const TALLIES_POSTGRES = tallyQuery('unnest($1::bigint[], $2::bigint[]) as p(key_id, asset_id)', '$3', '$4')
const TALLIES_SQLITE = tallyQuery(
  `(select json_extract(value, '$[0]') as key_id, json_extract(value, '$[1]') as asset_id from json_each(@pairs)) as p`,
  '@since',
  '@at',
)
const INSERT_POSTGRES = `insert into key_uses (key_id, asset_id, quantity, created_at, hold_id, running)
  select * from unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::text[], $5::bigint[], $6::bigint[])`
const INSERT_SQLITE = 'insert into key_uses (key_id, asset_id, quantity, created_at, hold_id, running) values (?, ?, ?, ?, ?, ?)'

/**
 * What counts against each `per_day` cap (`caps`: asset ids by key id) at `now`, by key id then
 * asset id: what the key moved in the last 24 hours (the running totals of its last use and of its
 * last use before the window: two index seeks), and of the holds it placed then, what each reserves
 * while pending and unexpired or captured; a void, an expiry or a partial capture's release counts
 * for nothing. Read inside the move's transaction after the sending wallet's turn is taken, so that
 * no two moves of one key count or extend its totals at once.
 */
export async function readKeyUsage(
  db: Executor,
  caps: ReadonlyMap<number, Iterable<number>>,
  now: number,
): Promise<Map<number, Map<number, KeyTally>>> {
  const tallies = new Map<number, Map<number, KeyTally>>()
  const pairs = [...caps].flatMap(([keyId, assetIds]) => [...assetIds].map((assetId) => [keyId, assetId]))
  if (pairs.length === 0) return tallies
  const at = new Date(now).toISOString()
  const since = new Date(now - DAY_MS).toISOString()
  const statements = sqliteStatementsOf(db)
  const rows = statements
    ? (statements.prepare(TALLIES_SQLITE).all({ pairs: JSON.stringify(pairs), since, at }) as TallyRow[])
    : (
        await db.executeQuery<TallyRow>(
          CompiledQuery.raw(TALLIES_POSTGRES, [pairs.map(([keyId]) => keyId), pairs.map(([, assetId]) => assetId), since, at]),
        )
      ).rows
  for (const row of rows) {
    const running = Number(row.last_running ?? 0)
    // (running - base) mod 2^53, each step exact in a double.
    const difference = running - Number(row.base_running ?? 0)
    const moved = difference < 0 ? difference + WRAP : difference
    const key = Number(row.key_id)
    const byAsset = tallies.get(key) ?? new Map<number, KeyTally>()
    byAsset.set(Number(row.asset_id), { used: moved + Number(row.held ?? 0), running, at: row.last_at })
    tallies.set(key, byAsset)
  }
  return tallies
}

/**
 * Records what moves made through capped keys counted, in the moves' transaction, after
 * `readKeyUsage` there (`tallies`). A hold's use is a row of its own; the uses without a hold of one
 * key and asset are one row, which extends the key's running total and is dated no earlier than
 * its last use, so that the totals follow (`created_at`, `id`) order on every instance's clock.
 */
export async function recordKeyUses(db: Executor, uses: readonly KeyUse[], tallies: Map<number, Map<number, KeyTally>>): Promise<void> {
  if (uses.length === 0) return
  const rows: unknown[][] = []
  const totals = new Map<string, { keyId: number; assetId: number; quantity: number; createdAt: string }>()
  for (const use of uses) {
    if (use.holdId !== null) {
      rows.push([use.keyId, use.assetId, use.quantity, use.createdAt, use.holdId, null])
      continue
    }
    const pair = `${use.keyId}:${use.assetId}`
    const total = totals.get(pair)
    if (total) {
      total.quantity += use.quantity
      if (use.createdAt > total.createdAt) total.createdAt = use.createdAt
    } else totals.set(pair, { ...use })
  }
  for (const { keyId, assetId, quantity, createdAt } of totals.values()) {
    const tally = tallies.get(keyId)?.get(assetId)
    if (!tally) throw new Error(`key ${keyId}'s use of asset ${assetId} was not read before it was recorded`)
    // (running + quantity) mod 2^53, each step exact in a double.
    const running = tally.running >= WRAP - quantity ? tally.running - (WRAP - quantity) : tally.running + quantity
    const at = tally.at !== null && tally.at > createdAt ? tally.at : createdAt
    rows.push([keyId, assetId, quantity, at, null, running])
  }
  const statements = sqliteStatementsOf(db)
  if (statements) {
    const insert = statements.prepare(INSERT_SQLITE)
    for (const row of rows) insert.run(row)
  } else await db.executeQuery(CompiledQuery.raw(INSERT_POSTGRES, columnsOf(rows, 6)))
}

/** `rows` as one array per column, for `unnest`. */
function columnsOf(rows: unknown[][], count: number): unknown[][] {
  return Array.from({ length: count }, (_, i) => rows.map((row) => row[i]))
}
