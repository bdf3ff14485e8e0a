import { setImmediate } from 'node:timers/promises'
import { sql, type RawBuilder } from 'kysely'
import type { Db, Executor } from '../db/database.ts'
import { LEDGER_REFERENCES } from '../db/migrations/0005_ledger_references.ts'
import { HOLD_REFERENCES } from '../db/migrations/0009_holds.ts'
import { runningSums } from '../db/migrations/0010_running_balances.ts'
import { DELIVERY_REFERENCES } from '../db/migrations/0012_lean_webhook_deliveries.ts'
import { isPostgres } from '../db/dialect.ts'
import { inReadOnlySnapshot } from '../db/retry.ts'
import { readArrays } from '../db/sqlite-statements.ts'
import { Fingerprint } from './fingerprint.ts'
import { MINT_WALLET_ID } from './ledger.types.ts'

export interface VerifyReport {
  ok: boolean
  /** Transactions read from the journal. */
  transactions: number
  /** Holding rows checked against it. */
  holdings: number
  /** Live assets, whether or not anyone holds some. */
  assets: number
  /** Running balances that differ from the journal (`coffer verify --repair` rewrites them). */
  wrongRunningBalances: number
  problems: string[]
}

const BATCH = 5_000

/** What reversals moved back, by original, which must exist, be no reversal, and have moved at least as much. */
class ReversalTally {
  readonly #byOriginal = new Map<number, { from: number; to: number; ids: number[]; assets: Map<number, number> }>()

  add(
    reversal: { id: number; sending_wallet_id: number; receiving_wallet_id: number; reverses: number | null },
    lines: { asset_id: number; quantity: number }[],
  ) {
    const originalId = Number(reversal.reverses)
    const entry = this.#byOriginal.get(originalId) ?? {
      from: reversal.sending_wallet_id,
      to: reversal.receiving_wallet_id,
      ids: [],
      assets: new Map<number, number>(),
    }
    entry.ids.push(reversal.id)
    if (entry.from !== reversal.sending_wallet_id || entry.to !== reversal.receiving_wallet_id) entry.from = -1
    for (const line of lines) entry.assets.set(line.asset_id, (entry.assets.get(line.asset_id) ?? 0) + line.quantity)
    this.#byOriginal.set(originalId, entry)
  }

  async check(db: Executor): Promise<string[]> {
    const problems: string[] = []
    const ids = [...this.#byOriginal.keys()]
    for (let start = 0; start < ids.length; start += BATCH) {
      const chunk = ids.slice(start, start + BATCH)
      const originals = await db
        .selectFrom('transactions')
        .select(['id', 'sending_wallet_id', 'receiving_wallet_id', 'kind'])
        .where('id', 'in', chunk)
        .execute()
      const lines = await db
        .selectFrom('transaction_assets')
        .select(['transaction_id', 'asset_id', 'quantity'])
        .where('transaction_id', 'in', chunk)
        .execute()
      const found = new Map(originals.map((original) => [original.id, { ...original, assets: new Map<number, number>() }]))
      for (const line of lines) found.get(line.transaction_id)?.assets.set(line.asset_id, line.quantity)
      for (const id of chunk) {
        const reversed = this.#byOriginal.get(id)
        const original = found.get(id)
        if (!reversed) continue
        const by = `reversal${reversed.ids.length > 1 ? 's' : ''} ${reversed.ids.join(', ')}`
        if (!original) {
          problems.push(`${by} of transaction ${id}, which does not exist`)
          continue
        }
        if (original.kind === 'reversal') problems.push(`${by} of transaction ${id}, itself a reversal`)
        if (reversed.from !== original.receiving_wallet_id || reversed.to !== original.sending_wallet_id)
          problems.push(`${by} of transaction ${id} do not move from its receiver back to its sender`)
        for (const [assetId, quantity] of reversed.assets) {
          const moved = original.assets.get(assetId) ?? 0
          if (quantity > moved)
            problems.push(`${by} of transaction ${id} move back ${quantity} of asset ${assetId}, which it moved ${moved} of`)
        }
      }
    }
    return problems
  }
}

/** What the pass keeps of a holding: the journal's sum so far; of its running balances, the largest transaction id and its quantity. */
interface Holding {
  sum: number
  lastId: number
  last: number | undefined
}

/** Holdings by asset, then wallet: number keys, no string built a line. */
class Holdings {
  readonly byAsset = new Map<number, Map<number, Holding>>()

  get(walletId: number, assetId: number): Holding {
    let wallets = this.byAsset.get(assetId)
    if (!wallets) this.byAsset.set(assetId, (wallets = new Map()))
    let holding = wallets.get(walletId)
    if (!holding) wallets.set(walletId, (holding = { sum: 0, lastId: -Infinity, last: undefined }))
    return holding
  }

  /** The holding, which is then forgotten; the one of nothing if the pass met none. */
  take(walletId: number, assetId: number): Holding {
    const wallets = this.byAsset.get(assetId)
    const holding = wallets?.get(walletId)
    if (!holding) return { sum: 0, lastId: -Infinity, last: undefined }
    wallets!.delete(walletId)
    return holding
  }
}

/**
 * A read asked for before the one in hand is checked, when `wanted`: none is left unawaited (a query
 * in flight when the snapshot ends would fail it), and a failure met before its turn is not unhandled.
 */
