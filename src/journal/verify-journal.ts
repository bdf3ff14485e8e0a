import fs from 'node:fs'
import path from 'node:path'
import { Worker } from 'node:worker_threads'
import { sql } from 'kysely'
import type { DatabaseOptions, Db, Executor } from '../db/database.ts'
import { inReadOnlySnapshot } from '../db/retry.ts'
import { readArrays } from '../db/sqlite-statements.ts'
import { chainHashBytes, GENESIS_HASH, type EncodedTransaction } from './encoding.ts'
import * as journal from './journal.repository.ts'
import { appendLeaf, EMPTY_ROOT, isStored, leafHash, rootOf, STORED_LEVEL, type Frontier, type Node } from './merkle.ts'
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
const [POSITION, TRANSACTION_ID, HASH, ID, KIND, CREATED_AT, SENDING, RECEIVING, MEMO, REVERSES, HOLD_ID, METADATA, ASSET_ID, QUANTITY] = [
  0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13,
]

/**
 * Entries with positions in (`after`, `upTo`], in order, each with its transaction's encoded fields
 * and its lines (one row per line): one read through the keys of the three tables.
 */
function readEntries(db: Executor, after: number, upTo: number): Promise<unknown[][]> {
  return readArrays(
    db,
    sql`select j.position, j.transaction_id, j.hash, t.id, t.kind, t.created_at, t.sending_wallet_id, t.receiving_wallet_id,
      t.memo, t.reverses, t.hold_id, t.metadata, l.asset_id, l.quantity
    from journal_entries j left join transactions t on t.id = j.transaction_id
      left join transaction_assets l on l.transaction_id = t.id
    where j.position > ${after} and j.position <= ${upTo}
    order by j.position`,
  )
}

/** A subtree's key: level and index in one number (levels stay below 53 - 40, indexes below 2^40). */
const nodeKey = (level: number, idx: number) => level * 2 ** 40 + idx

/**
 * The stored complete subtrees (level ≥ `STORED_LEVEL`) that the leaves after the first `after` up to the first
 * `upTo` complete: one range of indexes per level, through the key.
 */
