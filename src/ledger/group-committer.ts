import type { Context } from '@opentelemetry/api'
import type { Db, Trx } from '../db/database.ts'
import { commitOutcomeUnknown, isStorageUnavailable } from '../db/faults.ts'
import { isRetryable, withRetries } from '../db/retry.ts'
import type { BatchTracing } from '../telemetry/tracing.ts'
import { IdempotencyConflict, type EventWriter, type Transaction } from './ledger.types.ts'
import { applyUnits, transactionOf, type Move, type Outcome, type Unit } from './moves.ts'

/**
 * Group commit: transfers arriving while a commit is in flight are applied together in one
 * transaction, one batch at a time in arrival order, and answered after its one durable commit
 * (`docs/performance.md#the-write-path`).
 *
 * - Each member (a transfer, or an atomic unit of several) succeeds or fails alone.
 * - A failed COMMIT fails every member as a storage fault (S001): its outcome is unknown, so it is
 *   never run again; only a deadlock or serialization failure reruns the batch.
 * - Any other error before the commit reruns each member alone, so only its cause fails; a storage
 *   fault fails the batch at once. A key stored meanwhile by another instance fails its member only.
 * - PostgreSQL: the next batch's BEGIN is sent while the current one runs.
 */

/** A unit (`moves.ts`) waiting for its batch: a transfer, or the transfers of a batch request. */
interface Member {
  unit: Unit
  resolve: (outcomes: Outcome[]) => void
  reject: (error: unknown) => void
  /** The trace context it was queued in, when traces are on. */
  context?: Context
}

export interface GroupCommitOptions {
  /** Most transfers in one database transaction (a unit larger than this runs alone, never split). */
  maxBatch: number
  /** Begin the next batch's transaction while this batch runs (PostgreSQL; SQLite has one connection). */
  beginEarly: boolean
  /** Told each batch's size as it starts (metrics). */
  onBatch?: (size: number) => void
  /** Told the transactions of each batch once it committed. */
  onCommit?: (transactions: Transaction[]) => void
  /** Runs each batch in a span of the traces, when they are on. */
  tracing?: BatchTracing
  /** The ledger's clock (`ledger.service.ts`). */
  clock?: () => string
  /** Runs a batch after this turn's I/O (`setImmediate` unless given; `http/arrivals.ts`). */
  afterIo?: (work: () => void) => void
}

export class GroupCommitter {
  readonly #db: Db
  readonly #events: EventWriter
  /** Most transfers in one database transaction. */
  readonly #maxBatch: number
  /** PostgreSQL: begin the next batch's transaction while this batch runs. */
  readonly #beginEarly: boolean
  readonly #onBatch: ((size: number) => void) | undefined
  readonly #onCommit: ((transactions: Transaction[]) => void) | undefined
  readonly #tracing: BatchTracing | undefined
  readonly #clock: (() => string) | undefined
  readonly #afterIo: (work: () => void) => void
  #queue: Member[] = []
  #busy = false
  /** A batch has been taken from the queue and is running: members queued now wait for the next. */
  #running = false
  /** The next batch's transaction, begun while this batch runs (its BEGIN off the critical path). */
  #early: Early | undefined

  /** Settles once the queue is empty and no batch runs (`close`). */
  #idle: (() => void)[] = []

  constructor(db: Db, events: EventWriter, options: GroupCommitOptions) {
    this.#db = db
    this.#events = events
    this.#maxBatch = options.maxBatch
    this.#beginEarly = options.beginEarly
    this.#onBatch = options.onBatch
    this.#onCommit = options.onCommit
    this.#tracing = options.tracing
    this.#clock = options.clock
    this.#afterIo = options.afterIo ?? setImmediate
  }

  /** Applies `move` as one member of the next batch; settles after that batch's commit. */
  async run(move: Move): Promise<Transaction> {
    const [outcome] = await this.runUnit({ moves: [move], atomic: true })
    if (!outcome.ok) throw outcome.error
    return transactionOf(outcome)
  }