function ahead<T>(wanted: boolean, read: () => Promise<T>): Promise<T> | undefined {
  if (!wanted) return undefined
  const next = read()
  next.catch(() => {})
  return next
}

/** Heap blocks of `running_balances` read a statement on PostgreSQL: about 30,000 rows. */
const BLOCKS = 256

/**
 * PostgreSQL: every stored running balance, read once in the table's order (ranges of its blocks, no
 * key looked up), into `found`, and each holding's last (largest id) into `holdings`. Each range comes
 * as one text, `wallet,asset,transaction,quantity,length:created_at` a row, read here digit by digit:
 * a value a column cost the process several times what the server spends on the text.
 */
async function readRunningBalances(db: Executor, found: Fingerprint, holdings: Holdings): Promise<void> {
  // Inside the snapshot: every row it sees lies in the blocks the table has now.
  const { rows } = await sql<{ blocks: number | string }>`
    select pg_relation_size('running_balances') / current_setting('block_size')::int as blocks`.execute(db)
  const blocks = Number(rows[0].blocks)
  const read = (from: number) =>
    sql<{ text: string | null }>`
      select string_agg((wallet_id || ',' || asset_id || ',') || (transaction_id || ',' || quantity || ',')
        || (length(created_at) || ':' || created_at), '') as text
      from running_balances where ctid >= ${`(${from},0)`}::tid and ctid < ${`(${from + BLOCKS},0)`}::tid`.execute(db)
  // The next range is asked for before this one is taken in: the server reads while the process hashes.
  for (let from = 0, next = ahead(blocks > 0, () => read(0)); next; from += BLOCKS) {
    const text = (await next).rows[0].text ?? ''
    next = ahead(from + BLOCKS < blocks, () => read(from + BLOCKS))
    let at = 0
    // The integer from `at` to the next `,` or `:`, which is passed.
    const integer = () => {
      const negative = text.charCodeAt(at) === 45
      if (negative) at++
      let value = 0
      for (let c = text.charCodeAt(at); c >= 48 && c <= 57; c = text.charCodeAt(++at)) value = value * 10 + (c - 48)
      at++
      return negative ? -value : value
    }
    while (at < text.length) {
      const walletId = integer()
      const assetId = integer()
      const transactionId = integer()
      const quantity = integer()
      const length = integer()
      const time = found.time(text, at, (at += length))
      const holding = holdings.get(walletId, assetId)
      if (transactionId > holding.lastId) {
        holding.lastId = transactionId
        holding.last = quantity
      }
      found.add(walletId, assetId, time, transactionId, quantity)
    }
  }
}

const [COMMA, COLON, SEMICOLON, MINUS, ZERO, NINE] = [44, 58, 59, 45, 48, 57]

/**
 * Reads the values of a text a database wrote, digit by digit; `bad` once one is not as written:
 * an integer that is no safe one, a text whose length in characters is not its length here.
 */
class TextReader {
  at = 0
  bad = false
  constructor(readonly text: string) {}

  /** The integer from here to the `end` that follows it, which is passed; null when empty. */
  integer(end: number): number | null {
    const text = this.text
    let at = this.at
    const negative = text.charCodeAt(at) === MINUS
    if (negative) at++
    const start = at
    let value = 0
    let c = text.charCodeAt(at)
    for (; c >= ZERO && c <= NINE; c = text.charCodeAt(++at)) value = value * 10 + (c - ZERO)
    const digits = at - start
    if (c !== end || digits > 15 || (negative && digits === 0)) this.bad = true
    this.at = at + 1
    return digits === 0 ? null : negative ? -value : value
  }

  /** A text after its length and `:`; one holding a surrogate is not taken (the database counts characters, not UTF-16 units). */
  string(): string | null {
    const length = this.integer(COLON)
    if (length === null) return null
    const value = this.text.slice(this.at, (this.at += length))
    for (let i = 0; i < value.length; i++) if ((value.charCodeAt(i) & 0xf800) === 0xd800) this.bad = true
    return value
  }

  /** Passes `end`, which must follow. */
  expect(end: number): void {
    if (this.text.charCodeAt(this.at++) !== end) this.bad = true
  }
}

/** The key of the running balance `alias` stored for one side (`wallet`, a column of `t`) of the line `l` of the transaction `t`. */
const sideOf = (alias: string, wallet: string) =>
  sql`${sql.ref(`${alias}.wallet_id`)} = ${sql.ref(wallet)} and ${sql.ref(`${alias}.asset_id`)} = l.asset_id
    and ${sql.ref(`${alias}.created_at`)} = t.created_at and ${sql.ref(`${alias}.transaction_id`)} = t.id`

/**
 * What the pass reads beside each line. SQLite: the two running balances stored for its sides,
 * joined (a seek each, on SQLite's side of the driver, which costs less than taking each row
 * across it). PostgreSQL: the transaction's `created_at`, for the fingerprint (a seek a side there
 * cost the server more than the whole pass). `line`: `readLinesText`'s record of a line.
 */
