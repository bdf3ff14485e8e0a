import { sql, type Transaction } from 'kysely'
import type { Db } from '../db/database.ts'
import { isPostgres, isRetryable } from '../db/dialect.ts'
import type { DB } from '../db/tables.ts'

/**
 * Group commit for transfers.
 *
 * A durable commit (an fsync) costs far more than the few row changes of one transfer, so
 * transfers that arrive while a commit is in flight wait and are then applied together in one
 * database transaction, each inside its own savepoint, and acknowledged after that transaction's
 * one durable commit:
 *
 * - All or nothing per transfer: a member that throws is rolled back to its savepoint and fails
 *   alone with its own error; the others still commit.
 * - Durability: no member's promise settles before the commit has returned, so a 201 still means
 *   durably committed; if the commit fails, every member fails with that error.
 * - Ordering: members are applied in arrival order, and batches start in arrival order.
 * - PostgreSQL: a deadlock or serialization failure aborts the whole batch, which is then run
 *   again from the start (every member, like `inTransaction` does for one transfer). Several
 *   batches may be in flight on separate connections; each first locks every row its members
 *   will touch in one fixed order (wallets, then holdings, each by id), and the next batch only
 *   takes its locks once this one holds them, so batches neither deadlock with each other nor
 *   overtake an earlier transfer on a shared row.
 *
 * A batch of one runs without a savepoint, exactly as a lone transaction would.
 */

/** The rows a transfer will lock, so that a batch can lock them all up front in a fixed order. */
export interface TransferRows {
  from: number
  to: number
  assetIds: number[]
}

type Work<T> = (trx: Transaction<DB>) => Promise<T>

interface Member {
  work: Work<unknown>
  rows: TransferRows
  resolve: (value: unknown) => void
  reject: (error: unknown) => void
}

type Outcome = { ok: true; value: unknown } | { ok: false; error: unknown }

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

  /** Runs `work` as one member of the next batch; settles after that batch's commit. */
  run<T>(rows: TransferRows, work: Work<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.#queue.push({ work, rows, resolve: resolve as (value: unknown) => void, reject })
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
    let release: () => void = () => {}
    let previous: Promise<void> | undefined
    if (this.#postgres) {
      previous = this.#locked
      this.#locked = new Promise<void>((resolve) => (release = resolve))
    }
    try {
      for (let attempt = 1; ; attempt++) {
        try {
          const outcomes = await this.#db.transaction().execute(async (trx) => {
            if (this.#postgres) {
              // The previous batch locks first; a retry locks again without waiting.
              await previous
              previous = undefined
              await lockRows(trx, batch)
              release()
            }
            return batch.length === 1 ? [await runAlone(trx, batch[0])] : runMembers(trx, batch, this.#postgres)
          })
          batch.forEach((member, index) => {
            const outcome = outcomes[index]
            if (outcome.ok) member.resolve(outcome.value)
            else member.reject(outcome.error)
          })
          return
        } catch (error) {
          if (attempt >= MAX_ATTEMPTS || !isRetryable(error)) throw error
          await new Promise((resolve) => setTimeout(resolve, Math.random() * 5 * attempt))
        }
      }
    } catch (error) {
      for (const member of batch) member.reject(error)
    } finally {
      release()
    }
  }
}

/** A batch of one: no savepoint; an error rolls the whole transaction back, as it always did. */
async function runAlone(trx: Transaction<DB>, member: Member): Promise<Outcome> {
  try {
    return { ok: true, value: await member.work(trx) }
  } catch (error) {
    if (isRetryable(error)) throw error
    // Any other error fails the member; rolling back keeps the transaction from committing it.
    throw new MemberFailed(error)
  }
}

/** Carries a lone member's own error through the rollback of its transaction. */
class MemberFailed extends Error {
  constructor(readonly failure: unknown) {
    super('the transfer failed')
  }
}

async function runMembers(trx: Transaction<DB>, batch: Member[], postgres: boolean): Promise<Outcome[]> {
  const outcomes: Outcome[] = []
  let open = false
  for (const member of batch) {
    // One round trip on PostgreSQL: release the previous member's savepoint and start this one's.
    if (open && postgres) await sql`release savepoint transfer; savepoint transfer`.execute(trx)
    else {
      if (open) await sql`release savepoint transfer`.execute(trx)
      await sql`savepoint transfer`.execute(trx)
    }
    open = true
    try {
      outcomes.push({ ok: true, value: await member.work(trx) })
    } catch (error) {
      // A deadlock or serialization failure aborts the batch: every member runs again.
      if (isRetryable(error)) throw error
      await sql`rollback to savepoint transfer`.execute(trx)
      outcomes.push({ ok: false, error })
    }
  }
  return outcomes
}

/**
 * Locks every wallet (shared, as a transfer does) and every existing holding (for update) that
 * the batch's members will touch, in id order. Holdings that do not exist yet are created by the
 * member itself.
 */
async function lockRows(trx: Transaction<DB>, batch: Member[]): Promise<void> {
  const wallets = new Set<number>()
  const holdings = new Map<string, [number, number]>()
  for (const { rows } of batch) {
    wallets.add(rows.from)
    wallets.add(rows.to)
    for (const assetId of rows.assetIds) {
      holdings.set(`${rows.from}:${assetId}`, [rows.from, assetId])
      holdings.set(`${rows.to}:${assetId}`, [rows.to, assetId])
    }
  }
  await trx
    .selectFrom('wallets')
    .select('id')
    .where('id', 'in', [...wallets])
    .orderBy('id')
    .forKeyShare()
    .execute()
  if (holdings.size === 0) return
  await trx
    .selectFrom('holdings')
    .select(['wallet_id', 'asset_id'])
    .where((eb) =>
      eb(
        eb.refTuple('wallet_id', 'asset_id'),
        'in',
        [...holdings.values()].map(([walletId, assetId]) => eb.tuple(walletId, assetId)),
      ),
    )
    .orderBy('wallet_id')
    .orderBy('asset_id')
    .forUpdate()
    .execute()
}

const committers = new WeakMap<Db, GroupCommitter>()

/**
 * Runs `work` (one transfer) in the next group commit on `db`; resolves with its result once
 * the batch is durably committed, or rejects with the error `work` threw (its changes rolled
 * back) or with the batch's commit error.
 */
export function inGroupCommit<T>(db: Db, rows: TransferRows, work: Work<T>): Promise<T> {
  let committer = committers.get(db)
  if (!committer) {
    // PostgreSQL: 8 batches in flight measured 15-25 % more transfers/s than 4; 16 a little more
    // again, but would leave 4 of the 20 pooled connections to every other query (docs/performance.md).
    committer = new GroupCommitter(db, isPostgres(db) ? { maxBatch: 64, maxInFlight: 8 } : { maxBatch: 128, maxInFlight: 1 })
    committers.set(db, committer)
  }
  return committer.run(rows, work).catch((error: unknown) => {
    throw error instanceof MemberFailed ? error.failure : error
  })
}
