import type { Executor } from './database.ts'

/** Keys written by one statement at most; more wait for the next. */
const MAX_BATCH = 500

interface Batch<K> {
  keys: Set<K>
  done: Promise<void>
}

/**
 * Writes of the same kind that requests make in the same turn of the event loop go to the
 * database as one statement (`write` with every key of the turn) instead of one statement, one
 * transaction and, on SQLite, one fsync each: a hundred wallet keys first used in the same second
 * mark themselves as used with one write, not a hundred in a row that the thread waits on in turn.
 * Each caller's promise settles when the statement holding its key has: resolved once it has
 * committed, rejected with its error. Nothing is cached or skipped: every key given is written.
 * One batcher per database (an app, a test, a CLI run each have their own).
 */
export function batchedWrites<K>(write: (db: Executor, keys: K[]) => Promise<void>): (db: Executor, key: K) => Promise<void> {
  const pending = new WeakMap<Executor, Batch<K>>()
  return (db, key) => {
    let batch = pending.get(db)
    if (!batch || batch.keys.size >= MAX_BATCH) {
      const keys = new Set<K>()
      // After the I/O callbacks of this turn, so that every request that arrived in it joins.
      const done = new Promise<void>((resolve, reject) => {
        setImmediate(() => {
          if (pending.get(db)?.keys === keys) pending.delete(db)
          write(db, [...keys]).then(resolve, reject)
        })
      })
      batch = { keys, done }
      pending.set(db, batch)
    }
    batch.keys.add(key)
    return batch.done
  }
}