function besideLines(db: Executor) {
  const kind = sql`nullif(t.kind, 'transfer')`
  if (isPostgres(db))
    return {
      columns: sql`t.created_at`,
      joins: sql``,
      // `||` in nested groups: each `||` copies all it joins, and one long chain copied the record once a field.
      line: sql`((t.id || ',' || t.sending_wallet_id || ',' || t.receiving_wallet_id || ',')
          || (coalesce(t.reverses || ',', ',') || coalesce(t.hold_id || ',', ',')))
        || ((coalesce(l.asset_id || ',' || l.quantity || ',', ',,') || coalesce(length(${kind}) || ':' || ${kind}, ':'))
          || (length(t.created_at) || ':' || t.created_at || ';'))`,
    }
  return {
    columns: sql`s.quantity as sent, r.quantity as received`,
    joins: sql`left join running_balances s on ${sideOf('s', 't.sending_wallet_id')}
      left join running_balances r on ${sideOf('r', 't.receiving_wallet_id')}`,
    line: sql`concat(t.id, ',', t.sending_wallet_id, ',', t.receiving_wallet_id, ',', t.reverses, ',', t.hold_id, ',',
        l.asset_id, ',', l.quantity, ',', length(${kind}), ':', ${kind}, s.quantity, ',', r.quantity, ',', ';')`,
  }
}

/** A row of the pass: [id, sender, receiver, kind (null: a transfer), reverses, hold, asset, quantity, and `beside`'s two]. */
type LineRow = [number, number, number, string | null, number | null, number | null, number | null, number, unknown, number | null]

/**
 * The lines of the transactions with ids in (`after`, `upTo`] as one text, a record a line:
 * `id,sender,receiver,reverses,hold,asset,quantity,length:kind` (empty where null, a transfer's kind
 * null), SQLite's two running balances `sent,received,` or PostgreSQL's `length:created_at`, then `;`
 * (`besideLines`). One value crosses the driver instead of ten a line, which cost the process more
 * than the database spends writing them. `parseLines` checks that the ids rise.
 */
async function readLinesText(db: Executor, beside: ReturnType<typeof besideLines>, after: number, upTo: number): Promise<string | null> {
  // PostgreSQL aggregates a sorted subquery in its order. By id alone: a transaction's lines may come in any order (its
  // holdings and the fingerprint do not count it), and sorting by asset too made the server join and sort, not merge by the keys.
  const order = isPostgres(db) ? sql`order by t.id` : sql``
  const [[text]] = await readArrays(
    db,
    sql`
    select string_agg(line, '') from (
      select ${beside.line} as line
      from transactions t
        left join transaction_assets l on l.transaction_id = t.id and l.transaction_id > ${after} and l.transaction_id <= ${upTo}
        ${beside.joins}
      where t.id > ${after} and t.id <= ${upTo}
      ${order}
    ) as lines`,
  )
  return text as string | null
}

/**
 * The rows of `readLinesText`'s text (`timed`: its records end with `created_at`, else with the two
 * running balances); undefined where it is not as written (`TextReader`) or its ids do not rise.
 * The range is then read as rows. @public (tests parse texts that are not as written)
 */
export function parseLines(text: string | null, timed: boolean): LineRow[] | undefined {
  const rows: LineRow[] = []
  if (text === null) return rows
  const reader = new TextReader(text)
  let previous = 0
  while (reader.at < text.length && !reader.bad) {
    const id = reader.integer(COMMA)
    const sender = reader.integer(COMMA)
    const receiver = reader.integer(COMMA)
    const reverses = reader.integer(COMMA)
    const hold = reader.integer(COMMA)
    const asset = reader.integer(COMMA)
    const quantity = reader.integer(COMMA)
    const kind = reader.string()
    const beside = timed ? reader.string() : reader.integer(COMMA)
    const received = timed ? null : reader.integer(COMMA)
    reader.expect(SEMICOLON)
    if (id === null || sender === null || receiver === null || id < previous || (asset === null) !== (quantity === null)) return undefined
    previous = id
    rows.push([id, sender, receiver, kind, reverses, hold, asset, quantity as number, beside, received])
  }
  return reader.bad ? undefined : rows
}

/** At most this many running balances are named; the count says how many more are wrong. */
const RUNNING_BALANCES_NAMED = 20

/** Wallets with ids from `from` to `to`, both included. */
export interface WalletRange {
  from: number
  to: number
}

/**
 * Where running balances and the journal differ, row by row: `journal` null for a row no line gives,
 * `stored` null for a line without its row. What verify names and repair rewrites.
 */
