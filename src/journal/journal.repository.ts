import { sql, type RawBuilder } from 'kysely'
import type { Executor } from '../db/database.ts'
import { anyOf, insertRows, isPostgres, runWrites, type Write } from '../db/dialect.ts'
import { sqliteStatementsOf } from '../db/sqlite-statements.ts'
import { encodedTail, type EncodedTransaction } from './encoding.ts'
import { isStored, subtreeHash, type Frontier, type Node } from './merkle.ts'

/**
 * The journal's SQL (migration 0015). Lists of ids and rows travel as one parameter on PostgreSQL
 * (`anyOf`, `unnest`) and in chunks of a few fixed sizes on SQLite (`insertRows`), so each statement
 * has a few texts whatever a round's size, each prepared once.
 */

export interface JournalState {
  size: number
  lastTransactionId: number
  head: string
  frontier: Frontier
}

export interface Checkpoint {
  size: number
  root: string
  signed_at: string
  signature: string
}

interface StateRow {
  size: number
  last_transaction_id: number
  head: string
  frontier: string
}

/** The sequencer's state; `lock` holds its row for the rest of the transaction (PostgreSQL), undefined when another holds it. */
export async function readState(executor: Executor, lock: boolean): Promise<JournalState | undefined> {
  const locking = lock && isPostgres(executor) ? sql` for update skip locked` : sql``
  const rows = await rowsOf(
    executor,
    sql<StateRow>`select size, last_transaction_id, head, frontier from journal_state where id = 1${locking}`,
  )
  return rows[0] && stateOf(rows[0])
}

function stateOf(row: StateRow): JournalState {
  const frontier = (JSON.parse(row.frontier) as [number, number, string][]).map(([level, idx, hash]) => ({
    level,
    idx,
    hash: Buffer.from(hash, 'hex'),
  }))
  return { size: Number(row.size), lastTransactionId: Number(row.last_transaction_id), head: row.head, frontier }
}

/**
 * SQLite: the next committed transactions without a position, the ids above the last positioned
 * one (ids are commit order on SQLite), up to `limit`, with their encodings (`fieldsOf`): one
 * lookup of the highest id and the highest positioned transaction, and a read of the ids only
 * when this process did not commit every one of them.
 */
export async function takeWaiting(
  executor: Executor,
  state: JournalState,
  limit: number,
  handed: ReadonlyMap<number, Buffer>,
): Promise<Waiting[]> {
  const after = state.lastTransactionId
  const [span] = await rowsOf(
    executor,
    sql<{ high: number | null; top: number | null }>`select max(id) as high, (select max(transaction_id) from journal_entries) as top
      from transactions`,
  )
  const high = Number(span?.high ?? 0)
  if (high <= after) return []
  // Ids this process committed exist: when it committed each id after the last, those are what waits, with no row read each.
  let ids = Array.from({ length: Math.min(high - after, limit) }, (_, i) => after + 1 + i)
  if (!ids.every((id) => handed.has(id)))
    ids = (await rowsOf(executor, sql<{ id: number }>`select id from transactions where id > ${after} order by id limit ${limit}`)).map(
      ({ id }) => Number(id),
    )
  return fieldsOf(executor, ids, Number(span.top ?? 0), handed)
}

/**
 * A transaction waiting for a position, with its encoding after the position (`encodedTail`);
 * `tail` undefined when it has one already (after a restore) or, on PostgreSQL, no row.
 */
export interface Waiting {
  id: number
  tail: Buffer | undefined
}

/**
 * The encodings of these waiting ids (`Waiting`): from `handed` (what this process committed) above
 * the highest positioned id, where nothing has a position; the others from their rows and asset lines.
 */
async function fieldsOf(
  executor: Executor,
  ids: number[],
  positionedUpTo: number,
  handed: ReadonlyMap<number, Buffer>,
): Promise<Waiting[]> {
  const waiting = ids.map((id) => ({ id, tail: id > positionedUpTo ? handed.get(id) : undefined }))
  const unknown = waiting.filter((transaction) => !transaction.tail).map((transaction) => transaction.id)
  if (unknown.length > 0) {
    const read = await readFields(executor, unknown)
    for (const transaction of waiting) {
      const fields = transaction.tail ? undefined : read.get(transaction.id)
      if (fields) transaction.tail = encodedTail(fields)
    }
  }
  return waiting
}

/** PostgreSQL: where the next round's search for waiting transactions starts: rows after (`xid`, `id`) in that order. */
export interface Watermark {
  xid: string
  id: number
}

