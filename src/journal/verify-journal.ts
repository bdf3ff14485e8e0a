import fs from 'node:fs'
import path from 'node:path'
import { availableParallelism, constants, setPriority } from 'node:os'
import { Worker } from 'node:worker_threads'
import { sql } from 'kysely'
import type { DatabaseOptions, Db, Executor } from '../db/database.ts'
import { isPostgres } from '../db/dialect.ts'
import { inReadOnlySnapshot } from '../db/retry.ts'
import { forLongReads, readArrays } from '../db/sqlite-statements.ts'
import { chainHashHex, encodeAssets, encodeFields, encodeMetadata, GENESIS_HASH } from './encoding.ts'
import { addLeaf as addLeafTo, EncodedRange, leafHashOfHex } from './encoded-range.ts'
import * as journal from './journal.repository.ts'
import { appendLatin1Leaf, EMPTY_ROOT, latin1RootOf, nodeHashLatin1, rootOf, STORED_LEVEL, type Latin1Node } from './merkle.ts'
import { parseSigningKey, signingKeyFile, verifyCheckpointSignature, type SigningKey } from '../secrets/signing-key.ts'

export interface JournalReport {
  ok: boolean
  /** Entries read (positions 1 to `entries`). */
  entries: number
  checkpoints: number
  /** False when no signing key was found (SIGNING_KEY or the data directory's key file): signatures were not checked. */
  signaturesChecked: boolean
  /** Committed transactions the sequencer has not positioned yet (not a fault: it runs after commit). */
  unpositioned: number
  /** The first position whose transaction no longer gives its hash; undefined when every one does. */
  firstMismatch: number | undefined
  problems: string[]
}

/** Positions read per query: large, so that each query's cost is spread over many transactions. */
const CHUNK = 20_000

/** Problems named at most; the first mismatch is always named. */
const NAMED = 1_000

/** The columns `readEntries` answers, in order. */
const [POSITION, TRANSACTION_ID, HASH, KIND, CREATED_AT, SENDING, RECEIVING, MEMO, REVERSES, HOLD_ID, METADATA, ASSET_ID, QUANTITY] = [
  0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,
]

/** The lowest and highest transaction ids of the entries with positions in (`after`, `upTo`] (nulls: none). */
async function idsOfRange(db: Executor, after: number, upTo: number): Promise<unknown[]> {
  // `+ 0`: the range read by position, never a walk of the index by transaction id (seconds a range at 10M).
  const [range] = await readArrays(
    db,
    sql`select min(transaction_id + 0), max(transaction_id + 0) from journal_entries where position > ${after} and position <= ${upTo}`,
  )
  return range
}

/**
 * Entries with positions in (`after`, `upTo`], in order, each with its transaction's encoded fields
 * and its lines (one row per line): one read through the keys of the three tables. The transactions
 * and lines are bounded by the ids the entries name too, or PostgreSQL hashes both whole tables for
 * every range; positions follow commit order, so those ids span about as many.
 */
async function readEntries(db: Executor, after: number, upTo: number): Promise<unknown[][]> {
  const [low, high] = await idsOfRange(db, after, upTo)
  if (low === null) return []
  const ids = (column: string) => sql`${sql.ref(column)} >= ${low} and ${sql.ref(column)} <= ${high}`
  return readArrays(
    db,
    sql`select j.position, j.transaction_id, j.hash, t.kind, t.created_at, t.sending_wallet_id, t.receiving_wallet_id,
      t.memo, t.reverses, t.hold_id, t.metadata, l.asset_id, l.quantity
    from journal_entries j left join transactions t on t.id = j.transaction_id and ${ids('t.id')}
      left join transaction_assets l on l.transaction_id = t.id and ${ids('l.transaction_id')}
    where j.position > ${after} and j.position <= ${upTo}
    order by j.position`,
  )
}

