import type { Database } from '../db/database.ts'
import { inTransactionSyncedLater, nowIso } from '../db/dialect.ts'
import type { Transaction } from '../ledger/ledger.types.ts'
import { chainHashOfTail, encodedTail, type EncodedTransaction } from './encoding.ts'
import * as journal from './journal.repository.ts'
import { appendLatin1Leaf, isStored, rootOf, type Node } from './merkle.ts'
import { signCheckpoint, type SigningKey } from '../secrets/signing-key.ts'

/**
 * The one sequencer of the journal (`docs/journal.md`): a round takes committed transactions
 * without a position (lowest id first; on PostgreSQL by writer, then id), gives them the next positions, chains their hashes, appends
 * them to the Merkle tree (storing the subtrees of 16 leaves or more they complete) and, when the
 * latest checkpoint is `checkpointIntervalMs` old and the journal grew, signs a new one, all in one
 * commit. Rounds follow one another (SQLite: one writer; PostgreSQL: a round writes only to the
 * state it read, `recordRoundAt`), so positions are consecutive and readers, who read positioned
 * rows only, never see one appear behind another.
 */
export interface SequencerOptions {
  database: Database
  key: SigningKey
  checkpointIntervalMs: number
  /** Most transactions positioned per database transaction. */
  batch?: number
  /** How often to look for transactions committed elsewhere (another instance, the CLI). */
  pollMs?: number
  /**
   * Told of progress while a backlog lasts (full rounds in a row: the upgrade of an existing ledger,
   * commits that waited out an outage), at most every `progressEveryMs` (5 s): a round that comes
   * full once under load is no backlog.
   */
  onProgress?: (positioned: number, size: number) => void
  progressEveryMs?: number
  /** Told of a failed round (it is tried again on the next poll). */
  onError?: (error: unknown) => void
}

export interface RoundResult {
  positioned: number
  checkpoint: journal.Checkpoint | undefined
  /** The highest id the round took (0: none; infinite: another instance's round came first). */
  read: number
}

const DEFAULT_BATCH = 1_000
const DEFAULT_POLL_MS = 200
/** After a wake-up, a short wait so that the commits of a busy moment are positioned together. */
const WAKE_DELAY_MS = 50
/**
 * Under load (the last round positioned `BUSY_ROUND` or more), a longer one: a round's fixed cost
 * (its transaction, the state, the pages its commit writes) is shared by more transactions, and a
 * position still comes well within the second it may take.
 */
const BUSY_WAKE_DELAY_MS = 250
const BUSY_ROUND = 25
const PROGRESS_EVERY_MS = 5_000
/** Most transactions kept in memory for the rounds (`committed`); past it they are read from the database. */
const MAX_HANDED = 100_000

/** What a sequencer knows between rounds: when the latest checkpoint was signed (ms, SQLite), the watermark (PostgreSQL). */
interface Known {
  signedAt?: number
  watermark?: journal.Watermark
}

/** One round: positions what waits (up to the batch) and signs a checkpoint when one is due. */
async function sequenceRound(options: SequencerOptions, known: Known, handed: Map<number, Buffer>): Promise<RoundResult> {
  const result =
    options.database.dialect === 'postgres' ? await postgresRound(options, known, handed) : await sqliteRound(options, known, handed)
  if (result.checkpoint) known.signedAt = Date.parse(result.checkpoint.signed_at)
  // Ids up to the highest taken have a position now, or (PostgreSQL: committed during the round, or by a
  // writer ordered after) are read from the database in their round: memory is only ever a shortcut.
  for (const id of handed.keys()) if (id <= result.read) handed.delete(id)
  return result
}

/** The entries, stored subtrees and new state of positioning `waiting` after `state` (changed in place). */
function position(state: journal.JournalState, waiting: journal.Waiting[]) {
  const entries: [position: number, transactionId: number, hash: string][] = []
  const nodes: Node[] = []
  // Hashes as strings (hex, latin1) while positioning: Node makes a digest's Buffer far more slowly.
  const frontier = state.frontier.map(({ level, idx, hash }) => ({ level, idx, hash: hash.toString('latin1') }))
  let head = state.head
  for (const { id, tail } of waiting) {
    if (!tail) continue
    const position = state.size + 1
    head = chainHashOfTail(head, position, tail)
    entries.push([position, id, head])
    for (const node of appendLatin1Leaf(frontier, state.size, head))
      if (isStored(node)) nodes.push({ ...node, hash: Buffer.from(node.hash, 'latin1') })
    state.size = position
  }
  state.head = head
  state.frontier = frontier.map(({ level, idx, hash }) => ({ level, idx, hash: Buffer.from(hash, 'latin1') }))
  const taken = waiting.map((transaction) => transaction.id)
  if (taken.length > 0) state.lastTransactionId = Math.max(state.lastTransactionId, ...taken)
  return { entries, nodes, taken }
}

