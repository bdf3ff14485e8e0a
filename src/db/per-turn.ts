import type { Executor } from './database.types.ts'
import { storageStateOf } from './storage-state.ts'

/**
 * Items handed in during one turn of the event loop, run together by `setImmediate` after the
 * turn's I/O; `run` answers them in order, and its error fails every one.
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

/** `read` once a turn of the event loop, for every caller of the turn. */
export function oncePerTurn<R>(read: () => R | Promise<R>): () => Promise<R> {
  const call = perTurn(async (callers: undefined[]) => {
    const result = await read()
    return callers.map(() => result)
  })
  return () => call(undefined)
}

/** `make`'s result per executor, kept in the database's storage state. */
export function perDatabase<T>(make: (db: Executor) => T): (db: Executor) => T {
  const key = Symbol('per database')
  return (db) => {
    const made = storageStateOf(db).part(key, () => new WeakMap<Executor, T>())
    let forDb = made.get(db)
    if (forDb === undefined) made.set(db, (forDb = make(db)))
    return forDb
  }
}