/** PostgreSQL: what a round starts from, read in one statement outside a transaction (`readRound`). */
export interface RoundStart {
  state: JournalState
  /** The state row's version (its `xmin`): the round's write applies only while it is still the current one. */
  version: string
  waiting: Waiting[]
  latest: Checkpoint | undefined
  /** Where the next round starts when this one writes (`nextWatermark`). */
  watermark: Watermark
  /** The watermark the state holds (where the next round starts when this one writes nothing). */
  stored: Watermark
  /** Whether nothing waits but positioned rows lie between the state's watermark and `watermark`: worth writing it alone. */
  stale: boolean
}

/** PostgreSQL: the watermark the state holds (a sequencer's first round starts there). */
export async function readWatermark(executor: Executor): Promise<Watermark> {
  const rows = await rowsOf(
    executor,
    sql<{ xid: string; id: number }>`select watermark_xid::text as xid, watermark_id as id from journal_state where id = 1`,
  )
  return { xid: rows[0]?.xid ?? '0', id: Number(rows[0]?.id ?? 0) }
}

/**
 * PostgreSQL: the stored watermark and the id the server's next transaction gets, when the watermark
 * is above it: ids from another cluster (a copy by `pg_dump` or logical replication), which would
 * hide this cluster's new transactions below the watermark. Read without taking an id.
 */
export async function watermarkFromElsewhere(executor: Executor): Promise<{ watermark: string; next: string } | undefined> {
  const rows = await rowsOf(
    executor,
    sql<{ watermark: string; next: string }>`select watermark_xid::text as watermark,
        pg_snapshot_xmax(pg_current_snapshot())::text as next
      from journal_state where id = 1 and watermark_xid > pg_snapshot_xmax(pg_current_snapshot())::text::bigint`,
  )
  return rows[0]
}

/** PostgreSQL: the rows of `transactions` (as `t`) after watermark `from`, in the order of the index `(journal_xid, id)`. */
const afterWatermark = (from: Watermark) =>
  sql`t.journal_xid is not null and (t.journal_xid, t.id) > (${from.xid}::xid8, ${from.id}::bigint)`

/** Whether watermark `a` comes after `b`. */
const isAfter = (a: Watermark, b: Watermark): boolean => BigInt(a.xid) > BigInt(b.xid) || (a.xid === b.xid && a.id > b.id)

/**
 * PostgreSQL: the state, its row's version, the lowest `limit` waiting transactions with the
 * highest positioned transaction id, and the latest checkpoint, from one snapshot in one statement;
 * then the fields of the waiting ids (`fieldsOf`). Every round writes the state row, so the
 * snapshot holds every round up to that version, and `recordRoundAt` writes nothing when another
 * came after it.
 *
 * Waiting: the rows without an entry after `from` in (`journal_xid`, `id`) order (migration 0040):
 * the state's watermark as this instance last read or wrote it. Watermarks only move forward, so an
 * older one reads a few positioned rows again and misses none. In index order with a limit the
 * planner walks the index; a row above the highest positioned id has no entry, and each other is
 * looked up alone (`offset 0`: never a hash of every entry). A writer's row holds its transaction's full id, and every transaction this
 * snapshot does not show is still running (its id at or above the snapshot's xmin) or has none yet
 * (it will get one above every id given so far): the next round starts at the xmin, or at the
 * last row taken when the batch stopped the round first. Whether positioned rows lag behind the
 * xmin (`stale`) is the first row after `from` in index order: one row read, where an `exists` over
 * the range let the planner scan the whole table.
 */