/**
 * The entries with positions in (`after`, `upTo`] as one text, for `EncodedRange`: a record an
 * entry (on SQLite a line, the entry's first with its fields), `position,transaction id,hash,` then
 * the encoding up to its lines, its lines `[asset,quantity]` (on PostgreSQL all of them, by asset)
 * and the rest up to its metadata, split by U+0003, then U+0001 and the metadata as stored; U+0002
 * between records. A text field is quoted by `to_json`/`json_quote`, which escape every control
 * character (so none of these is met inside it) as `JSON.stringify` does where it matters; on
 * PostgreSQL one holding nothing JSON escapes is quoted as it is, which writes the same for a
 * fraction of the server's time. Integers print alike. One value crosses the driver a range instead
 * of a dozen a line, which cost the process more than the database spends on the text. Where the
 * text does not give the hash, the encoding JavaScript writes from the columns decides (`encodeFromColumns`).
 */
async function readEncodedText(db: Executor, after: number, upTo: number): Promise<Buffer | string | null> {
  // As `readEntries`: the transactions and lines bounded by the ids the entries name.
  const [low, high] = await idsOfRange(db, after, upTo)
  if (low === null) return null
  const ids = (column: string) => sql`${sql.ref(column)} >= ${low} and ${sql.ref(column)} <= ${high}`
  const postgres = isPostgres(db)
  // PostgreSQL: `||` in nested groups, as each `||` copies all it joins (one long chain copied the record once a field, and
  // `concat` looks each argument's type up). The head is empty where there is no transaction, as the lines are.
  const quote = (column: string) => {
    const value = sql.ref(column)
    return sql`case when ${value} ~ '[\\x01-\\x1f"\\\\]' then to_json(${value})::text else '"' || ${value} || '"' end`
  }
  const head = sql`(('["coffer-transaction/v1",' || j.position || ',' || t.id || ',')
      || (${quote('t.kind')} || ',' || ${quote('t.created_at')}))
    || ((',' || t.sending_wallet_id || ',' || t.receiving_wallet_id || ',') || (${quote('t.memo')} || ',['))`
  const entry = postgres
    ? sql`((j.position || ',' || j.transaction_id) || (',' || j.hash || ',') || coalesce(${head}, ''))
        || (((chr(3) || coalesce(l.lines, '') || chr(3))
          || ('],' || coalesce(t.reverses::text, 'null') || ',' || coalesce(t.hold_id::text, 'null') || ','))
          || (chr(1) || coalesce(t.metadata, '')))`
    : sql`concat(j.position, ',', j.transaction_id, ',', j.hash, ',',
        '["coffer-transaction/v1",' || j.position || ',' || t.id || ',' || json_quote(t.kind) || ',' || json_quote(t.created_at)
          || ',' || t.sending_wallet_id || ',' || t.receiving_wallet_id || ',' || json_quote(t.memo) || ',[',
        char(3), l.lines, char(3),
        '],' || coalesce(t.reverses || '', 'null') || ',' || coalesce(t.hold_id || '', 'null') || ',', char(1), t.metadata)`
  // PostgreSQL aggregates a subquery sorted by position in its order, with no sort of the aggregate's own; SQLite in its
  // join's order (position, then the lines of its transaction by asset). `EncodedRange` checks it.
  // SQLite answers the text's UTF-8 bytes (a blob is copied across the driver, not decoded), PostgreSQL the text.
  const [[text]] = await readArrays(
    db,
    sql`select ${postgres ? sql`string_agg(entry, chr(2))` : sql`cast(string_agg(entry, char(2)) as blob)`} from (
      select ${entry} as entry
      from journal_entries j left join transactions t on t.id = j.transaction_id and ${ids('t.id')}
        left join ${
          postgres
            ? sql`(
          select transaction_id, string_agg('[' || asset_id || ',' || quantity || ']', ',' order by asset_id) as lines
          from transaction_assets where ${ids('transaction_id')} group by transaction_id
        )`
            : sql`(select transaction_id, '[' || asset_id || ',' || quantity || ']' as lines from transaction_assets)`
        } l on l.transaction_id = t.id and ${ids('l.transaction_id')}
      where j.position > ${after} and j.position <= ${upTo}
      ${postgres ? sql`order by j.position` : sql``}
    ) as entries`,
  )
  return text as Buffer | string | null
}

/**
 * The encodings the database writes (`readEncodedText`, metadata added) of the positions in (`after`,
 * `upTo`], in order; null where it writes none. @public (tests hash them against the stored hashes)
 */
export async function encodingsByDatabase(db: Executor, after: number, upTo: number): Promise<(string | null)[]> {
  const range = new EncodedRange()
  if (!range.read(await readEncodedText(db, after, upTo))) return []
  return Array.from({ length: range.count }, (_, k) => range.encoding(k))
}