export function runningBalanceDifferences(wallets?: WalletRange) {
  const inRange = (column: string) => (wallets ? sql`${sql.ref(column)} between ${wallets.from} and ${wallets.to}` : sql`true`)
  // The journal's lines that give the row `r`.
  const linesOf = sql`
    from transactions t join transaction_assets l on l.transaction_id = t.id
    where t.id = r.transaction_id and t.created_at = r.created_at and l.asset_id = r.asset_id
      and r.wallet_id in (t.sending_wallet_id, t.receiving_wallet_id)`
  // For a range, a count per row: PostgreSQL would otherwise hash the whole journal every time.
  const unmatched = wallets
    ? sql`
      select wallet_id, asset_id, created_at, transaction_id, quantity from (
        select r.wallet_id, r.asset_id, r.created_at, r.transaction_id, r.quantity, (select count(*) ${linesOf}) as sides
        from running_balances r where ${inRange('r.wallet_id')}
      ) as stored_rows
      where sides = 0`
    : sql`
      select r.wallet_id, r.asset_id, r.created_at, r.transaction_id, r.quantity
      from running_balances r where not exists (select 1 ${linesOf})`
  // Two halves, each through a key, so a range costs its own rows (SQLite scans a full join).
  return sql`
    select c.wallet_id, c.asset_id, c.created_at, c.transaction_id, c.quantity as journal, r.quantity as stored
    from (${runningSums(wallets)}) as c
    left join running_balances r
      on r.wallet_id = c.wallet_id and r.asset_id = c.asset_id and r.created_at = c.created_at and r.transaction_id = c.transaction_id
        and ${inRange('r.wallet_id')}
    where r.quantity is null or r.quantity <> c.quantity
    union all
    select wallet_id, asset_id, created_at, transaction_id, null, quantity from (${unmatched}) as unmatched`
}

/**
 * Each running balance is its wallet's sum of lines up to its transaction, in id order (the wallet's
 * commit order); the holding check sees only the last row, so a wrong row in the middle shows only here.
 */
async function checkRunningBalances(db: Executor): Promise<{ problems: string[]; wrong: number }> {
  type Row = {
    wallet_id: number | string
    asset_id: number | string
    transaction_id: number | string
    journal: number | string | null
    stored: number | string | null
    wrong: number | string
  }
  const { rows } = await sql<Row>`
    select wallet_id, asset_id, transaction_id, journal, stored, count(*) over () as wrong
    from (${runningBalanceDifferences()}) as found
    order by transaction_id, wallet_id, asset_id
    limit ${sql.lit(RUNNING_BALANCES_NAMED)}`.execute(db)
  const balance = (row: Row) => `transaction ${row.transaction_id}'s running balance of wallet ${row.wallet_id} in asset ${row.asset_id}`
  const problems = rows.map((row) =>
    row.stored === null
      ? `transaction ${row.transaction_id} has no running balance of wallet ${row.wallet_id} in asset ${row.asset_id} ` +
        `(the journal says ${row.journal})`
      : row.journal === null
        ? `${balance(row)} says ${row.stored}, but no line of the journal gives it`
        : `${balance(row)} says ${row.stored}, the journal says ${row.journal}`,
  )
  const more = rows.length > 0 ? Number(rows[0].wrong) - rows.length : 0
  if (more > 0) problems.push(`and ${more} more running balances that the journal does not give`)
  return { problems, wrong: rows.length > 0 ? Number(rows[0].wrong) : 0 }
}

/**
 * Recomputes every holding from the journal and checks the ledger's rules (sums, credit limits,
 * lines, running balances, holds, references), in one read-only snapshot, so a transfer is wholly in or out.
 */