export async function readRound(
  executor: Executor,
  limit: number,
  handed: ReadonlyMap<number, Buffer>,
  from: Watermark,
): Promise<RoundStart | undefined> {
  const rows = await rowsOf(
    executor,
    sql<
      StateRow & {
        version: string
        top: number | null
        waiting: (string | number)[]
        last_xid: string | null
        horizon: string
        stale: boolean
        stored_xid: string
        stored_id: number
        latest: Checkpoint | null
      }
    >`with w as materialized (select t.id, t.journal_xid from transactions t
        where ${afterWatermark(from)}
          and (t.id > (select coalesce(max(transaction_id), 0) from journal_entries)
            or not exists (select from journal_entries j where j.transaction_id = t.id offset 0))
        order by t.journal_xid, t.id limit ${limit})
      select s.size, s.last_transaction_id, s.head, s.frontier, s.xmin::text as version,
        s.watermark_xid::text as stored_xid, s.watermark_id as stored_id,
        (select max(transaction_id) from journal_entries) as top,
        array(select id from w order by journal_xid, id) as waiting,
        (select w.journal_xid::text from w order by w.journal_xid desc, w.id desc limit 1) as last_xid,
        pg_snapshot_xmin(pg_current_snapshot())::text as horizon,
        coalesce((select t.journal_xid from transactions t where ${afterWatermark(from)} order by t.journal_xid, t.id limit 1)
          < pg_snapshot_xmin(pg_current_snapshot()), false) as stale,
        (select json_build_object('size', size, 'root', root, 'signed_at', signed_at, 'signature', signature)
          from journal_checkpoints order by size desc limit 1) as latest
      from journal_state s where s.id = 1`,
  )
  const row = rows[0]
  if (!row) return undefined
  const ids = row.waiting.map(Number)
  const watermark = nextWatermark(row.horizon, ids.length < limit ? undefined : { xid: String(row.last_xid), id: ids[ids.length - 1] })
  const stored = { xid: row.stored_xid, id: Number(row.stored_id) }
  return {
    state: stateOf(row),
    version: row.version,
    waiting: await fieldsOf(executor, ids, Number(row.top ?? 0), handed),
    latest: row.latest ? { ...row.latest, size: Number(row.latest.size) } : undefined,
    watermark,
    stored,
    stale: ids.length === 0 && row.stale && isAfter(watermark, stored),
  }
}

/**
 * Where the round after one reading at `horizon` (its snapshot's xmin) starts: at the horizon, every
 * row the snapshot showed being taken; or, when the batch stopped it at `last`, right after `last`
 * if that comes first (the rows between are taken, or still waiting and read again).
 */
export function nextWatermark(horizon: string, last: Watermark | undefined): Watermark {
  return last && BigInt(last.xid) < BigInt(horizon) ? last : { xid: horizon, id: 0 }
}

/** The encoding's fields of these committed transactions, by id; none for an id positioned already or without a row. */
async function readFields(executor: Executor, ids: number[]): Promise<Map<number, EncodedTransaction>> {
  const rows = await rowsOf(
    executor,
    isPostgres(executor)
      ? // Lookups by id, one row at a time (`limit 1` keeps the planner from turning them into joins): a merge
        // join on a few ids would read `transactions` from its first row.
        sql<WaitingRow>`select ${WAITING_FIELDS}
        from unnest(${ids}::bigint[]) as p(transaction_id)
        left join lateral (select ${TRANSACTION_FIELDS} from transactions where id = p.transaction_id limit 1) t on true
        left join lateral (select position from journal_entries where transaction_id = p.transaction_id limit 1) j on true`
      : sql<WaitingRow>`select ${WAITING_FIELDS}
        from transactions t left join journal_entries j on j.transaction_id = t.id
        where ${anyOf(executor, sql.ref('t.id'), ids)}`,
  )
  const byId = new Map<number, EncodedTransaction>()
  for (const row of rows) if (row.id !== null && row.position === null) byId.set(Number(row.id), toEncoded(row))
  if (byId.size > 0) {
    const lines = await rowsOf(
      executor,
      sql<{ transaction_id: number; asset_id: number; quantity: number }>`select transaction_id, asset_id, quantity
        from transaction_assets where ${anyOf(executor, sql.ref('transaction_id'), [...byId.keys()])}`,
    )
    for (const line of lines) byId.get(Number(line.transaction_id))?.assets.push([Number(line.asset_id), Number(line.quantity)])
  }
  return byId
}

type WaitingRow = Parameters<typeof toEncoded>[0] & { id: number | null; position: number | null }

const TRANSACTION_FIELDS = sql.raw('id, kind, created_at, sending_wallet_id, receiving_wallet_id, memo, reverses, hold_id, metadata')
const WAITING_FIELDS = sql.raw(
  't.id, t.kind, t.created_at, t.sending_wallet_id, t.receiving_wallet_id, t.memo, t.reverses, t.hold_id, t.metadata, j.position',
)

/** Whether any committed transaction waits for a position: one read outside a transaction (an idle poll on SQLite; the bench). */
export async function hasUnpositioned(executor: Executor): Promise<boolean> {
  if (isPostgres(executor)) {
    const from = await readWatermark(executor)
    const { rows } = await sql<{ waiting: boolean }>`select exists (select from transactions t
      where ${afterWatermark(from)}
        and not exists (select from journal_entries j where j.transaction_id = t.id offset 0)) as waiting`.execute(executor)
    return rows[0]?.waiting === true
  }
  const { rows } = await sql<{
    waiting: number
  }>`select exists (select 1 from transactions where id > (select last_transaction_id from journal_state where id = 1)) as waiting`.execute(
    executor,
  )
  return Number(rows[0]?.waiting) === 1
}