/** A checkpoint of `state` signed now, when the latest is `checkpointIntervalMs` old (or none) and the journal grew since. */
function checkpointDue(options: SequencerOptions, state: journal.JournalState, latest: journal.Checkpoint | undefined) {
  const signedAt = nowIso()
  const due = !latest || Date.parse(signedAt) - Date.parse(latest.signed_at) >= options.checkpointIntervalMs
  if (!due || (latest && state.size <= latest.size)) return undefined
  const unsigned = { size: state.size, root: rootOf(state.frontier).toString('hex'), signed_at: signedAt }
  return { ...unsigned, signature: signCheckpoint(options.key, unsigned) }
}

/**
 * PostgreSQL: a round without a transaction of its own, two statements (`readRound`, then
 * `recordRoundAt` when there is something to write), each a round trip: a round under load, and an
 * idle poll (one read), cost a fraction of a locked transaction's five. The write applies only to
 * the state the round read, so of two instances' rounds from one state one writes; the other
 * writes nothing and leaves what it read to the next round. A round with nothing to position
 * writes the watermark alone when positioned rows lie behind it, so idle polls stop reading them.
 */
async function postgresRound(options: SequencerOptions, known: Known, handed: Map<number, Buffer>): Promise<RoundResult> {
  const { db } = options.database
  known.watermark ??= await journal.readWatermark(db)
  const start = await journal.readRound(db, options.batch ?? DEFAULT_BATCH, handed, known.watermark)
  if (!start) return { positioned: 0, checkpoint: undefined, read: 0 }
  const { state, version, waiting, latest, watermark, stored, stale } = start
  known.watermark = stored
  const { entries, nodes, taken } = position(state, waiting)
  const checkpoint = checkpointDue(options, state, latest)
  if (taken.length === 0 && !checkpoint && !stale) return { positioned: 0, checkpoint: undefined, read: 0 }
  if (!(await journal.recordRoundAt(db, version, { entries, nodes, state, watermark, checkpoint })))
    return { positioned: 0, checkpoint: undefined, read: Number.POSITIVE_INFINITY }
  known.watermark = watermark
  return { positioned: entries.length, checkpoint, read: taken.length > 0 ? Math.max(...taken) : 0 }
}

/** SQLite: a round in one transaction (one writer: no other round can come between its read and its write). */
async function sqliteRound(options: SequencerOptions, known: Known, handed: Map<number, Buffer>): Promise<RoundResult> {
  const { database, checkpointIntervalMs } = options
  // Positions follow the committed transactions in id order, so a round a crash undoes is given
  // again identically; it adds no sync of its own to the transfers'.
  return inTransactionSyncedLater(database, async (trx) => {
    const state = await journal.readState(trx, true)
    if (!state) return { positioned: 0, checkpoint: undefined, read: 0 }
    const waiting = await journal.takeWaiting(trx, state, options.batch ?? DEFAULT_BATCH, handed)
    const { entries, nodes, taken } = position(state, waiting)
    if (taken.length > 0) await journal.recordRound(trx, { entries, nodes, state })
    const read = waiting.at(-1)?.id ?? 0
    // A checkpoint known to be recent means none is due: the latest can only be more recent.
    if (known.signedAt !== undefined && Date.now() - known.signedAt < checkpointIntervalMs)
      return { positioned: entries.length, checkpoint: undefined, read }
    const latest = await journal.findLatestCheckpoint(trx)
    if (latest) known.signedAt = Date.parse(latest.signed_at)
    const checkpoint = checkpointDue(options, state, latest)
    if (checkpoint) await journal.insertCheckpoint(trx, checkpoint)
    return { positioned: entries.length, checkpoint, read }
  })
}

/**
 * The sequencer as a long-lived part: rounds run one at a time, on `committed()` (a commit in this
 * process) and every `pollMs` (commits elsewhere, a checkpoint falling due); a full batch runs the
 * next round at once, commits during a round another wake delay after it.
 */