/** The encoding of the entry whose rows (`readEntries`', one a line) are `rows[from]` to `rows[to - 1]`, as JavaScript writes it. */
function encodeRows(rows: unknown[][], from: number, to: number): string {
  const entry = rows[from]
  const lines: [number, number][] = []
  for (let i = from; i < to; i++) if (rows[i][ASSET_ID] !== null) lines.push([Number(rows[i][ASSET_ID]), Number(rows[i][QUANTITY])])
  return encodeFields(
    Number(entry[POSITION]),
    Number(entry[TRANSACTION_ID]),
    entry[KIND] as string,
    entry[CREATED_AT] as string,
    Number(entry[SENDING]),
    Number(entry[RECEIVING]),
    entry[MEMO] as string,
    encodeAssets(lines),
    entry[REVERSES] === null ? null : Number(entry[REVERSES]),
    entry[HOLD_ID] === null ? null : Number(entry[HOLD_ID]),
    encodeMetadata(entry[METADATA] as string | null),
  )
}

/** The encoding of the transaction at `position` from its columns; undefined when there is none. */
async function encodeFromColumns(db: Executor, position: number): Promise<string | undefined> {
  const rows = await readEntries(db, position - 1, position)
  // A transaction's kind is never null: null when there is no transaction of that id.
  return rows.length === 0 || rows[0][KIND] === null ? undefined : encodeRows(rows, 0, rows.length)
}

/** A subtree's key: level and index in one number (levels stay below 53 - 40, indexes below 2^40). */
const nodeKey = (level: number, idx: number) => level * 2 ** 40 + idx

/** Leaves under a subtree of the lowest stored level: the chain's check hashes them, the tree's starts from its subtrees. */
const GROUP = 2 ** STORED_LEVEL

/**
 * The stored complete subtrees (level ≥ `from`) that the leaves after the first `after` up to the first
 * `upTo` complete: one range of indexes per level, through the key.
 */
async function readCompletedNodes(db: Executor, after: number, upTo: number, from: number): Promise<Map<number, string>> {
  const found = new Map<number, string>()
  for (let level = from; 2 ** level <= upTo; level++) {
    const span = 2 ** level
    // A subtree at this level is complete once its last leaf is in: (idx + 1) · span in (after, upTo].
    const first = Math.floor(after / span)
    const last = Math.floor(upTo / span) - 1
    if (first > last) continue
    const rows = await readArrays(
      db,
      sql`select idx, hash from journal_nodes where level = ${level} and idx >= ${first} and idx <= ${last}`,
    )
    for (const [idx, hash] of rows) found.set(nodeKey(level, Number(idx)), hash as string)
  }
  return found
}

const hexScratch = Buffer.alloc(32)

/** A latin1 hash in hex. */
function hexOf(latin1: string): string {
  hexScratch.write(latin1, 0, 32, 'latin1')
  return hexScratch.toString('hex', 0, 32)
}

/** A hex hash as latin1 (`merkle.ts`'s string form). */
function latin1Of(hex: string): string {
  hexScratch.write(hex, 0, 32, 'hex')
  return hexScratch.toString('latin1', 0, 32)
}

/** The tree (latin1 frontier) of the stored hashes of positions in (`after`, `upTo`], at most a subtree of `GROUP`. */
async function treeOfEntries(db: Executor, after: number, upTo: number): Promise<Latin1Node[]> {
  const tree: Latin1Node[] = []
  if (upTo <= after) return tree
  const rows = await readArrays(
    db,
    sql`select hash from journal_entries where position > ${after} and position <= ${upTo} order by position`,
  )
  rows.forEach(([hash], i) => appendLatin1Leaf(tree, i, hash as string))
  return tree
}

const subtreeProblem = (level: number, idx: number, hex: string | undefined, from: 'hashes' | 'halves') => {
  const leaves = `positions ${idx * 2 ** level + 1} to ${(idx + 1) * 2 ** level}`
  if (hex === undefined) return `the stored subtree over ${leaves} is missing`
  return from === 'hashes'
    ? `the stored subtree over ${leaves} is not the tree of their hashes: proofs through it do not check out`
    : `the stored subtree over ${leaves} is not the hash of its two halves as stored: proofs through it do not check out`
}

