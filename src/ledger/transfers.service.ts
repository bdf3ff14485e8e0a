import type { KeyLimits } from '../http/key-scopes.ts'
import type { Db, Trx } from '../db/database.ts'
import { listHoldings } from './assets.repository.ts'
import type { GroupCommitter } from './group-committer.ts'
import type { Idempotency, SendRequest, SendResult } from './idempotency.ts'
import type { EventWriter, Transaction } from './ledger.types.ts'
import { Lookups, resolveTransfer } from './lookups.ts'
import { moveAssets } from './moves.ts'

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
   * Moves every positive holding of `from` to `to` as one Transaction of kind `sweep`, in the
   * caller's database transaction (wallet deletion); undefined when `from` holds nothing. Throws
   * I003 when a holding of `to` would overflow.
   */
  sweep(trx: Trx, from: number, to: number, memo: string): Promise<Transaction | undefined>
}

export function createTransfersService({ db, events, committer, idempotency }: TransfersServiceDeps): TransfersService {
  return {
    send(walletId, request, idempotencyKey, limits) {
      return idempotency.once(walletId, idempotencyKey, request, async (key) => {
        const move = await resolveTransfer(new Lookups(db, limits), walletId, request)
        return committer.run({ ...move, idempotency: key })
      })
    },
    async sweep(trx, from, to, memo) {
      const lines = (await listHoldings(trx, from))
        .filter(({ quantity }) => quantity > 0)
        .map(({ asset, quantity }) => ({ asset, quantity }))
      return lines.length === 0 ? undefined : moveAssets(trx, { from, to, lines, memo, kind: 'sweep' }, events)
    },
  }
}