export async function verifyLedger(
  db: Executor,
  progress?: (done: number, total: number) => void,
  now = new Date().toISOString(),
): Promise<VerifyReport> {
  if (!db.isTransaction) {
    return inReadOnlySnapshot(db as Db, (trx) => verifyLedger(trx, progress, now))
  }
  const problems: string[] = []
  // The pass is read in order here: a parallel plan only adds work to the server's.
  if (isPostgres(db)) await sql`set local max_parallel_workers_per_gather = 0`.execute(db)
  // By holding: the journal's sum so far, and the running balance of its largest transaction id: the
  // last in its commit order, which a wall clock stepping back (or two instances' clocks) may not keep in `created_at`.
  const byHolding = new Holdings()
  // PostgreSQL: the running balances the journal gives and those stored, each read in its own order
  // into a fingerprint; equal fingerprints say the two sets are equal. SQLite: each side's row beside its line.
  const fingerprinted = isPostgres(db)
  const stored = new Fingerprint()
  const given = stored.sibling()
  if (fingerprinted) await readRunningBalances(db, stored, byHolding)
  let runningBalancesAgree = true
  let sides = 0
  // What the pass saw, so the checks after it read only what it could not settle.
  const wallets = new Set<number>()
  const assetsMet = new Set<number>()
  let lines = 0
  const captures: number[] = []
  const spends: number[] = []
  const reversals = new ReversalTally()
  const { count } = await db
    .selectFrom('transactions')
    .select((eb) => eb.fn.countAll<number>().as('count'))
    .executeTakeFirstOrThrow()
  const total = Number(count)
  let done = 0
  const { last } = await db
    .selectFrom('transactions')
    .select((eb) => eb.fn.max('id').as('last'))
    .executeTakeFirstOrThrow()
  const beside = besideLines(db)
  // Ranges of ids, each read once in id order with its lines: linear in the ledger, whatever its
  // size. The lines are bounded by the range too, or PostgreSQL hashes all of them for every range.
  // Each range comes as one text (`readLinesText`); where it is not as written, as rows.
  const read = async (after: number): Promise<LineRow[]> =>
    parseLines(await readLinesText(db, beside, after, after + BATCH), fingerprinted) ??
    ((await readArrays(
      db,
      sql`
      select t.id, t.sending_wallet_id, t.receiving_wallet_id, nullif(t.kind, 'transfer'), t.reverses, t.hold_id,
        l.asset_id, l.quantity, ${beside.columns}
      from transactions t
        left join transaction_assets l on l.transaction_id = t.id and l.transaction_id > ${after} and l.transaction_id <= ${after + BATCH}
        ${beside.joins}
      where t.id > ${after} and t.id <= ${after + BATCH}
      order by t.id, l.asset_id`,
    )) as LineRow[])
  // As with the cursor, the next range is asked for before this one is checked.
  for (let after = 0, next = ahead(Number(last ?? 0) > 0, () => read(0)); next; after += BATCH) {
    // A turn of the event loop between ranges: SQLite's reads never give one, and the journal's
    // threads (`coffer verify`) wait on this thread's answers to be handed their ranges.
    await setImmediate()
    const rows = await next
    next = ahead(after + BATCH < Number(last ?? 0), () => read(after + BATCH))
    for (let i = 0; i < rows.length;) {
      const [id, sendingWalletId, receivingWalletId, kindOrNull, reverses, holdId] = rows[i]
      const kind = kindOrNull ?? 'transfer'
      // A reversal's lines are kept, for the tally; the others' only counted.
      const own: { asset_id: number; quantity: number }[] | undefined = kind === 'reversal' ? [] : undefined
      let owned = 0
      wallets.add(sendingWalletId).add(receivingWalletId)
      if (kind === 'capture' || holdId !== null) captures.push(id)
      const time = fingerprinted ? given.time(rows[i][8] as string) : undefined
      let spent = false
      for (; i < rows.length && rows[i][0] === id; i++) {
        const assetId = rows[i][6]
        const quantity = rows[i][7]
        if (assetId === null) continue
        own?.push({ asset_id: assetId, quantity })
        owned++
        assetsMet.add(assetId)
        lines++
        if (!Number.isSafeInteger(quantity) || quantity <= 0) problems.push(`transaction ${id} moves ${quantity} of asset ${assetId}`)
        // The journal's sums in id order are what the two running balances must say.
        const sender = byHolding.get(sendingWalletId, assetId)
        sender.sum -= quantity
        const receiver = byHolding.get(receivingWalletId, assetId)
        receiver.sum += quantity
        if (time) {
          given.add(sendingWalletId, assetId, time, id, sender.sum)
          given.add(receivingWalletId, assetId, time, id, receiver.sum)
          if (sender.sum < 0 && sendingWalletId !== MINT_WALLET_ID) spent = true
        } else {
          const storedSent = rows[i][8] as number | null
          const storedReceived = rows[i][9]
          if (storedSent !== sender.sum || storedReceived !== receiver.sum) runningBalancesAgree = false
          if (storedSent !== null) sender.last = storedSent
          if (storedReceived !== null) receiver.last = storedReceived
          if (storedSent !== null && storedSent < 0 && sendingWalletId !== MINT_WALLET_ID) spent = true
          sides += 2
        }
      }
      if (spent) spends.push(id)
      if (owned === 0) problems.push(`transaction ${id} has no asset lines`)
      if (sendingWalletId === receivingWalletId) problems.push(`transaction ${id} sends to its own wallet`)
      if ((kind === 'reversal') !== (reverses !== null)) {
        const names = reverses === null ? 'names no original' : `names an original (${reverses})`
        problems.push(`transaction ${id} of kind ${kind} ${names}`)
      }
      if (own && reverses !== null)
        reversals.add({ id, sending_wallet_id: sendingWalletId, receiving_wallet_id: receivingWalletId, reverses }, own)
      done++
    }
    progress?.(done, total)
  }

  problems.push(...(await reversals.check(db)))

  const holdings = await db.selectFrom('holdings').select(['wallet_id', 'asset_id', 'quantity', 'held', 'credit_limit']).execute()
  const sums = new Map<number, number>()
  const lastBalances: string[] = []
  for (const holding of holdings) {
    const { sum: journal, last } = byHolding.take(holding.wallet_id, holding.asset_id)
    if (journal !== holding.quantity)
      problems.push(`wallet ${holding.wallet_id} holds ${holding.quantity} of asset ${holding.asset_id}, the journal says ${journal}`)
    sums.set(holding.asset_id, (sums.get(holding.asset_id) ?? 0) + holding.quantity)
    // Balances in time (migration 0010): each holding's last running balance is the holding.
    if ((last ?? 0) !== Number(holding.quantity))
      lastBalances.push(
        `wallet ${holding.wallet_id} holds ${holding.quantity} of asset ${holding.asset_id}, ` +
          `its last running balance says ${last ?? 'nothing'}`,
      )
  }
  problems.push(...lastBalances)
  // Every side has its row with the journal's sum and there are no other rows (equal fingerprints, or
  // each side's row found and as many rows as sides). Otherwise the set-based comparison names the differences.
  const agree = fingerprinted
    ? stored.equals(given)
    : runningBalancesAgree &&
      Number(
        (
          await db
            .selectFrom('running_balances')
            .select((eb) => eb.fn.countAll<number>().as('n'))
            .executeTakeFirstOrThrow()
        ).n,
      ) === sides
  const runningBalances = agree ? { problems: [], wrong: 0 } : await checkRunningBalances(db)
  problems.push(...runningBalances.problems)
  for (const [assetId, wallets] of byHolding.byAsset)
    for (const [walletId, { sum: journal }] of wallets)
      if (journal !== 0) problems.push(`wallet ${walletId} has no holding of asset ${assetId}, the journal says ${journal}`)
  for (const [assetId, sum] of sums) if (sum !== 0) problems.push(`asset ${assetId} sums to ${sum} counting mint, not 0`)
  problems.push(...(await verifyHolds(db, holdings, now, captures)))
  // When every running balance is the journal's, the pass saw every one below zero.
  problems.push(...(await verifyCredit(db, agree ? spends : undefined)))
  problems.push(...(await verifyLots(db, now)))
  // On PostgreSQL the write path, not a foreign key, keeps these (migrations 0005, 0009 and 0012).
  const settled = await referencesSeen(db, wallets, assetsMet, lines)
  // A delivery's event is a row, or derived from a transaction from `event_state.derived_from` on: checked below.
  const deliveryWallets = DELIVERY_REFERENCES.filter(({ column }) => column !== 'event_id')
  for (const { table, column, parent } of [...LEDGER_REFERENCES, ...HOLD_REFERENCES, ...deliveryWallets]) {
    if (settled.has(`${table}.${column}`)) continue
    const { rows } = await sql<{ count: number | string }>`
      select count(*) as count from ${sql.table(table)} as child
      where ${sql.ref(`child.${column}`)} is not null
        and not exists (select 1 from ${sql.table(parent)} as parent where parent.id = ${sql.ref(`child.${column}`)})`.execute(db)
    const dangling = Number(rows[0].count)
    if (dangling > 0) problems.push(`${dangling} ${table} rows name a missing ${parent} row in ${column}`)
  }
  const { rows: orphans } = await sql<{ count: number | string }>`
    select count(*) as count from webhook_deliveries d
    where not exists (select 1 from events where events.id = d.event_id)
      and not (d.event_id >= 2 * (select derived_from from event_state where id = 1)
        and exists (select 1 from transactions t where t.id = d.event_id / 2))`.execute(db)
  if (Number(orphans[0].count) > 0) problems.push(`${Number(orphans[0].count)} webhook_deliveries rows name a missing event in event_id`)
  // Every live asset, held or not: what an operator counts as the assets that exist.
  const { assets } = await db
    .selectFrom('assets')
    .select((eb) => eb.fn.countAll<number>().as('assets'))
    .where('deleted_at', 'is', null)
    .executeTakeFirstOrThrow()
  return {
    ok: problems.length === 0,
    transactions: total,
    holdings: holdings.length,
    assets: Number(assets),
    wrongRunningBalances: runningBalances.wrong,
    problems,
  }
}

