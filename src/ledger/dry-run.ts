import type { Db, Trx } from '../db/database.ts'
import { inTransaction } from '../db/dialect.ts'
import { listHoldings } from './assets.repository.ts'
import type { EventWriter, Hold, Transaction } from './ledger.types.ts'
import { applyUnits, type Outcome, type Unit } from './moves.ts'

/**
 * Dry runs (`?dry_run=true`, `docs/dry-runs.md`): the request's own way through its service, with
 * the one write step run in a database transaction of its own that is always rolled back. So a dry
 * run makes every check the request makes, in the same order and against the same rows (the
 * balances, holds, expiring units, credit, and what a capped key used, read under the same
 * wallets' turns), and leaves nothing behind: no row, event, webhook delivery, key use or
 * Idempotency-Key. It never joins the group commit (whose members share one commit) and never
 * tells the sequencer or the metrics of a batch.
 */

type Holdings = Awaited<ReturnType<typeof listHoldings>>

/** The answer of a dry run: what the request's success body would be, and the paying wallet's holdings after it. */
export interface DryRun<T> {
  dry_run: true
  result: T
  holdings_after: Holdings
}

/** A Transaction as a dry run shows it: what it records is known, its id, time and journal place are not. */
export type UnrecordedTransaction = Omit<Transaction, 'id' | 'created_at' | 'position' | 'hash'> & {
  id: null
  created_at: null
  position: null
  hash: null
}

/** A Hold as a dry run shows it: its `expires_at` counted from now, its id and creation time unknown. */
export type UnrecordedHold = Omit<Hold, 'id' | 'created_at'> & { id: null; created_at: null }

export function unrecordedTransaction(transaction: Transaction): UnrecordedTransaction {
  return { ...transaction, id: null, created_at: null, position: null, hash: null }
}

export function unrecordedHold(hold: Hold): UnrecordedHold {
  return { ...hold, id: null, created_at: null }
}

/** Carries the answer out of the transaction it rolls back. */
class Rollback<T> extends Error {
  constructor(readonly answer: { value: T; holdings: Holdings }) {
    super('a dry run is rolled back')
  }
}

/**
 * Runs `work` in a database transaction, reads the paying wallet's holdings as `work` left them,
 * then rolls everything back. A refusal `work` throws is thrown as it is.
 */
async function rehearse<T>(
  db: Db,
  clock: () => string,
  walletId: number,
  work: (trx: Trx) => Promise<T>,
): Promise<{ value: T; holdings: Holdings }> {
  try {
    await inTransaction(db, async (trx) => {
      const value = await work(trx)
      throw new Rollback({ value, holdings: await listHoldings(trx, walletId, clock()) })
    })
  } catch (error) {
    if (error instanceof Rollback) return error.answer as { value: T; holdings: Holdings }
    throw error
  }
  throw new Error('a dry run was committed')
}

/** A dry run's way of running what the request would commit, and the holdings it leaves. */
export interface Rehearsal {
  /** Runs `work` in a database transaction and rolls it back. */
  transact<T>(work: (trx: Trx) => Promise<T>): Promise<T>
  /** A unit run as the group committer runs each of its members (`applyUnits`), rolled back. */
  runUnit(unit: Unit): Promise<Outcome[]>
  /** The paying wallet's holdings as the last rehearsed work left them; as they are if none ran. */
  holdingsAfter(): Promise<Holdings>
}

export function rehearsal(db: Db, events: EventWriter, clock: () => string, walletId: number): Rehearsal {
  let holdings: Holdings | undefined
  const transact = async <T>(work: (trx: Trx) => Promise<T>): Promise<T> => {
    const rehearsed = await rehearse(db, clock, walletId, work)
    holdings = rehearsed.holdings
    return rehearsed.value
  }
  return {
    transact,
    runUnit: (unit) => transact(async (trx) => (await applyUnits(trx, [unit], events, clock))[0]),
    holdingsAfter: async () => holdings ?? (await listHoldings(db, walletId, clock())),
  }
}