export class JournalSequencer {
  readonly #options: SequencerOptions
  readonly #known: Known = {}
  /** What this process committed and no round has taken yet, by id: a round takes their encoding from here instead of reading them. */
  readonly #handed = new Map<number, Buffer>()
  #timer: NodeJS.Timeout | undefined
  #timerAt = 0
  #running: Promise<void> | undefined
  #again = false
  #stopped = true
  #busy = false
  /** Full rounds in a row, and when progress was last told (`onProgress`). */
  #fullRounds = 0
  #toldAt = Number.NEGATIVE_INFINITY

  constructor(options: SequencerOptions) {
    this.#options = options
  }

  start(): void {
    this.#stopped = false
    this.#schedule(0)
  }

  /** Transactions this process committed: position them soon, from these fields. */
  committed(transactions: readonly Transaction[]): void {
    if (this.#stopped) return
    for (const transaction of transactions) {
      if (this.#handed.size >= MAX_HANDED) break
      this.#handed.set(transaction.id, encodedTail(encodedOf(transaction)))
    }
    this.#wake()
  }

  #wake(): void {
    if (this.#stopped) return
    this.#again = true
    if (!this.#running) this.#schedule(this.#wakeDelay())
  }

  #wakeDelay(): number {
    return this.#busy ? BUSY_WAKE_DELAY_MS : WAKE_DELAY_MS
  }

  async stop(): Promise<void> {
    this.#stopped = true
    clearTimeout(this.#timer)
    this.#timer = undefined
    await this.#running
  }

  /** Runs a round in `ms`, unless one is due sooner already (commits in a row do not put it off). */
  #schedule(ms: number): void {
    const at = Date.now() + ms
    if (this.#timer !== undefined && this.#timerAt <= at) return
    clearTimeout(this.#timer)
    this.#timerAt = at
    this.#timer = setTimeout(() => {
      this.#timer = undefined
      void this.#run()
    }, ms)
    this.#timer.unref()
  }

  async #run(): Promise<void> {
    if (this.#stopped || this.#running) return
    let full = false
    this.#running = (async () => {
      try {
        // Idle polls stay reads: a write only when something waits or a checkpoint is due (on PostgreSQL
        // the round's own first statement is that read).
        if (!this.#again && this.#options.database.dialect !== 'postgres' && !(await this.#workWaits())) return
        this.#again = false
        const result = await sequenceRound(this.#options, this.#known, this.#handed)
        full = result.positioned >= (this.#options.batch ?? DEFAULT_BATCH)
        this.#busy = result.positioned >= BUSY_ROUND
        this.#fullRounds = full ? this.#fullRounds + 1 : 0
        if (this.#fullRounds >= 2 && Date.now() - this.#toldAt >= (this.#options.progressEveryMs ?? PROGRESS_EVERY_MS)) {
          this.#toldAt = Date.now()
          this.#options.onProgress?.(result.positioned, (await journal.readState(this.#options.database.db, false))?.size ?? 0)
        }
      } catch (error) {
        this.#options.onError?.(error)
      }
    })()
    await this.#running
    this.#running = undefined
    if (this.#stopped) return
    this.#schedule(full ? 0 : this.#again ? this.#wakeDelay() : (this.#options.pollMs ?? DEFAULT_POLL_MS))
  }

  /** SQLite: whether a round has work. */
  async #workWaits(): Promise<boolean> {
    const { db } = this.#options.database
    if (await journal.hasUnpositioned(db)) return true
    const [state, latest] = await Promise.all([journal.readState(db, false), journal.findLatestCheckpoint(db)])
    if ((state?.size ?? 0) <= (latest?.size ?? 0)) return false
    return !latest || Date.now() - Date.parse(latest.signed_at) >= this.#options.checkpointIntervalMs
  }
}

/** The fields the encoding takes, as the ledger stored them: a committed Transaction's own (`ledger/moves.repository.ts`). */
function encodedOf(transaction: Transaction): EncodedTransaction {
  return {
    id: transaction.id,
    kind: transaction.kind,
    created_at: transaction.created_at,
    sending_wallet_id: transaction.sending_wallet_id,
    receiving_wallet_id: transaction.receiving_wallet_id,
    memo: transaction.memo,
    assets: transaction.assets.map((line) => [line.asset.id, line.quantity]),
    reverses: transaction.reverses ?? null,
    hold_id: transaction.hold_id ?? null,
    metadata: transaction.metadata,
  }
}