/**
 * Credit: no transaction took its sender's holding (mint's aside) below minus the credit limit in
 * force when it committed: the last limit set before it drew its id (`credit_limits`, migration
 * 0018), or none. A receiver's holding only rises, and a limit lowered below a debt binds only the
 * spends after it.
 */
async function verifyCredit(db: Executor, transactionIds?: number[]): Promise<string[]> {
  if (transactionIds === undefined) return creditBreaches(db, sql`true`)
  const problems: string[] = []
  for (let start = 0; start < transactionIds.length; start += BATCH)
    problems.push(...(await creditBreaches(db, sql`r.transaction_id in (${sql.join(transactionIds.slice(start, start + BATCH))})`)))
  return problems
}

/** The spends among the running balances `where` selects that went below the credit limit in force. */
async function creditBreaches(db: Executor, where: RawBuilder<unknown>): Promise<string[]> {
  const { rows } = await sql<{
    wallet_id: number
    asset_id: number
    transaction_id: number
    quantity: number | string
    in_force: number | string
  }>`
    select * from (
      select r.wallet_id, r.asset_id, r.transaction_id, r.quantity,
        coalesce((select c.credit_limit from credit_limits c
          where c.wallet_id = r.wallet_id and c.asset_id = r.asset_id and c.after_transaction < r.transaction_id
          order by c.after_transaction desc, c.id desc limit 1), 0) as in_force
      from running_balances r join transactions t on t.id = r.transaction_id and t.sending_wallet_id = r.wallet_id
      where r.quantity < 0 and r.wallet_id <> ${MINT_WALLET_ID} and ${where}
    ) as spends
    where quantity < -in_force
    order by transaction_id, wallet_id, asset_id`.execute(db)
  return rows.map(
    (row) =>
      `transaction ${row.transaction_id} took wallet ${row.wallet_id}'s holding of asset ${row.asset_id} to ${row.quantity}, ` +
      `below its credit limit of ${row.in_force}`,
  )
}

/**
 * Units by expiry (`docs/expiry.md`): every lot is what the transactions that moved units of its
 * expiry into and out of its wallet add up to, and what unsettled holds reserve of it; every
 * wallet's lots add up to no more than its holding and its reserved lots to no more than its
 * `held`, and only holdings marked dated have any; no unit moved after its expiry but to expire
 * (an `expiry`) or as a hold reserved it before (a `capture`).
 */
