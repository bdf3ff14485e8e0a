import type { Executor } from './database.types.ts'
import { storageStateOf } from './storage-state.ts'

/**
 * Work that callers hand in during one turn of the event loop, done once for all of them: the
 * first item of a turn schedules `run` with `setImmediate`, so it runs after the turn's I/O
 * callbacks, once every request that arrived in the turn has handed in its item; an item handed
 * in from then on (from within `run` too) goes to the next turn's. `run` is called synchronously
 * there, so a statement it sends, or a read it makes on SQLite, begins before any further I/O.
 *
 * `run` answers the turn's items in their order, each with its value or a promise of it (a turn
 * whose items go to several statements settles each item with its own). Each caller is settled
 * once, with its item's answer; when `run` throws or rejects, with that error, every one.
 * Nothing is kept from one turn to the next.
 */
export function perTurn<T, R>(run: (items: T[]) => Answers<R> | Promise<Answers<R>>): (item: T) => Promise<R> {
  let turn: { items: T[]; answers: Promise<Answers<R>> } | undefined
  return (item) => {
    if (!turn) {
      const items: T[] = []
      const answers = new Promise<Answers<R>>((resolve, reject) =>
        setImmediate(() => {
          turn = undefined
          try {
            resolve(run(items))
          } catch (error) {
            reject(error)
          }
        }),
      )
      turn = { items, answers }
    }
    const index = turn.items.push(item) - 1
    return turn.answers.then((answers) => answers[index])
  }
}

type Answers<R> = readonly (R | PromiseLike<R>)[]

/** `read` once a turn of the event loop (`perTurn`), its result for every caller of the turn. */
export function oncePerTurn<R>(read: () => R | Promise<R>): () => Promise<R> {
  const call = perTurn(async (callers: undefined[]) => {
    const result = await read()
    return callers.map(() => result)
  })
  return () => call(undefined)
}

/**
 * `make`'s result for each executor (a database, or a transaction on it), kept in the database's
 * storage state: an app, a test, a CLI run each have their own batches.
 */
export function perDatabase<T>(make: (db: Executor) => T): (db: Executor) => T {
  const key = Symbol('per database')
  return (db) => {
    const made = storageStateOf(db).part(key, () => new WeakMap<Executor, T>())
    let forDb = made.get(db)
    if (forDb === undefined) made.set(db, (forDb = make(db)))
    return forDb
  }
}