async function countRows(db: Executor, table: 'transactions' | 'journal_nodes'): Promise<number> {
  const { rows } = await sql<{ count: number }>`select count(*) as count from ${sql.table(table)}`.execute(db)
  return Number(rows[0].count)
}

type Progress = (done: number, total: number) => void

/** What the check of the chain over a range of positions finds. */
interface ChainPart {
  /** Positions missing or whose hash no longer matches. */
  problems: string[]
  /** Stored subtrees of the lowest level that are not the tree of their hashes. */
  subtrees: string[]
  firstMismatch: number | undefined
  /** Entries whose transaction exists: each names a distinct one (a unique key), so the others have no position. */
  positioned: number
}

/**
 * Every hash of the positions in (`after`, `upTo`] from its transaction's stored fields and the
 * stored hash before it: each link on its own, so ranges are checked apart (on threads of their own).
 * Every position is there, and every stored subtree of the lowest level (`GROUP` leaves) whose leaves
 * are in the range is the tree of their stored hashes: the hashes are read here once for both
 * (`after` a multiple of `GROUP`).
 */
async function checkChain(db: Executor, after: number, upTo: number, chunk: number, progress?: Progress): Promise<ChainPart> {
  const problems: string[] = []
  const subtrees: string[] = []
  let firstMismatch: number | undefined
  let positioned = 0
  // A range's rows (a few MB) sorted by position in memory: PostgreSQL's default 4 MB spilled them to disk.
  if (isPostgres(db)) await sql`set local work_mem = '32MB'`.execute(db)
  const { rows: before } = await sql<{ position: number | string; hash: string }>`
    select position, hash from journal_entries where position <= ${after} order by position desc limit 1`.execute(db)
  let previous = before[0]?.hash ?? GENESIS_HASH
  // Positions missing from before this range on are named by the range before, once, as one pass names them.
  let gapBefore = after > 0 && Number(before[0]?.position ?? 0) !== after
  const missing = (position: number, next: number | undefined) => {
    firstMismatch ??= position
    if (problems.length < NAMED)
      problems.push(`position ${position} is missing (${next === undefined ? 'no entry follows it' : `the next entry is ${next}`})`)
  }
  let expected = after + 1
  // The left halves still open of the current subtree of `GROUP` leaves, and its leaves so far; -1 once one of them is missing.
  const levels = new Array<string>(STORED_LEVEL)
  let filled = -1
  // The lowest-level subtrees the leaves of a read complete, by index, as latin1 hashes.
  const computed = new Map<number, string>()
  /** Where the stored hash of `position` (leaf `position - 1`) goes in its subtree; -1 when the subtree misses a leaf. */
  const leafAt = (position: number) => {
    const within = (position - 1) % GROUP
    if (within === 0) filled = 0
    if (filled !== within) filled = -1
    return filled
  }
  const addLeaf = (position: number, within: number, leaf: string) => {
    const node = addLeafTo(levels, within, leaf)
    if (++filled === GROUP) computed.set((position - 1 - within) / GROUP, node)
  }
  /** The check of one position whose transaction `exists`, and `gives` its stored hash or not. */
  const checked = (position: number, transactionId: unknown, exists: boolean, gives: boolean) => {
    if (position !== expected && !gapBefore) missing(expected, position)
    gapBefore = false
    expected = position + 1
    if (exists) positioned++
    if (gives) return
    firstMismatch ??= position
    if (problems.length < NAMED)
      problems.push(
        exists
          ? `position ${position} (transaction ${transactionId}): the transaction no longer gives its hash`
          : `position ${position}: transaction ${transactionId} is missing`,
      )
  }
  const range = new EncodedRange()
  for (let from = after; from < upTo; from += chunk) {
    const to = Math.min(from + chunk, upTo)
    computed.clear()
    // The database writes most of each encoding (`readEncodedText`); where its text is not as written, the range is read as rows.
    if (range.read(await readEncodedText(db, from, to))) {
      for (let k = 0; k < range.count; k++) {
        const position = range.position(k)
        let gives = range.gives(k, k === 0 ? previous : undefined)
        let exists = gives
        if (!gives) {
          // The encoding as JavaScript writes it from the columns decides whenever the database's text does not give the hash.
          const text = await encodeFromColumns(db, position)
          exists = text !== undefined
          gives = text !== undefined && chainHashHex(k === 0 ? previous : range.hashHex(k - 1), text) === range.hashHex(k)
        }
        checked(position, range.transactionId(k), exists, gives)
        const within = leafAt(position)
        if (within >= 0) addLeaf(position, within, range.leafHash(k))
      }
      if (range.count > 0) previous = range.hashHex(range.count - 1)
    } else {
      const rows = await readEntries(db, from, to)
      for (let i = 0; i < rows.length;) {
        const entry = rows[i]
        const position = Number(entry[POSITION])
        const stored = entry[HASH] as string
        const start = i
        while (i < rows.length && Number(rows[i][POSITION]) === position) i++
        // A transaction's kind is never null: null when there is no transaction of that id.
        const exists = entry[KIND] !== null
        checked(position, entry[TRANSACTION_ID], exists, exists && chainHashHex(previous, encodeRows(rows, start, i)) === stored)
        previous = stored
        const within = leafAt(position)
        if (within >= 0) addLeaf(position, within, leafHashOfHex(stored))
      }
    }
    // The stored subtrees of the lowest level completed in (from, to]; one whose leaves are not all read is not compared.
    const first = Math.floor(from / GROUP)
    const last = Math.floor(to / GROUP) - 1
    if (first <= last) {
      const rows = await readArrays(
        db,
        sql`select idx, hash from journal_nodes where level = ${STORED_LEVEL} and idx >= ${first} and idx <= ${last}`,
      )
      const stored = new Map(rows.map(([idx, hash]) => [Number(idx), hash as string]))
      for (let idx = first; idx <= last; idx++) {
        const hex = stored.get(idx)
        const mine = computed.get(idx)
        if ((hex === undefined || (mine !== undefined && hex !== hexOf(mine))) && subtrees.length < NAMED)
          subtrees.push(subtreeProblem(STORED_LEVEL, idx, hex, 'hashes'))
      }
    }
    progress?.(to - after, upTo - after)
  }
  if (expected <= upTo && !gapBefore) {
    const [[next]] = await readArrays(db, sql`select min(position) from journal_entries where position > ${upTo}`)
    missing(expected, next === null ? undefined : Number(next))
  }
  return { problems, subtrees, firstMismatch, positioned }
}

