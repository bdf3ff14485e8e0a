import path from 'node:path'
import SQLite from 'better-sqlite3'

/**
 * The reference for SQLite's keyed transfers: what an application gets from a plain durable loop, with no
 * HTTP and no batching. A single-threaded in-process program on better-sqlite3 (WAL,
 * `synchronous = FULL`, as the service runs SQLite), one database transaction per transfer:
 * update two balances, insert a journal row, read a balance back, commit.
 */

/** Accounts the loop moves units between (as many as the keyed wallets). */
const ACCOUNTS = 100

export interface LoopResult {
  commits: number
  seconds: number
  commitsPerSecond: number
}

/** The reference's two tables on a durable WAL file, `ACCOUNTS` funded balances, and its three writes. */
function openLedger(db: SQLite.Database) {
  db.pragma('journal_mode = WAL')
  db.pragma('synchronous = FULL')
  db.exec(`
    create table balances (id integer primary key, quantity integer not null);
    create table journal (id integer primary key, from_id integer not null, to_id integer not null, quantity integer not null, created_at text not null);`)
  const open = db.prepare('insert into balances (id, quantity) values (?, 1000000000)')
  db.transaction(() => {
    for (let id = 1; id <= ACCOUNTS; id++) open.run(id)
  })()
  return {
    debit: db.prepare('update balances set quantity = quantity - ? where id = ?'),
    credit: db.prepare('update balances set quantity = quantity + ? where id = ?'),
    record: db.prepare('insert into journal (from_id, to_id, quantity, created_at) values (?, ?, ?, ?)'),
  }
}

/**
 * Runs the loop for `seconds` on a fresh file `reference.sqlite` in `dir` (a temp dir like the
 * service's DATA_DIR, so on the same disk). Blocks the calling thread while it runs: it is the
 * whole program, as the reference describes it.
 */
export function runSqliteLoop(dir: string, seconds: number): LoopResult {
  const db = new SQLite(path.join(dir, 'reference.sqlite'))
  try {
    const { debit, credit, record } = openLedger(db)
    const balance = db.prepare<[number], { quantity: number }>('select quantity from balances where id = ?')
    const transfer = db.transaction((from: number, to: number) => {
      debit.run(1, from)
      credit.run(1, to)
      record.run(from, to, 1, new Date().toISOString())
      return balance.get(from)?.quantity
    })
    const started = performance.now()
    const until = started + seconds * 1000
    let commits = 0
    while (performance.now() < until) {
      const from = 1 + Math.floor(Math.random() * ACCOUNTS)
      const to = 1 + ((from + Math.floor(Math.random() * (ACCOUNTS - 1))) % ACCOUNTS)
      transfer(from, to)
      commits++
    }
    const elapsed = (performance.now() - started) / 1000
    return { commits, seconds: elapsed, commitsPerSecond: commits / elapsed }
  } finally {
    db.close()
  }
}

/**
 * The reference for the batch route on SQLite: the same program, with `batch` transfers (debit,
 * credit, journal row each, among 100 accounts at random) per durable commit.
 */
export function runSqliteBatchedLoop(dir: string, seconds: number, batch: number): LoopResult & { transfersPerSecond: number } {
  const db = new SQLite(path.join(dir, 'reference-batched.sqlite'))
  try {
    const { debit, credit, record } = openLedger(db)
    const transfers = db.transaction(() => {
      const at = new Date().toISOString()
      for (let i = 0; i < batch; i++) {
        const from = 1 + Math.floor(Math.random() * ACCOUNTS)
        const to = 1 + ((from + Math.floor(Math.random() * (ACCOUNTS - 1))) % ACCOUNTS)
        debit.run(1, from)
        credit.run(1, to)
        record.run(from, to, 1, at)
      }
    })
    const started = performance.now()
    const until = started + seconds * 1000
    let commits = 0
    while (performance.now() < until) {
      transfers()
      commits++
    }
    const elapsed = (performance.now() - started) / 1000
    return { commits, seconds: elapsed, commitsPerSecond: commits / elapsed, transfersPerSecond: (commits * batch) / elapsed }
  } finally {
    db.close()
  }
}