async function verifyLots(db: Executor, now: string): Promise<string[]> {
  const problems: string[] = []
  const { rows } = await sql<{
    wallet_id: number
    asset_id: number
    expires_at: string
    stored: string | number | null
    journal: string | number | null
  }>`
    select coalesce(s.wallet_id, j.wallet_id) as wallet_id, coalesce(s.asset_id, j.asset_id) as asset_id,
      coalesce(s.expires_at, j.expires_at) as expires_at, s.quantity as stored, j.quantity as journal
    from lots s full outer join (
      select wallet_id, asset_id, expires_at, sum(quantity) as quantity from (
        select t.receiving_wallet_id as wallet_id, l.asset_id, l.expires_at, l.quantity
        from transactions t join transaction_lots l on l.transaction_id = t.id where t.receiving_wallet_id <> ${MINT_WALLET_ID}
        union all
        select t.sending_wallet_id, l.asset_id, l.expires_at, -l.quantity
        from transactions t join transaction_lots l on l.transaction_id = t.id where t.sending_wallet_id <> ${MINT_WALLET_ID}
      ) as sides group by wallet_id, asset_id, expires_at
    ) as j on j.wallet_id = s.wallet_id and j.asset_id = s.asset_id and j.expires_at = s.expires_at
    where coalesce(s.quantity, 0) <> coalesce(j.quantity, 0)`.execute(db)
  for (const row of rows)
    problems.push(
      `wallet ${row.wallet_id} has ${row.stored ?? 0} of asset ${row.asset_id} expiring ${row.expires_at}, ` +
        `the journal says ${row.journal ?? 0}`,
    )
  const { rows: held } = await sql<{
    wallet_id: number
    asset_id: number
    expires_at: string
    held: string | number
    reserved: string | number
  }>`
    select lots.wallet_id, lots.asset_id, lots.expires_at, lots.held, coalesce(r.quantity, 0) as reserved
    from lots left join (
      select holds.sending_wallet_id as wallet_id, hold_lots.asset_id, hold_lots.expires_at, sum(hold_lots.quantity) as quantity
      from holds join hold_lots on hold_lots.hold_id = holds.id where holds.status = 'pending'
      group by holds.sending_wallet_id, hold_lots.asset_id, hold_lots.expires_at
    ) as r on r.wallet_id = lots.wallet_id and r.asset_id = lots.asset_id and r.expires_at = lots.expires_at
    where lots.held <> coalesce(r.quantity, 0)`.execute(db)
  for (const row of held)
    problems.push(
      `wallet ${row.wallet_id} has ${row.held} of asset ${row.asset_id} expiring ${row.expires_at} held, its holds reserve ${row.reserved}`,
    )
  const { rows: totals } = await sql<{
    wallet_id: number
    asset_id: number
    dated: number
    quantity: string | number
    held: string | number
    lots: string | number
    lots_held: string | number
  }>`
    select h.wallet_id, h.asset_id, h.dated, h.quantity, h.held, sum(lots.quantity) as lots, sum(lots.held) as lots_held
    from lots join holdings h on h.wallet_id = lots.wallet_id and h.asset_id = lots.asset_id
    group by h.wallet_id, h.asset_id, h.dated, h.quantity, h.held`.execute(db)
  for (const row of totals) {
    const where = `wallet ${row.wallet_id}, asset ${row.asset_id}`
    if (Number(row.lots) > 0 && Number(row.dated) !== 1) problems.push(`${where}: units with an expiry in a holding not marked dated`)
    if (Number(row.lots) > Number(row.quantity))
      problems.push(`${where}: ${row.lots} units by expiry, more than the holding of ${row.quantity}`)
    if (Number(row.lots_held) > Number(row.held))
      problems.push(`${where}: ${row.lots_held} reserved units by expiry, more than ${row.held} held`)
  }
  const { rows: late } = await sql<{ id: number; kind: string; expires_at: string }>`
    select t.id, t.kind, l.expires_at from transactions t join transaction_lots l on l.transaction_id = t.id
    where t.created_at > l.expires_at and t.kind not in ('expiry', 'capture') limit 20`.execute(db)
  for (const row of late) problems.push(`transaction ${row.id} (${row.kind}) moved units after their expiry ${row.expires_at}`)
  const { rows: lingering } = await sql<{ n: string | number }>`
    select count(*) as n from lots where quantity > held and expires_at <= ${new Date(Date.parse(now) - 3_600_000).toISOString()}`.execute(
    db,
  )
  if (Number(lingering[0].n) > 0) problems.push(`${lingering[0].n} lots expired more than an hour ago and were never returned to mint`)
  return problems
}

/**
 * `held` is what unsettled holds reserve, within `0..quantity + credit_limit` (the largest limit the
 * holding has had); each captured hold names a capture between its sides of no more than it held, and each capture its hold.
 */