function toEncoded(row: Omit<EncodedTransaction, 'assets' | 'metadata'> & { metadata: string | null }): EncodedTransaction {
  return {
    id: Number(row.id),
    kind: row.kind,
    created_at: row.created_at,
    sending_wallet_id: Number(row.sending_wallet_id),
    receiving_wallet_id: Number(row.receiving_wallet_id),
    memo: row.memo,
    assets: [],
    reverses: row.reverses === null ? null : Number(row.reverses),
    hold_id: row.hold_id === null ? null : Number(row.hold_id),
    metadata: row.metadata ? (JSON.parse(row.metadata) as Record<string, string>) : {},
  }
}

/**
 * SQLite: what a round changes, in its transaction: its entries, the subtrees they complete, the
 * page generation (what a history page prints changed: pages kept in memory are read again,
 * migration 0013) and the state (`recordRoundAt` is PostgreSQL's).
 */
export async function recordRound(
  trx: Executor,
  round: { entries: [position: number, transactionId: number, hash: string][]; nodes: Node[]; state: JournalState },
): Promise<void> {
  const { entries, nodes, state } = round
  const writes: Write[] = []
  if (entries.length > 0) {
    writes.push(insertRows(trx, 'journal_entries', ENTRY_COLUMNS, entries))
    if (nodes.length > 0) {
      const rows = nodes.map((node) => [node.level, node.idx, node.hash.toString('hex')])
      writes.push(insertRows(trx, 'journal_nodes', NODE_COLUMNS, rows))
    }
    writes.push({ statement: sql`update page_generation set generation = generation + 1` })
  }
  const frontier = frontierText(state.frontier)
  writes.push({
    statement: sql`update journal_state set size = ${state.size}, last_transaction_id = ${state.lastTransactionId},
      head = ${state.head}, frontier = ${frontier} where id = 1`,
  })
  await runWrites(
    trx,
    writes.filter((write) => write.rows),
  )
  for (const write of writes) if (!write.rows) await rowsOf(trx, write.statement)
}

const frontierText = (frontier: Frontier) => JSON.stringify(frontier.map((node) => [node.level, node.idx, node.hash.toString('hex')]))

/**
 * PostgreSQL: `recordRound`, the next round's watermark and the round's checkpoint as one statement
 * outside a transaction, which writes only while the state row is still at `version` (the round's start, `readRound`): of rounds
 * started from one state, one writes and the others nothing, so positions stay consecutive and each
 * round commits after the one before it. Answers whether it wrote.
 */
export async function recordRoundAt(
  executor: Executor,
  version: string,
  round: {
    entries: [position: number, transactionId: number, hash: string][]
    nodes: Node[]
    state: JournalState
    watermark: Watermark
    checkpoint: Checkpoint | undefined
  },
): Promise<boolean> {
  const { entries, nodes, state, watermark, checkpoint } = round
  const column = <T>(rows: unknown[][], i: number) => rows.map((row) => row[i]) as T[]
  const nodeRows = nodes.map((node) => [node.level, node.idx, node.hash.toString('hex')])
  // Each write below runs only when the state's update did (`exists (select from s)`).
  const rows = await rowsOf(
    executor,
    sql<{ applied: number }>`with s as (update journal_state set size = ${state.size}, last_transaction_id = ${state.lastTransactionId},
        head = ${state.head}, frontier = ${frontierText(state.frontier)},
        watermark_xid = ${watermark.xid}::bigint, watermark_id = ${watermark.id} where id = 1 and xmin = ${version}::xid returning id),
      e as (insert into journal_entries (position, transaction_id, hash) select position, transaction_id, hash
        from unnest(${column(entries, 0)}::bigint[], ${column(entries, 1)}::bigint[], ${column(entries, 2)}::text[])
          as r(position, transaction_id, hash) where exists (select from s)),
      n as (insert into journal_nodes (level, idx, hash) select level, idx, hash
        from unnest(${column(nodeRows, 0)}::bigint[], ${column(nodeRows, 1)}::bigint[], ${column(nodeRows, 2)}::text[])
          as r(level, idx, hash) where exists (select from s)),
      g as (update page_generation set generation = generation + 1 where ${entries.length > 0} and exists (select from s)),
      c as (insert into journal_checkpoints (size, root, signed_at, signature)
        select ${checkpoint?.size ?? null}::bigint, ${checkpoint?.root ?? null},
          ${checkpoint?.signed_at ?? null}, ${checkpoint?.signature ?? null}
        where ${checkpoint !== undefined} and exists (select from s))
      select count(*)::int as applied from s`,
  )
  return Number(rows[0]?.applied) === 1
}

