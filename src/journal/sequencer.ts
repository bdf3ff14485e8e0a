import type { Database } from '../db/database.ts'
import { inTransactionSyncedLater, nowIso } from '../db/dialect.ts'
import type { Transaction } from '../ledger/ledger.types.ts'
import { chainHashBytes, type EncodedTransaction } from './encoding.ts'
import * as journal from './journal.repository.ts'
import { appendLeaf, isStored, leafHash, rootOf, type Node } from './merkle.ts'
import { signCheckpoint, type SigningKey } from '../secrets/signing-key.ts'

/**
 * The one sequencer of the journal (`docs/journal.md`): in one database transaction it takes
 * committed transactions without a position, lowest id first, gives them the next positions,
 * chains their hashes, appends them to the Merkle tree (storing the subtrees of 16 leaves or more they complete) and,
 * when the latest checkpoint is `checkpointIntervalMs` old and the journal grew, signs a new one.
 * One instance at a time holds the state row (PostgreSQL `for update skip locked`; SQLite has one
 * writer), so positions are consecutive and readers, who read positioned rows only, never see
 * one appear behind another.
 */
export interface SequencerOptions {
  database: Database
  key: SigningKey
  checkpointIntervalMs: number
  /** Most transactions positioned per database transaction. */
  batch?: number
  /** How often to look for transactions committed elsewhere (another instance, the CLI). */
  pollMs?: number
  /** Told of progress while a long history is positioned (the upgrade of an existing ledger). */
  onProgress?: (positioned: number, size: number) => void
  /** Told of a failed round (it is tried again on the next poll). */
  onError?: (error: unknown) => void
}

export interface RoundResult {
  positioned: number
  checkpoint: journal.Checkpoint | undefined
  /** The highest id the round took (0: none; infinite: another instance held the state). */
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
/** Most transactions kept in memory for the rounds (`committed`); past it they are read from the database. */
const MAX_HANDED = 100_000

/** What a sequencer knows of the latest checkpoint between rounds: when it was signed (ms). */
interface Known {
  signedAt?: number
}

/** One round: positions what waits (up to the batch) and signs a checkpoint when one is due. */
async function sequenceRound(options: SequencerOptions, known: Known, handed: Map<number, EncodedTransaction>): Promise<RoundResult> {
  const { database, key, checkpointIntervalMs } = options
  const batch = options.batch ?? DEFAULT_BATCH
  // SQLite: positions follow the committed transactions in id order, so a round a crash undoes is
  // given again identically; it adds no sync of its own to the transfers' (PostgreSQL: synced).
  const result = await inTransactionSyncedLater(database, async (trx) => {
    const state = await journal.readState(trx, true)
    // Another instance holds the state: it positions what waits, what this process committed included.
    if (!state) return { positioned: 0, checkpoint: undefined, read: Number.POSITIVE_INFINITY }
    const waiting = await journal.takeWaiting(trx, state, batch, handed)
    const entries: [position: number, transactionId: number, hash: string][] = []
    const nodes: Node[] = []
    let head: Buffer = Buffer.from(state.head, 'hex')
    for (const { id, fields } of waiting) {
      if (!fields) continue
      const position = state.size + 1
      head = chainHashBytes(head, position, fields)
      state.head = head.toString('hex')
      entries.push([position, id, state.head])
      for (const node of appendLeaf(state.frontier, state.size, leafHash(head))) if (isStored(node)) nodes.push(node)
      state.size = position
    }
    if (waiting.length > 0) {
      const taken = waiting.map((transaction) => transaction.id)
      state.lastTransactionId = Math.max(state.lastTransactionId, ...taken)
      await journal.recordRound(trx, { entries, nodes, state, taken })
    }
    const read = waiting.at(-1)?.id ?? 0
    const signedAt = nowIso()
    // A checkpoint known to be recent means none is due: the latest can only be more recent.
    if (known.signedAt !== undefined && Date.parse(signedAt) - known.signedAt < checkpointIntervalMs)
      return { positioned: entries.length, checkpoint: undefined, read }
    let checkpoint: journal.Checkpoint | undefined
    const latest = await journal.findLatestCheckpoint(trx)
    if (latest) known.signedAt = Date.parse(latest.signed_at)
    const due = !latest || Date.parse(signedAt) - Date.parse(latest.signed_at) >= checkpointIntervalMs
    if ((!latest || state.size > latest.size) && due) {
      const unsigned = { size: state.size, root: rootOf(state.frontier).toString('hex'), signed_at: signedAt }
      checkpoint = { ...unsigned, signature: signCheckpoint(key, unsigned) }
      await journal.insertCheckpoint(trx, checkpoint)
    }
    return { positioned: entries.length, checkpoint, read }
  })
  if (result.checkpoint) known.signedAt = Date.parse(result.checkpoint.signed_at)
  // Every id up to the highest taken has a position now (both ways go lowest id first); one that committed
  // on PostgreSQL during the round below it is dropped too, and read from the database in its round.
  for (const id of handed.keys()) if (id <= result.read) handed.delete(id)
  return result
}

/**
 * The sequencer as a long-lived part: rounds run one at a time, on `committed()` (a commit in this
 * process) and every `pollMs` (commits elsewhere, a checkpoint falling due); a full batch runs the
 * next round at once, commits during a round another wake delay after it.
 */
export class JournalSequencer {
  readonly #options: SequencerOptions
  readonly #known: Known = {}
  /** What this process committed and no round has taken yet, by id: a round takes their fields from here instead of reading them. */
  readonly #handed = new Map<number, EncodedTransaction>()
  #timer: NodeJS.Timeout | undefined
  #timerAt = 0
  #running: Promise<void> | undefined
  #again = false
  #stopped = true
  #busy = false

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
      this.#handed.set(transaction.id, encodedOf(transaction))
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
        // Idle polls stay reads: a write transaction only when something waits or a checkpoint is due.
        if (!this.#again && !(await this.#workWaits())) return
        this.#again = false
        const result = await sequenceRound(this.#options, this.#known, this.#handed)
        full = result.positioned >= (this.#options.batch ?? DEFAULT_BATCH)
        this.#busy = result.positioned >= BUSY_ROUND
        if (full) this.#options.onProgress?.(result.positioned, (await journal.readState(this.#options.database.db, false))?.size ?? 0)
      } catch (error) {
        this.#options.onError?.(error)
      }
    })()
    await this.#running
    this.#running = undefined
    if (this.#stopped) return
    this.#schedule(full ? 0 : this.#again ? this.#wakeDelay() : (this.#options.pollMs ?? DEFAULT_POLL_MS))
  }

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