async function verifyHolds(
  db: Executor,
  holdings: { wallet_id: number; asset_id: number; quantity: number; held: number; credit_limit: number }[],
  now: string,
  captures: number[],
): Promise<string[]> {
  const problems: string[] = []
  const largestLimits = await db
    .selectFrom('credit_limits')
    .select((eb) => ['wallet_id', 'asset_id', eb.fn.max('credit_limit').as('largest')])
    .groupBy(['wallet_id', 'asset_id'])
    .execute()
  const largest = new Map(largestLimits.map((row) => [`${row.wallet_id}:${row.asset_id}`, Number(row.largest)]))
  const lines = await db
    .selectFrom('hold_assets')
    .innerJoin('holds', 'holds.id', 'hold_assets.hold_id')
    .select(['holds.sending_wallet_id', 'holds.status', 'holds.expires_at', 'hold_assets.asset_id', 'hold_assets.quantity'])
    .where('holds.status', '=', 'pending')
    .execute()
  const unsettled = new Map<string, number>()
  const live = new Map<string, number>()
  for (const line of lines) {
    const key = `${line.sending_wallet_id}:${line.asset_id}`
    unsettled.set(key, (unsettled.get(key) ?? 0) + Number(line.quantity))
    if (line.expires_at > now) live.set(key, (live.get(key) ?? 0) + Number(line.quantity))
  }
  for (const holding of holdings) {
    const key = `${holding.wallet_id}:${holding.asset_id}`
    const column = Number(holding.held)
    const reserved = unsettled.get(key) ?? 0
    unsettled.delete(key)
    if (column !== reserved)
      problems.push(`wallet ${holding.wallet_id} has ${column} of asset ${holding.asset_id} held, its unsettled holds reserve ${reserved}`)
    const heldNow = column - (reserved - (live.get(key) ?? 0))
    const credit = Math.max(Number(holding.credit_limit), largest.get(key) ?? 0)
    if (heldNow < 0 || (heldNow > Number(holding.quantity) + credit && holding.wallet_id !== MINT_WALLET_ID))
      problems.push(`wallet ${holding.wallet_id} has ${heldNow} of asset ${holding.asset_id} held of ${holding.quantity}`)
  }
  for (const [key, reserved] of unsettled) {
    const [walletId, assetId] = key.split(':')
    problems.push(`wallet ${walletId} has no holding of asset ${assetId}, its unsettled holds reserve ${reserved}`)
  }
  const { rows } = await sql<{ id: number; status: string; reason: string }>`
    select holds.id, holds.status, case
        when holds.status = 'captured' and holds.transaction_id is null then 'names no transaction'
        when holds.status <> 'captured' and holds.transaction_id is not null then 'names a transaction'
        when holds.status = 'captured' and t.id is null then 'names a missing transaction'
        when t.kind <> 'capture' then 'names a transaction that is no capture'
        when t.sending_wallet_id <> holds.sending_wallet_id or t.receiving_wallet_id <> holds.receiving_wallet_id
          then 'names a transaction between other wallets'
        when exists (select 1 from transaction_assets l
                     where l.transaction_id = t.id
                       and l.quantity > coalesce((select h.quantity from hold_assets h where h.hold_id = holds.id
                         and h.asset_id = l.asset_id), 0))
          then 'names a transaction that moved more than it held'
      end as reason
    from holds left join transactions t on t.id = holds.transaction_id
    where holds.status = 'captured' or holds.transaction_id is not null`.execute(db)
  for (const row of rows) if (row.reason !== null) problems.push(`hold ${row.id} (${row.status}) ${row.reason}`)
  const { rows: shared } = await sql<{
    transaction_id: number
  }>`select transaction_id from holds where transaction_id is not null group by transaction_id having count(*) > 1`.execute(db)
  for (const row of shared) problems.push(`transaction ${row.transaction_id} captures more than one hold`)
  // Every capture names the hold it captured, and nothing else names a hold.
  // The pass named the transactions that are captures or name a hold; they are read by id.
  for (let start = 0; start < captures.length; start += BATCH) {
    const { rows } = await sql<{ id: number; reason: string | null }>`
      select t.id, case
          when t.kind <> 'capture' then 'is no capture but names a hold'
          when t.hold_id is null then 'is a capture that names no hold'
          when h.id is null then 'is a capture of a missing hold'
          when h.status <> 'captured' or h.transaction_id is null or h.transaction_id <> t.id
            then 'is a capture of a hold it did not capture'
        end as reason
      from transactions t left join holds h on h.id = t.hold_id
      where t.id in (${sql.join(captures.slice(start, start + BATCH))})
      order by t.id`.execute(db)
    for (const row of rows) if (row.reason !== null) problems.push(`transaction ${row.id} ${row.reason}`)
  }
  return problems
}

/**
 * The references of the journal's own rows that the pass settles: every wallet and asset it met
 * exists, and it met every line (each through its transaction). Those not settled are counted in SQL.
 */
async function referencesSeen(db: Executor, wallets: Set<number>, assets: Set<number>, lines: number): Promise<Set<string>> {
  const settled = new Set<string>()
  const exist = async (table: 'wallets' | 'assets', ids: Set<number>) => {
    const { rows } = await sql<{ id: number | string }>`select id from ${sql.table(table)}`.execute(db)
    const found = new Set(rows.map((row) => Number(row.id)))
    for (const id of ids) if (!found.has(Number(id))) return false
    return true
  }
  if (await exist('wallets', wallets)) settled.add('transactions.sending_wallet_id').add('transactions.receiving_wallet_id')
  if (await exist('assets', assets)) settled.add('transaction_assets.asset_id')
  const { rows } = await sql<{ count: number | string }>`select count(*) as count from transaction_assets`.execute(db)
  if (Number(rows[0].count) === lines) settled.add('transaction_assets.transaction_id')
  return settled
}
