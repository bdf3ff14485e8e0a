import type { Db } from '../db/database.ts'
import { isPostgres, isRetryable } from '../db/dialect.ts'
import { applyMoves, IdempotencyConflict, lockMoves, type Move, type Outcome } from './moves.ts'
import type { Transaction } from './transactions.repository.ts'

/**
 * Group commit for transfers.
 *
 * A durable commit (an fsync) costs far more than the few row changes of one transfer, and on
 * PostgreSQL every statement costs a round trip; so transfers that arrive while a commit is in
 * flight wait, and are then applied together in one database transaction by `moves.ts` (a few
 * set-based statements for the whole batch) and acknowledged after its one durable commit:
 *
 * - All or nothing per transfer: the moves are checked in order against the locked balances, and
 *   one that fails is left out of the writes and fails alone with its own error.
 * - Durability: no member's promise settles before the commit has returned, so a 201 still means
 *   durably committed; if the commit fails, every member fails with that error.
 * - Ordering: members are applied in arrival order, and batches start in arrival order.
 * - PostgreSQL: a deadlock or serialization failure aborts the whole batch, which is then run
 *   again from the start (every member, like `inTransaction` does for one transfer). Several
 *   batches may be in flight on separate connections; each first locks every row its members
 *   will touch in one fixed order (wallets, then holdings, each by id), and the next batch only
 *   takes its locks once this one holds them, so batches neither deadlock with each other nor
 *   overtake an earlier transfer on a shared row.
 * - Any other database error in a batch of several runs each member again as a batch of its own,
 *   so that only the transfer that causes it fails.
 * - An Idempotency-Key stored meanwhile by another instance fails its member with
 *   IdempotencyConflict (the caller answers with the stored response); the rest run again.
 */

interface Member {
  move: Move
  resolve: (transaction: Transaction) => void
  reject: (error: unknown) => void
}

export interface GroupCommitOptions {
  /** Most transfers in one database transaction. */
  maxBatch: number
  /** Most batches committing at once (each on its own connection); 1 on SQLite, which has one writer. */
  maxInFlight: number
}

const MAX_ATTEMPTS = 8

export class GroupCommitter {
  readonly #db: Db
  readonly #options: GroupCommitOptions
  readonly #postgres: boolean
  #queue: Member[] = []
  #inFlight = 0
  #scheduled = false
  /** Settles once the latest batch holds its row locks (PostgreSQL); the next batch locks after it. */
  #locked: Promise<void> = Promise.resolve()

  constructor(db: Db, options: GroupCommitOptions) {
    this.#db = db
    this.#options = options
    this.#postgres = isPostgres(db)
  }

  /** Applies `move` as one member of the next batch; settles after that batch's commit. */
  run(move: Move): Promise<Transaction> {
    return new Promise<Transaction>((resolve, reject) => {
      this.#queue.push({ move, resolve, reject })
      this.#schedule()
    })
  }

  #schedule(): void {
    if (this.#scheduled || this.#queue.length === 0 || this.#inFlight >= this.#options.maxInFlight) return
    this.#scheduled = true
    // After the I/O callbacks of this turn of the event loop: every request that arrived together
    // (or while the last commit was running) joins the same batch.
    setImmediate(() => {
      this.#scheduled = false
      while (this.#queue.length > 0 && this.#inFlight < this.#options.maxInFlight) {
        const batch = this.#queue.splice(0, this.#options.maxBatch)
        this.#inFlight += 1
        void this.#commit(batch).finally(() => {
          this.#inFlight -= 1
          this.#schedule()
        })
      }
    })
  }

  async #commit(batch: Member[]): Promise<void> {
    let members = batch
    let release: () => void = () => {}
    let previous: Promise<void> | undefined
    if (this.#postgres) {
      previous = this.#locked
      this.#locked = new Promise<void>((resolve) => (release = resolve))
    }
    try {
      for (let attempt = 1; members.length > 0; attempt++) {
        const moves = members.map((member) => member.move)
        try {
          const outcomes = await this.#db.transaction().execute(async (trx) => {
            if (this.#postgres) {
              // The previous batch locks first; a retry locks again without waiting.
              await previous
              previous = undefined
            }
            const locked = await lockMoves(trx, moves)
            release()
            return applyMoves(trx, moves, locked)
          })
          settle(members, outcomes)
          return
        } catch (error) {
          if (error instanceof IdempotencyConflict) {
            const taken = new Set(error.indexes)
            members.forEach((member, index) => taken.has(index) && member.reject(error))
            members = members.filter((_, index) => !taken.has(index))
          } else if (isRetryable(error) && attempt < MAX_ATTEMPTS) {
            await new Promise((resolve) => setTimeout(resolve, Math.random() * 5 * attempt))
          } else if (members.length > 1 && !isRetryable(error)) {
            release()
            for (const member of members) await this.#commit([member])
            return
          } else {
            throw error
          }
        }
      }
    } catch (error) {
      for (const member of members) member.reject(error)
    } finally {
      release()
    }
  }
}

function settle(members: Member[], outcomes: Outcome[]): void {
  members.forEach((member, index) => {
    const outcome = outcomes[index]
    if (outcome.ok) member.resolve(outcome.transaction)
    else member.reject(outcome.error)
  })
}

const committers = new WeakMap<Db, GroupCommitter>()

/**
 * Applies `move` (one transfer) in the next group commit on `db`; resolves with its Transaction
 * once the batch is durably committed, or rejects with the move's own error (it changed nothing)
 * or with the batch's commit error.
 */
export function inGroupCommit(db: Db, move: Move): Promise<Transaction> {
  let committer = committers.get(db)
  if (!committer) {
    // One batch at a time on both: on PostgreSQL, 2, 4, 8 or 16 batches in flight measured 0.6,
    // 0.45, 0.45 and 0.3 times the transfers/s of one, as smaller batches wait on each other's
    // row locks and pay their round trips for fewer transfers (docs/performance.md).
    committer = new GroupCommitter(db, { maxBatch: isPostgres(db) ? 64 : 128, maxInFlight: 1 })
    committers.set(db, committer)
  }
  return committer.run(move)
}