/** What the check of the tree finds. */
interface TreePart {
  problems: string[]
  entries: number
  checkpoints: number
  transactions: number
}

/**
 * The tree above the stored subtrees of the lowest level (which the chain's check compares with the
 * hashes): every stored subtree above them, the Merkle root of every checkpoint and its signature
 * and the journal's state. A root of a size that is no multiple of `GROUP` also hashes the last few
 * entries. `onLast` hears the last position first, so that the chain's check can be shared out meanwhile.
 */
async function checkTree(
  db: Executor,
  key: SigningKey | undefined,
  chunk: number,
  onLast?: (last: number) => void | Promise<void>,
): Promise<TreePart> {
  const problems: string[] = []
  const name = (problem: string) => {
    if (problems.length < NAMED) problems.push(problem)
  }
  const [head] = await readArrays(db, sql`select position, hash from journal_entries order by position desc limit 1`)
  const last = Number(head?.[0] ?? 0)
  const started = onLast?.(last)
  const checkpoints = await journal.listCheckpoints(db)
  const state = await journal.readState(db, false)
  // The tree of the first `groups` stored subtrees of the lowest level.
  const frontier: Latin1Node[] = []
  let groups = 0
  const total = Math.floor(last / GROUP)
  const rootAt = async (size: number) => {
    if (size === 0) return EMPTY_ROOT.toString('hex')
    const tail = await treeOfEntries(db, groups * GROUP, size)
    return hexOf(latin1RootOf([...frontier, ...tail]))
  }
  let next = 0
  // The checkpoints whose size the tree has reached (all but the last few leaves).
  const checkDue = async () => {
    for (; next < checkpoints.length && checkpoints[next].size <= last && Math.floor(checkpoints[next].size / GROUP) === groups; next++) {
      const checkpoint = checkpoints[next]
      if ((await rootAt(checkpoint.size)) !== checkpoint.root)
        name(`checkpoint of size ${checkpoint.size}: its root is not the tree of the first ${checkpoint.size} hashes`)
      if (key && !verifyCheckpointSignature(key.publicKey, checkpoint))
        name(`checkpoint of size ${checkpoint.size}: its signature does not verify with the signing key`)
    }
  }
  await checkDue()
  let nodes = total
  for (let low = 0; low < total; low += chunk) {
    const high = Math.min(low + chunk, total)
    const rows = await readArrays(
      db,
      sql`select idx, hash from journal_nodes where level = ${STORED_LEVEL} and idx >= ${low} and idx < ${high} order by idx`,
    )
    // The stored subtrees above that these complete, which proofs are read from.
    const above = await readCompletedNodes(db, low * GROUP, high * GROUP, STORED_LEVEL + 1)
    for (let idx = low, r = 0; idx < high; idx++) {
      // One missing is named by the chain's check; hashed from its entries here, so that the tree above still checks.
      let node: Latin1Node = {
        level: STORED_LEVEL,
        idx,
        hash:
          r < rows.length && Number(rows[r][0]) === idx
            ? latin1Of(rows[r++][1] as string)
            : latin1RootOf(await treeOfEntries(db, idx * GROUP, (idx + 1) * GROUP)),
      }
      // Each stored subtree above is the hash of its two halves as stored, and goes on up as stored: checked from
      // the lowest level up, all are then the tree of the hashes, and one changed is named alone, not every one above it.
      while (frontier.length > 0 && frontier[frontier.length - 1].level === node.level) {
        const left = frontier.pop() as Latin1Node
        const [level, half] = [node.level + 1, Math.floor(left.idx / 2)]
        const hash = nodeHashLatin1(left.hash, node.hash)
        const hex = above.get(nodeKey(level, half))
        if (hex === undefined || hex !== hexOf(hash)) name(subtreeProblem(level, half, hex, 'halves'))
        node = { level, idx: half, hash: hex === undefined ? hash : latin1Of(hex) }
        nodes++
      }
      frontier.push(node)
      groups++
      await checkDue()
    }
  }
  if (state && state.size !== last) problems.push(`the journal's state says ${state.size} entries, ${last} were read`)
  else if (state && (state.head !== (head?.[1] ?? GENESIS_HASH) || rootOf(state.frontier).toString('hex') !== (await rootAt(last))))
    problems.push(`the journal's state (the last hash and the tree's frontier) is not that of its ${last} entries`)
  const storedNodes = await countRows(db, 'journal_nodes')
  if (storedNodes !== nodes) problems.push(`${storedNodes} subtrees are stored, the tree of ${last} entries has ${nodes}`)
  for (const checkpoint of checkpoints.slice(next))
    problems.push(`checkpoint of size ${checkpoint.size}: beyond the journal's ${last} entries`)
  const transactions = await countRows(db, 'transactions')
  await started
  return { problems, entries: last, checkpoints: checkpoints.length, transactions }
}

