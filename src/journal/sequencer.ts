import type { Database } from '../db/database.ts'
import { inTransactionSyncedLater, nowIso } from '../db/dialect.ts'
import { chainHash } from './encoding.ts'
import * as journal from './journal.repository.ts'
import { appendLeaf, leafHash, rootOf, type Node } from './merkle.ts'
import { signCheckpoint, type SigningKey } from '../secrets/signing-key.ts'

/**
 * The one sequencer of the journal (`docs/journal.md`): in one database transaction it takes
 * committed transactions without a position, lowest id first, gives them the next positions,
 * chains their hashes, appends them to the Merkle tree (storing the subtrees they complete) and,
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
}

const DEFAULT_BATCH = 1_000
const DEFAULT_POLL_MS = 200
/** After a wake-up, a short wait so that the commits of a busy moment are positioned together. */
const WAKE_DELAY_MS = 20

/** One round: positions what waits (up to the batch) and signs a checkpoint when one is due. */
async function sequenceRound(options: SequencerOptions): Promise<RoundResult> {
  const { database, key, checkpointIntervalMs } = options
  const batch = options.batch ?? DEFAULT_BATCH
  // SQLite: positions follow the committed transactions in id order, so a round a crash undoes is
  // given again identically; it adds no sync of its own to the transfers' (PostgreSQL: synced).
  return inTransactionSyncedLater(database, async (trx) => {
    const state = await journal.readState(trx, true)
    if (!state) return { positioned: 0, checkpoint: undefined }
    const waiting = await journal.findUnpositioned(trx, state, batch)
    const positioned = await journal.findPositioned(trx, waiting)
    const ids = waiting.filter((id) => !positioned.has(id))
    const fields = await journal.loadEncoded(trx, ids)
    const entries: { position: number; transaction_id: number; hash: string }[] = []
    const nodes: Node[] = []
    for (const id of ids) {
      const transaction = fields.get(id)
      if (!transaction) continue
      const position = state.size + 1
      const hash = chainHash(state.head, position, transaction)
      entries.push({ position, transaction_id: id, hash })
      nodes.push(...appendLeaf(state.frontier, state.size, leafHash(Buffer.from(hash, 'hex'))))
      state.size = position
      state.head = hash
    }
    if (waiting.length > 0) state.lastTransactionId = Math.max(state.lastTransactionId, ...waiting)
    if (entries.length > 0) {
      await journal.insertEntries(trx, entries)
      await journal.insertNodes(trx, nodes)
      await journal.bumpPageGeneration(trx)
    }
    if (waiting.length > 0) {
      await journal.writeState(trx, state)
      await journal.removePending(trx, waiting)
    }
    let checkpoint: journal.Checkpoint | undefined
    const latest = await journal.findLatestCheckpoint(trx)
    const signedAt = nowIso()
    const due = !latest || Date.parse(signedAt) - Date.parse(latest.signed_at) >= checkpointIntervalMs
    if ((!latest || state.size > latest.size) && due) {
      const unsigned = { size: state.size, root: rootOf(state.frontier).toString('hex'), signed_at: signedAt }
      checkpoint = { ...unsigned, signature: signCheckpoint(key, unsigned) }
      await journal.insertCheckpoint(trx, checkpoint)
    }
    return { positioned: entries.length, checkpoint }
  })
}

/**
 * The sequencer as a long-lived part: rounds run one at a time, on `wake()` (a commit in this
 * process) and every `pollMs` (commits elsewhere, a checkpoint falling due); a full batch runs the
 * next round at once.
 */
export class JournalSequencer {
  readonly #options: SequencerOptions
  #timer: NodeJS.Timeout | undefined
  #running: Promise<void> | undefined
  #again = false
  #stopped = true

  constructor(options: SequencerOptions) {
    this.#options = options
  }

  start(): void {
    this.#stopped = false
    this.#schedule(0)
  }

  /** A transaction committed in this process: position it soon. */
  wake(): void {
    if (this.#stopped) return
    if (this.#running) {
      this.#again = true
      return
    }
    this.#schedule(WAKE_DELAY_MS)
  }

  async stop(): Promise<void> {
    this.#stopped = true
    clearTimeout(this.#timer)
    await this.#running
  }

  #schedule(ms: number): void {
    clearTimeout(this.#timer)
    this.#timer = setTimeout(() => void this.#run(), ms)
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
        const result = await sequenceRound(this.#options)
        full = result.positioned >= (this.#options.batch ?? DEFAULT_BATCH)
        if (full) this.#options.onProgress?.(result.positioned, (await journal.readState(this.#options.database.db, false))?.size ?? 0)
      } catch (error) {
        this.#options.onError?.(error)
      }
    })()
    await this.#running
    this.#running = undefined
    if (this.#stopped) return
    this.#schedule(full || this.#again ? 0 : (this.#options.pollMs ?? DEFAULT_POLL_MS))
  }

  async #workWaits(): Promise<boolean> {
    const { db } = this.#options.database
    if (await journal.hasUnpositioned(db)) return true
    const [state, latest] = await Promise.all([journal.readState(db, false), journal.findLatestCheckpoint(db)])
    if ((state?.size ?? 0) <= (latest?.size ?? 0)) return false
    return !latest || Date.now() - Date.parse(latest.signed_at) >= this.#options.checkpointIntervalMs
  }
}