  /** Applies the unit as one member of the next batch; resolves after its commit with one outcome per move. */
  runUnit(unit: Unit): Promise<Outcome[]> {
    return new Promise<Outcome[]>((resolve, reject) => {
      this.#queue.push({ unit, resolve, reject, context: this.#tracing?.capture() })
      // This member will be in the next batch, which therefore exists and takes the transaction.
      if (this.#running && this.#beginEarly && !this.#early) this.#early = beginEarly(this.#db)
      this.#schedule()
    })
  }

  /** Runs `work` in the transaction begun early, if there is one, or else in a new one. */
  #transact(work: Work): Promise<Outcome[][]> {
    const early = this.#early
    this.#early = undefined
    return early ? early(work) : this.#db.transaction().execute(work)
  }

  /** Resolves once every transfer handed in so far has settled (the app is closing). */
  close(): Promise<void> {
    if (!this.#busy && this.#queue.length === 0) return Promise.resolve()
    return new Promise((resolve) => this.#idle.push(resolve))
  }

  #schedule(): void {
    if (!this.#busy && this.#queue.length === 0) for (const resolve of this.#idle.splice(0)) resolve()
    if (this.#busy || this.#queue.length === 0) return
    this.#busy = true
    // After this turn's I/O, so every request that arrived together joins the batch.
    this.#afterIo(() => {
      const batch = this.#queue.splice(0, this.#takeCount())
      const size = batch.reduce((count, member) => count + member.unit.moves.length, 0)
      this.#onBatch?.(size)
      this.#running = true
      const tracing = this.#tracing
      const committed = tracing
        ? tracing.run(
            batch.map((member) => member.context as Context),
            size,
            () => this.#commit(batch),
          )
        : this.#commit(batch)
      void committed.finally(() => {
        this.#running = false
        this.#busy = false
        this.#schedule()
      })
    })
  }

  /** How many members the next batch takes: up to maxBatch moves, and always at least one member. */
  #takeCount(): number {
    let moves = 0
    let count = 0
    for (const member of this.#queue) {
      moves += member.unit.moves.length
      if (count > 0 && moves > this.#maxBatch) break
      count++
    }
    return count
  }

  async #commit(batch: Member[]): Promise<void> {
    let members = batch
    try {
      while (members.length > 0) {
        const units = members.map((member) => member.unit)
        // Set once every statement has run: an error after it comes from the COMMIT.
        let applied = false
        try {
          const outcomes = await withRetries(() => {
            applied = false
            return this.#transact(async (trx) => {
              const result = await applyUnits(trx, units, this.#events, this.#clock)
              applied = true
              return result
            })
          })
          settle(members, outcomes)
          if (this.#onCommit) this.#onCommit(recorded(outcomes))
          return
        } catch (error) {
          if (error instanceof IdempotencyConflict) {
            const taken = new Set(error.indexes)
            members.forEach((member, index) => taken.has(index) && member.reject(error))
            members = members.filter((_, index) => !taken.has(index))
          } else if (members.length > 1 && !isRetryable(error) && !applied && !isStorageUnavailable(error)) {
            for (const member of members) await this.#commit([member])
            return
          } else {
            throw applied && !isRetryable(error) ? commitOutcomeUnknown(error) : error
          }
        }
      }
    } catch (error) {
      for (const member of members) member.reject(error)
    }
  }
}

type Work = (trx: Trx) => Promise<Outcome[][]>
type Early = (work: Work) => Promise<Outcome[][]>

/** BEGIN sent at once on a connection of its own; the function returned hands the work in and commits. */
function beginEarly(db: Db): Early {
  let hand!: (work: Work) => void
  const handed = new Promise<Work>((resolve) => (hand = resolve))
  const done = (async () => {
    const trx = await db.startTransaction().execute()
    const work = await handed
    try {
      const result = await work(trx)
      await trx.commit().execute()
      return result
    } catch (error) {
      await trx
        .rollback()
        .execute()
        .catch(() => undefined)
      throw error
    }
  })()
  // A failed BEGIN fails the batch that takes this transaction, not the process.
  done.catch(() => undefined)
  return (work) => {
    hand(work)
    return done
  }
}

/** The transactions the batch's moves recorded. */
function recorded(outcomes: Outcome[][]): Transaction[] {
  const transactions: Transaction[] = []
  for (const unit of outcomes) for (const outcome of unit) if (outcome.ok && outcome.transaction) transactions.push(outcome.transaction)
  return transactions
}

function settle(members: Member[], outcomes: Outcome[][]): void {
  members.forEach((member, index) => member.resolve(outcomes[index]))
}