/** The report of the tree's check and the chain's, in its ranges in order. */
function reportOf(tree: TreePart, chain: ChainPart[], key: SigningKey | undefined): JournalReport {
  const problems = [
    ...chain.flatMap((part) => part.problems).slice(0, NAMED),
    ...chain.flatMap((part) => part.subtrees).slice(0, NAMED),
    ...tree.problems,
  ]
  const mismatches = chain.map((part) => part.firstMismatch).filter((at) => at !== undefined)
  return {
    ok: problems.length === 0,
    entries: tree.entries,
    checkpoints: tree.checkpoints,
    signaturesChecked: key !== undefined,
    unpositioned: tree.transactions - chain.reduce((sum, part) => sum + part.positioned, 0),
    firstMismatch: mismatches.length > 0 ? Math.min(...mismatches) : undefined,
    problems,
  }
}

/**
 * The journal recomputed from the transactions (`coffer verify`): every hash from its
 * transaction's stored fields and the hash before it, the Merkle root of every checkpoint from
 * those hashes, every stored subtree (`journal_nodes`, which proofs are read from) and every
 * checkpoint's signature with the public key. A row changed in the database after it was
 * positioned shows as the first position whose hash no longer matches. Read in one read-only
 * snapshot, so the sequencer positioning meanwhile is wholly in or out.
 */