async function readCompletedNodes(db: Executor, after: number, upTo: number): Promise<Map<number, string>> {
  const found = new Map<number, string>()
  for (let level = STORED_LEVEL; 2 ** level <= upTo; level++) {
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

async function countRows(db: Executor, table: 'transactions' | 'journal_nodes'): Promise<number> {
  const { rows } = await sql<{ count: number }>`select count(*) as count from ${sql.table(table)}`.execute(db)
  return Number(rows[0].count)
}

/**
 * The journal recomputed from the transactions (`coffer verify`): every hash from its
 * transaction's stored fields and the hash before it, the Merkle root of every checkpoint from
 * those hashes, every stored subtree (`journal_nodes`, which proofs are read from) and every
 * checkpoint's signature with the public key. A row changed in the database after it was
 * positioned shows as the first position whose hash no longer matches. Read in one read-only
 * snapshot, so the sequencer positioning meanwhile is wholly in or out.
 */
export async function verifyJournal(
  db: Executor,
  key: SigningKey | undefined,
  progress?: (done: number, total: number) => void,
  chunk = CHUNK,
): Promise<JournalReport> {
  if (!db.isTransaction) {
    return inReadOnlySnapshot(db as Db, (trx) => verifyJournal(trx, key, progress, chunk))
  }
  const problems: string[] = []
  const name = (problem: string) => {
    if (problems.length < NAMED) problems.push(problem)
  }
  const checkpoints = await journal.listCheckpoints(db)
  const state = await journal.readState(db, false)
  const total = state?.size ?? 0
  const { rows: bounds } = await sql<{ last: number | null }>`select max(position) as last from journal_entries`.execute(db)
  const last = Number(bounds[0]?.last ?? 0)
  let firstMismatch: number | undefined
  let previous: Buffer = Buffer.from(GENESIS_HASH, 'hex')
  let previousHex = GENESIS_HASH
  let size = 0
  const frontier: Frontier = []
  let next = 0
  let nodes = 0
  // Entries whose transaction exists: each names a distinct one (a unique key), so the others have no position.
  let positioned = 0
  const checkAt = (checkpoint: journal.Checkpoint) => {
    const root = (checkpoint.size === 0 ? EMPTY_ROOT : rootOf(frontier)).toString('hex')
    if (root !== checkpoint.root)
      name(`checkpoint of size ${checkpoint.size}: its root is not the tree of the first ${checkpoint.size} hashes`)
    if (key && !verifyCheckpointSignature(key.publicKey, checkpoint))
      name(`checkpoint of size ${checkpoint.size}: its signature does not verify with the signing key`)
  }
  while (next < checkpoints.length && checkpoints[next].size === 0) checkAt(checkpoints[next++])
  for (let after = 0; after < last; after += chunk) {
    const rows = await readEntries(db, after, after + chunk)
    const from = size
    const completed: Node[] = []
    for (let i = 0; i < rows.length;) {
      const entry = rows[i]
      const position = Number(entry[POSITION])
      const hash = entry[HASH] as string
      let fields: EncodedTransaction | undefined
      if (entry[ID] !== null) {
        positioned++
        const metadata = entry[METADATA] as string | null
        fields = {
          id: Number(entry[ID]),
          kind: entry[KIND] as string,
          created_at: entry[CREATED_AT] as string,
          sending_wallet_id: Number(entry[SENDING]),
          receiving_wallet_id: Number(entry[RECEIVING]),
          memo: entry[MEMO] as string,
          assets: [],
          reverses: entry[REVERSES] === null ? null : Number(entry[REVERSES]),
          hold_id: entry[HOLD_ID] === null ? null : Number(entry[HOLD_ID]),
          metadata: metadata ? (JSON.parse(metadata) as Record<string, string>) : {},
        }
      }
      for (; i < rows.length && Number(rows[i][POSITION]) === position; i++)
        if (fields && rows[i][ASSET_ID] !== null) fields.assets.push([Number(rows[i][ASSET_ID]), Number(rows[i][QUANTITY])])
      if (position !== size + 1) {
        name(`position ${size + 1} is missing (the next entry is ${position})`)
        firstMismatch ??= size + 1
      }
      const expected = fields ? chainHashBytes(previous, position, fields) : undefined
      const expectedHex = expected?.toString('hex')
      if (expectedHex !== hash) {
        firstMismatch ??= position
        name(
          fields
            ? `position ${position} (transaction ${entry[TRANSACTION_ID]}): the transaction no longer gives its hash`
            : `position ${position}: transaction ${entry[TRANSACTION_ID]} is missing`,
        )
      }
      previous = expected ?? Buffer.from(hash, 'hex')
      previousHex = expectedHex ?? hash
      for (const node of appendLeaf(frontier, position - 1, leafHash(previous))) if (isStored(node)) completed.push(node)
      size = position
      while (next < checkpoints.length && checkpoints[next].size === size) checkAt(checkpoints[next++])
    }
    // The stored subtrees that proofs are read from must be the tree of these hashes.
    const stored = await readCompletedNodes(db, from, size)
    for (const node of completed) {
      const hex = stored.get(nodeKey(node.level, node.idx))
      if (hex === undefined || hex !== node.hash.toString('hex')) {
        const leaves = `positions ${node.idx * 2 ** node.level + 1} to ${(node.idx + 1) * 2 ** node.level}`
        name(
          hex === undefined
            ? `the stored subtree over ${leaves} is missing`
            : `the stored subtree over ${leaves} is not the tree of their hashes: proofs through it do not check out`,
        )
      }
    }
    nodes += completed.length
    progress?.(size, total)
  }
  if (state && state.size !== size) problems.push(`the journal's state says ${state.size} entries, ${size} were read`)
  else if (state && (state.head !== previousHex || rootOf(state.frontier).toString('hex') !== rootOf(frontier).toString('hex')))
    problems.push(`the journal's state (the last hash and the tree's frontier) is not that of its ${size} entries`)
  const storedNodes = await countRows(db, 'journal_nodes')
  if (storedNodes !== nodes) problems.push(`${storedNodes} subtrees are stored, the tree of ${size} entries has ${nodes}`)
  for (const checkpoint of checkpoints.slice(next))
    problems.push(`checkpoint of size ${checkpoint.size}: beyond the journal's ${size} entries`)
  return {
    ok: problems.length === 0,
    entries: size,
    checkpoints: checkpoints.length,
    signaturesChecked: key !== undefined,
    unpositioned: (await countRows(db, 'transactions')) - positioned,
    firstMismatch,
    problems,
  }
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
 * The thread's code: opens its own connection (`openDatabase` of the options), runs `verifyJournal`
 * and sends back progress and the report. The sources run through tsx when they are TypeScript.
 */
const THREAD = `
const { parentPort, workerData } = require('node:worker_threads')
;(async () => {
  if (workerData.tsx) (await import(workerData.tsx)).register()
  const { openDatabase } = await import(workerData.database)
  const { verifyJournal } = await import(workerData.journal)
  const database = openDatabase(workerData.options)
  let report
  try {
    report = await verifyJournal(database.db, workerData.key, (done, total) => parentPort.postMessage({ progress: [done, total] }))
  } finally {
    await database.close()
  }
  parentPort.postMessage({ report })
})().catch((error) =>
  parentPort.postMessage({ error: { message: String(error?.message ?? error), stack: error?.stack, code: error?.code } }),
)
`

/**
 * `verifyJournal` on a thread of its own, with its own connection and snapshot: the journal's hashes
 * take a core while the caller checks the ledger on another. The same report as `verifyJournal`.
 */
export function verifyJournalInThread(
  options: DatabaseOptions,
  key: SigningKey | undefined,
  progress?: (done: number, total: number) => void,
): Promise<JournalReport> {
  const here = import.meta.url
  const source = path.extname(new URL(here).pathname)
  const workerData = {
    // One connection is all it uses.
    options: { databaseUrl: options.databaseUrl, dataDir: options.dataDir, poolSize: 1, postgresTimeouts: options.postgresTimeouts },
    key,
    journal: here,
    database: new URL(`../db/database${source}`, here).href,
    tsx: source === '.ts' ? import.meta.resolve('tsx/esm/api') : undefined,
  }
  const worker = new Worker(THREAD, { eval: true, workerData })
  return new Promise<JournalReport>((resolve, reject) => {
    type Failure = { message: string; stack?: string; code?: string }
    worker.on('message', (message: { progress?: [number, number]; report?: JournalReport; error?: Failure }) => {
      if (message.progress) progress?.(...message.progress)
      const { report, error } = message
      if (report) resolve(report)
      // The thread's error as it was thrown, with its code (storage faults are told apart by it).
      if (error) reject(Object.assign(new Error(error.message), error))
      // It has closed its connection when it answers: whatever else keeps it alive is ended (settled
      // first, so its exit is no failure).
      if (report || error) void worker.terminate()
    })
    worker.once('error', reject)
    worker.once('exit', (code) => reject(new Error(`the journal's check ended (exit ${code}) without a report`)))
  })
}
