import type { KeyLimits } from '../http/key-scopes.ts'
import type { Db, Trx } from '../db/database.ts'
import { listHoldings } from './assets.repository.ts'
import { rehearsal, unrecordedTransaction, type DryRun, type UnrecordedTransaction } from './dry-run.ts'
import type { GroupCommitter } from './group-committer.ts'
import type { Idempotency, SendRequest, SendResult } from './idempotency.ts'
import type { EventWriter, Transaction } from './ledger.types.ts'
import { Lookups, resolveTransfer } from './lookups.ts'
import { moveAssets, transactionOf } from './moves.ts'

/**
 * POST /wallet/transactions, the transfer, one file after the other: transactions.routes.ts →
 * transfers.service.ts (recipient and assets, `lookups.ts`) → idempotency.ts (repeats) →
 * group-committer.ts (batches, one commit) → moves.ts (the rules) → moves.repository.ts (the
 * statements) → the event writer (events/outbox.ts, handed to the ledger by buildApp).
 */

export interface TransfersServiceDeps {
  db: Db
  events: EventWriter
  committer: GroupCommitter
  /** One key space per wallet, shared with batches, holds and refunds. */
  idempotency: Idempotency
  clock: () => string
}

export interface TransfersService {
  /**
   * Sends assets from the wallet to a recipient, all or nothing, committed together with the
   * transfers that arrive alongside it. With an Idempotency-Key, a repeat of the same request
   * returns the first response and moves nothing. Throws, in this order: G003/G004 (key),
   * U003/W000/G000 (recipient), W013 (to itself), K002, I001, K001 (the limits of the wallet key
   * making it, if any), then from the ledger's rules W000, I002, I003.
   */
  send(walletId: number, request: SendRequest, idempotencyKey?: string, limits?: KeyLimits): Promise<SendResult>
  /**
   * `send` as a dry run (`dry-run.ts`): the Transaction it would record and the wallet's holdings
   * after it, nothing written. Throws `send`'s refusals but G003/G004 (no key is read).
   */
  dryRun(walletId: number, request: SendRequest, limits?: KeyLimits): Promise<DryRun<UnrecordedTransaction>>
  /**
   * The run of a schedule: the transfer `request` from the wallet in the caller's database
   * transaction, so that the run and its record commit together, checked by the same rules as
   * `send` and recorded with `scheduleId`, and charged to `limits`, those of the wallet key that
   * created the schedule, if any. Throws `send`'s refusals.
   */
  sendWithin(trx: Trx, walletId: number, request: SendRequest, scheduleId: number, limits?: KeyLimits): Promise<Transaction>
  /**
   * What `send` checks before the balances: U003/W000/G000 (recipient), W013 (to itself), K002,
   * I001, I003, K001 (`per_transfer`). Moves nothing.
   */
  check(walletId: number, request: SendRequest, limits?: KeyLimits): Promise<void>
  /** The wallet the request's recipient names now, in the caller's transaction. Throws U003/W000/G000. */
  recipientOf(trx: Trx, request: Pick<SendRequest, 'recipient' | 'type'>): Promise<number>
  /**
   * Moves every positive holding of `from` to `to` as one Transaction of kind `sweep`, in the
   * caller's database transaction (wallet deletion); undefined when `from` holds nothing. Throws
   * I003 when a holding of `to` would overflow.
   */
  sweep(trx: Trx, from: number, to: number, memo: string): Promise<Transaction | undefined>
}

export function createTransfersService({ db, events, committer, idempotency, clock }: TransfersServiceDeps): TransfersService {
  return {
    send(walletId, request, idempotencyKey, limits) {
      return idempotency.once(walletId, idempotencyKey, request, async (key) => {
        const move = await resolveTransfer(new Lookups(db, limits), walletId, request)
        return committer.run({ ...move, idempotency: key })
      })
    },
    async dryRun(walletId, request, limits) {
      const move = await resolveTransfer(new Lookups(db, limits), walletId, request)
      const rehearsed = rehearsal(db, events, clock, walletId)
      const [outcome] = await rehearsed.runUnit({ moves: [move], atomic: true })
      if (!outcome.ok) throw outcome.error
      return { dry_run: true, result: unrecordedTransaction(transactionOf(outcome)), holdings_after: await rehearsed.holdingsAfter() }
    },
    async sendWithin(trx, walletId, request, scheduleId, limits) {
      const move = await resolveTransfer(new Lookups(trx, limits), walletId, request)
      return moveAssets(trx, { ...move, scheduleId }, events, clock)
    },
    async check(walletId, request, limits) {
      await resolveTransfer(new Lookups(db, limits), walletId, request)
    },
    recipientOf: (trx, request) => new Lookups(trx).recipient(request.recipient, request.type ?? 0),
    async sweep(trx, from, to, memo) {
      // What may be spent: expired units stay behind and return to mint at their expiry.
      const lines = (await listHoldings(trx, from, clock())).flatMap(({ asset, quantity, held }) =>
        quantity - held > 0 ? [{ asset, quantity: quantity - held }] : [],
      )
      return lines.length === 0 ? undefined : moveAssets(trx, { from, to, lines, memo: memo, kind: 'sweep' }, events, clock)
    },
  }
}