export async function verifyJournal(db: Executor, key: SigningKey | undefined, progress?: Progress, chunk = CHUNK): Promise<JournalReport> {
  if (!db.isTransaction) {
    return inReadOnlySnapshot(db as Db, (trx) => verifyJournal(trx, key, progress, chunk))
  }
  let last = 0
  const tree = await checkTree(db, key, chunk, (found) => void (last = found))
  // The ranges the threads would take, one after another.
  const parts: ChainPart[] = []
  for (const [after, upTo] of chainRanges(last, CHAIN_THREADS, chunk))
    parts.push(await checkChain(db, after, upTo, chunk, progress && ((done) => progress(after + done, last))))
  return reportOf(tree, parts, key)
}

/** The signing key as configured, or from the data directory's key file; undefined when there is none (nothing is generated). */
export function findSigningKey(configured: SigningKey | undefined, dataDir: string): SigningKey | undefined {
  if (configured) return configured
  try {
    return parseSigningKey(fs.readFileSync(signingKeyFile(dataDir), 'utf8'))
  } catch {
    return undefined
  }
}

/**
 * SQLite: this thread below the caller's, whose ledger pass is one thread doing its own reads: it then
 * runs on a core of its own, and these share what it leaves (they end about together, where the pass
 * ran alone at the end). Linux gives each thread its own priority; elsewhere it is the process's, or refused.
 */
function lowerThisThread(): void {
  try {
    setPriority(0, constants.priority.PRIORITY_BELOW_NORMAL)
  } catch {
    // Only the sharing of the cores is changed, never what is checked.
  }
}

/** What a thread does: the tree's check, or the chain's over the ranges it is handed. */
type Task = { part: 'tree'; key: SigningKey | undefined } | { part: 'chain' }

/** A range of positions (`after`, `upTo`] to check. */
type Range = [number, number]

/** What a thread tells its caller: the tree's last position, positions checked since it last told, or that it wants a range. */
type Told = { last?: number; checked?: number; wants?: true }

/** The chain's check of each range a thread was handed, by the range's first position. */
type ChainParts = { after: number; part: ChainPart }[]

/**
 * Runs a thread's task on its own connection and snapshot, telling `tell` the tree's last position
 * and the chain's progress; a chain's thread checks the ranges `next` hands it until it hands none.
 * @public (imported by the threads' code, `THREAD`)
 */
export async function runPart(
  options: DatabaseOptions,
  task: Task,
  tell: (message: Told) => void,
  next: () => Promise<Range | null>,
): Promise<TreePart | ChainParts> {
  const { openDatabase } = await import('../db/database.ts')
  if (!options.databaseUrl) lowerThisThread()
  const database = openDatabase(options)
  try {
    await forLongReads(database.db)
    // A chain's first range is known once the tree's snapshot has its last position: this snapshot,
    // begun after, holds every position up to it.
    const first = task.part === 'chain' ? await next() : null
    return await inReadOnlySnapshot<TreePart | ChainParts>(database.db, async (trx) => {
      if (task.part === 'tree') return checkTree(trx, task.key, CHUNK, (last) => tell({ last }))
      const parts: ChainParts = []
      for (let range = first; range; range = await next()) {
        let told = 0
        const part = await checkChain(trx, range[0], range[1], CHUNK, (done) => {
          tell({ checked: done - told })
          told = done
        })
        parts.push({ after: range[0], part })
      }
      return parts
    })
  } finally {
    await database.close()
  }
}

/** The thread's code: `runPart` of this module (through tsx when the sources are TypeScript), messages to the caller. */
const THREAD = `
const { parentPort, workerData } = require('node:worker_threads')
const waiting = []
parentPort.on('message', (message) => waiting.shift()?.(message.range))
const next = () => new Promise((resolve) => {
  waiting.push(resolve)
  parentPort.postMessage({ wants: true })
})
;(async () => {
  if (workerData.tsx) (await import(workerData.tsx)).register()
  const { runPart } = await import(workerData.journal)
  const result = await runPart(workerData.options, workerData.task, (message) => parentPort.postMessage(message), next)
  parentPort.postMessage({ result })
})().catch((error) =>
  parentPort.postMessage({ error: { message: String(error?.message ?? error), stack: error?.stack, code: error?.code } }),
)
`

