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
 * - Ordering: one batch runs at a time, and members are applied in arrival order. (Several
 *   batches in flight measured slower on PostgreSQL too: they wait on each other's row locks,
 *   and each pays its round trips for fewer transfers; docs/performance.md.)
 * - PostgreSQL: a deadlock or serialization failure (with another instance) aborts the whole
 *   batch, which is then run again from the start, like `inTransaction` does for one transfer.
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

const MAX_ATTEMPTS = 8

export class GroupCommitter {
  readonly #db: Db
  /** Most transfers in one database transaction. */
  readonly #maxBatch: number
  #queue: Member[] = []
  #busy = false

  constructor(db: Db, maxBatch: number) {
    this.#db = db
    this.#maxBatch = maxBatch
  }

  /** Applies `move` as one member of the next batch; settles after that batch's commit. */
  run(move: Move): Promise<Transaction> {
    return new Promise<Transaction>((resolve, reject) => {
      this.#queue.push({ move, resolve, reject })
      this.#schedule()
    })
  }

  #schedule(): void {
    if (this.#busy || this.#queue.length === 0) return
    this.#busy = true
    // After the I/O callbacks of this turn of the event loop: every request that arrived together
    // (or while the last commit was running) joins the same batch.
    setImmediate(() => {
      const batch = this.#queue.splice(0, this.#maxBatch)
      void this.#commit(batch).finally(() => {
        this.#busy = false
        this.#schedule()
      })
    })
  }

  async #commit(batch: Member[]): Promise<void> {
    let members = batch
    try {
      for (let attempt = 1; members.length > 0; attempt++) {
        const moves = members.map((member) => member.move)
        try {
          const outcomes = await this.#db.transaction().execute(async (trx) => applyMoves(trx, moves, await lockMoves(trx, moves)))
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
            for (const member of members) await this.#commit([member])
            return
          } else {
            throw error
          }
        }
      }
    } catch (error) {
      for (const member of members) member.reject(error)
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
    committer = new GroupCommitter(db, isPostgres(db) ? 64 : 128)
    committers.set(db, committer)
  }
  return committer.run(move)
}