/**
 * The rows of a statement; on SQLite inside the caller's transaction (which holds the one
 * connection) through the prepared-statement cache, so a round's fixed texts are prepared once.
 */
async function rowsOf<Row>(executor: Executor, statement: RawBuilder<Row>): Promise<Row[]> {
  const statements = sqliteStatementsOf(executor)
  if (!statements || !executor.isTransaction) return (await statement.execute(executor)).rows
  const compiled = statement.compile(executor)
  const prepared = statements.prepare(compiled.sql)
  if (prepared.reader) return prepared.all(compiled.parameters) as Row[]
  prepared.run(compiled.parameters)
  return []
}

const ENTRY_COLUMNS = [
  ['position', 'bigint'],
  ['transaction_id', 'bigint'],
  ['hash', 'text'],
] as const

const NODE_COLUMNS = [
  ['level', 'bigint'],
  ['idx', 'bigint'],
  ['hash', 'text'],
] as const

export async function findLatestCheckpoint(executor: Executor): Promise<Checkpoint | undefined> {
  const { rows } =
    await sql<Checkpoint>`select size, root, signed_at, signature from journal_checkpoints order by size desc limit 1`.execute(executor)
  return rows[0] && { ...rows[0], size: Number(rows[0].size) }
}

export async function insertCheckpoint(trx: Executor, checkpoint: Checkpoint): Promise<void> {
  await trx.insertInto('journal_checkpoints').values(checkpoint).execute()
}

export async function listCheckpoints(executor: Executor): Promise<Checkpoint[]> {
  const rows = await executor.selectFrom('journal_checkpoints').selectAll().orderBy('size').execute()
  return rows.map((row) => ({ ...row, size: Number(row.size) }))
}

/**
 * The hashes of these complete subtrees, keyed `level:idx`: level 0 the entries' own hashes (which
 * the caller hashes as leaves); below `STORED_LEVEL` hashed from the entries they cover, above it
 * read from `journal_nodes`.
 */
export async function readNodes(executor: Executor, keys: { level: number; idx: number }[]): Promise<Map<string, string>> {
  const found = new Map<string, string>()
  const low = keys.filter((key) => !isStored(key))
  const stored = keys.filter(isStored)
  if (low.length > 0) {
    const positions = new Set<number>()
    for (const { level, idx } of low) for (let leaf = idx * 2 ** level; leaf < (idx + 1) * 2 ** level; leaf++) positions.add(leaf + 1)
    const rows = await executor
      .selectFrom('journal_entries')
      .select(['position', 'hash'])
      .where('position', 'in', [...positions])
      .execute()
    const hashes = new Map(rows.map((row) => [Number(row.position), Buffer.from(row.hash, 'hex')]))
    for (const { level, idx } of low) {
      const leaves = Array.from({ length: 2 ** level }, (_, i) => hashes.get(idx * 2 ** level + i + 1))
      if (leaves.some((leaf) => leaf === undefined)) continue
      const hash = level === 0 ? (leaves[0] as Buffer) : subtreeHash(leaves as Buffer[])
      found.set(`${level}:${idx}`, hash.toString('hex'))
    }
  }
  if (stored.length > 0) {
    const rows = await executor
      .selectFrom('journal_nodes')
      .select(['level', 'idx', 'hash'])
      .where((eb) => eb.or(stored.map((key) => eb.and([eb('level', '=', key.level), eb('idx', '=', key.idx)]))))
      .execute()
    for (const row of rows) found.set(`${Number(row.level)}:${Number(row.idx)}`, row.hash)
  }
  return found
}

/**
 * SQLite after a restore: the sequencer takes ids above `last_transaction_id`, so it is set below
 * the lowest restored transaction without a position (a backup of PostgreSQL may hold some whose
 * ids lie below positioned ones). PostgreSQL's restore starts its watermark over (`operations/restore.ts`).
 */
export async function lowerSqliteWatermark(executor: Executor): Promise<void> {
  if (isPostgres(executor)) return
  await sql`update journal_state set last_transaction_id = min(last_transaction_id,
    coalesce((select min(t.id) - 1 from transactions t
      where not exists (select 1 from journal_entries j where j.transaction_id = t.id)), last_transaction_id))
    where id = 1`.execute(executor)
}