/**
 * The ranges of the chain's check up to `last`, in order, each starting at a multiple of `GROUP` (it
 * holds the leaves of the lowest subtrees it checks): each a part of what is left, smaller towards
 * the end, so that `threads` threads taking the next as they finish one end about together; none
 * smaller than a read of `chunk` positions but the last. @public (tests)
 */
export function chainRanges(last: number, threads: number, chunk = CHUNK): Range[] {
  const ranges: Range[] = []
  for (let after = 0; after < last;) {
    const size = Math.max(Math.ceil(chunk / GROUP) * GROUP, Math.ceil((last - after) / (2 * threads) / GROUP) * GROUP)
    const upTo = last - after - size < chunk / 2 ? last : after + size
    ranges.push([after, upTo])
    after = upTo
  }
  return ranges
}

/** Threads that check the chain: one a core. */
const CHAIN_THREADS = Math.max(1, Math.min(4, availableParallelism()))

/**
 * `verifyJournal` on threads of their own, each with its own connection and snapshot: one checks the
 * tree of the stored hashes, the others the chain in ranges of positions (up to the last the tree's
 * thread sees), so the hashes take every core while the caller checks the ledger. The same report as `verifyJournal`.
 */
export async function verifyJournalInThread(
  options: DatabaseOptions,
  key: SigningKey | undefined,
  progress?: Progress,
): Promise<JournalReport> {
  const here = import.meta.url
  const source = path.extname(new URL(here).pathname)
  const base = {
    // One connection is all each uses.
    options: { databaseUrl: options.databaseUrl, dataDir: options.dataDir, poolSize: 1, postgresTimeouts: options.postgresTimeouts },
    journal: here,
    tsx: source === '.ts' ? import.meta.resolve('tsx/esm/api') : undefined,
  }
  const workers: Worker[] = []
  // The ranges the chain's threads have yet to take, in order: each takes the next when it has checked one.
  // Known once the tree's thread tells its last position; threads asking before that wait for it.
  let ranges: Range[] | undefined
  const asking: Worker[] = []
  const hand = (worker: Worker) => worker.postMessage({ range: ranges?.shift() ?? null })
  let last = 0
  const run = <T>(task: Task, heard: (message: Told) => void) =>
    new Promise<T>((resolve, reject) => {
      const worker = new Worker(THREAD, { eval: true, workerData: { ...base, task } })
      workers.push(worker)
      type Failure = { message: string; stack?: string; code?: string }
      worker.on('message', (message: Told & { result?: T; error?: Failure }) => {
        heard(message)
        if (message.wants) {
          if (ranges) hand(worker)
          else asking.push(worker)
        }
        const { result, error } = message
        if (result) resolve(result)
        // The thread's error as it was thrown, with its code (storage faults are told apart by it).
        if (error) reject(Object.assign(new Error(error.message), error))
        // It has closed its connection when it answers: whatever else keeps it alive is ended (settled
        // first, so its exit is no failure).
        if (result || error) void worker.terminate()
      })
      worker.once('error', reject)
      worker.once('exit', (code) => reject(new Error(`the journal's check ended (exit ${code}) without a report`)))
    })
  try {
    const tree = run<TreePart>({ part: 'tree', key }, (message) => {
      if (message.last === undefined) return
      last = message.last
      ranges = chainRanges(last, CHAIN_THREADS)
      for (const worker of asking.splice(0)) hand(worker)
    })
    // Started with the tree's thread, not after it: a thread's start (its modules loaded) takes a while.
    let done = 0
    const chain = Promise.all(
      Array.from({ length: CHAIN_THREADS }, () =>
        run<ChainParts>({ part: 'chain' }, ({ checked }) => {
          if (checked === undefined) return
          done += checked
          progress?.(done, last)
        }),
      ),
    )
    // Awaited once the tree is checked; a failure meanwhile is not left unhandled.
    chain.catch(() => {})
    const treePart = await tree
    // The ranges' parts in order, as one pass would find them.
    const parts = (await chain).flat().sort((a, b) => a.after - b.after)
    return reportOf(
      treePart,
      parts.map(({ part }) => part),
      key,
    )
  } finally {
    for (const worker of workers) void worker.terminate()
  }
}
