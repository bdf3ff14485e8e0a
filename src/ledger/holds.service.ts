import type { KeyLimits } from '../http/key-scopes.ts'
import type { Db, Executor, Trx } from '../db/database.ts'
import { inTransaction } from '../db/dialect.ts'
import { AppError } from '../http/errors.ts'
import { rehearsal, unrecordedHold, type DryRun, type UnrecordedHold } from './dry-run.ts'
import type { GroupCommitter } from './group-committer.ts'
import * as holds from './holds.repository.ts'
import {
  canonicalAssets,
  canonicalTransfer,
  hashRequest,
  type Answer,
  type Idempotency,
  type IdempotencyRecord,
  type SendRequest,
} from './idempotency.ts'
import type { EventWriter, Hold, HoldStatus, Line, Transaction } from './ledger.types.ts'
import { takeWalletTurns } from './moves.repository.ts'
import { applyMove, transactionOf, type Move, type Outcome, type Unit } from './moves.ts'
import { Lookups, resolveTransfer } from './lookups.ts'

/**
 * Holds (two-phase transfers). A new hold goes through the group commit and `moves.ts` like a
 * transfer, so holds and transfers of a wallet are checked in arrival order against what is free.
 * A capture, void or expiry locks the hold's row under its wallets' turns and finds it pending, so
 * of several racing on one hold exactly one settles it (the others get H001). A hold past
 * `expires_at` reads as expired and stops counting as held before the expiry job writes it.
 */

export interface HoldRequest extends SendRequest {
  /** Seconds until the hold expires: 60 to 2,592,000 (the route's schema); 604,800 by default. */
  expires_in?: number
}

export interface CaptureRequest {
  /** Asset name → quantity to capture; everything when absent. */
  assets?: Record<string, number>
}

export const DEFAULT_EXPIRES_IN = 604_800

/**
 * What tells a hold request apart under one Idempotency-Key: a transfer's fields (metadata
 * included) and its expiry; never a transfer's.
 */
function holdFingerprint(request: HoldRequest): string {
  return hashRequest(['hold', canonicalTransfer(request), request.expires_in ?? DEFAULT_EXPIRES_IN])
}

function captureFingerprint(holdId: number, request: CaptureRequest): string {
  return hashRequest(['capture', holdId, request.assets === undefined ? null : canonicalAssets(request.assets)])
}

/**
 * The lines a capture takes: everything held, or the quantities asked for, matched to the hold's
 * assets by name (case-insensitively). Throws H002 for an asset the hold lacks or more than it holds.
 */
function captureLines(hold: Hold, requested: Record<string, number> | undefined): Line[] {
  if (requested === undefined) return hold.assets.map(({ asset, quantity }) => ({ asset, quantity }))
  const wanted = canonicalAssets(requested)
  const lines: Line[] = []
  for (const [name, quantity] of wanted) {
    const line = hold.assets.find((held) => held.asset.name.toLowerCase() === name)
    if (!line) throw new AppError('H002', `the hold holds no ${name}`)
    if (quantity > line.quantity) throw new AppError('H002', `the hold holds ${line.quantity} of ${line.asset.name}, ${quantity} requested`)
    lines.push({ asset: line.asset, quantity })
  }
  return lines
}

/** The move that settles a hold without moving anything (a void, an expiry): it only releases what the hold reserves. */
function releaseOf(hold: Hold, status: 'voided' | 'expired', at: string): Move {
  // Nothing moves, so no transaction is recorded and `kind` names none.
  return {
    from: hold.sending_wallet_id,
    to: hold.receiving_wallet_id,
    lines: [],
    memo: hold.memo,
    kind: 'capture',
    settle: { hold, status, at },
  }
}

export interface HoldListQuery {
  limit?: number
  before?: number
  after?: number
  status?: HoldStatus
  direction?: 'sent' | 'received'
}

export interface HoldsServiceDeps {
  db: Db
  events: EventWriter
  committer: GroupCommitter
  /** Shared with transfers: one key space per wallet. */
  idempotency: Idempotency
  clock: () => string
}

export interface HoldsService {
  /**
   * POST /wallet/holds: reserves the assets for the recipient, committed with the transfers that
   * arrive alongside it. Answers 201 with the pending Hold. Throws what a transfer throws, in its
   * order: G003/G004, U003/W000/G000, W013, K002, I001, K001, then W000, I002 (only what is free may
   * be held), I003.
   */
  create(walletId: number, request: HoldRequest, idempotencyKey?: string, limits?: KeyLimits): Promise<Answer<Hold>>
  /**
   * `create` as a dry run (`dry-run.ts`): the pending Hold it would record (its `expires_at`
   * counted from now) and the wallet's holdings after it; nothing written. Throws `create`'s
   * refusals but G003/G004.
   */
  dryRun(walletId: number, request: HoldRequest, limits?: KeyLimits): Promise<DryRun<UnrecordedHold>>
  /**
   * POST /wallet/holds/{id}/capture (the sending wallet): moves what is asked (everything by
   * default) to the recipient as one Transaction of kind `capture` and releases the rest. Answers
   * 201 with the Transaction. Throws, in this order: G003/G004 (key), H000 (no such hold, or the
   * caller is not its sender), H001 (not pending), H002 (more than held, or an asset it lacks),
   * then the ledger's W000, I003.
   */
  capture(walletId: number, holdId: number, request: CaptureRequest, idempotencyKey?: string): Promise<Answer<Transaction>>
  /** POST /wallet/holds/{id}/void (either side): releases everything. Answers the voided Hold. Throws H000, H001. */
  void(walletId: number, holdId: number): Promise<Hold>
  /** GET /wallet/holds: a page of the holds the wallet is either side of, newest first, and whether there is a next page. */
  list(walletId: number, query: HoldListQuery): ReturnType<typeof holds.listHolds>
  /** GET /wallet/holds/{id}: one hold the wallet is a side of. Throws H000 otherwise. */
  find(walletId: number, holdId: number): Promise<Hold>
  /**
   * Writes the expiry of up to `limit` pending holds whose time has come (each in a transaction of
   * its own, settled at its `expires_at`, with `hold.expired` to both sides); answers how many. A
   * hold captured or voided meanwhile is left as it is.
   */
  expireDue(limit: number): Promise<number>
  /** The wallets on the other side of the wallet's unsettled holds (wallet deletion takes their turns first). */
  findCounterparties(db: Executor, walletId: number): Promise<number[]>
  /**
   * Settles every unsettled hold the wallet is either side of, in the caller's transaction (wallet
   * deletion, before its sweep): pending ones are voided, those past their expiry expired. The
   * caller holds the turns of the wallet and of every counterparty (`findCounterparties`); one
   * that appeared since has its turn taken here.
   */
  settleAllOf(trx: Trx, walletId: number): Promise<void>
}

export function createHoldsService({ db, events, committer, idempotency, clock }: HoldsServiceDeps): HoldsService {
  /**
   * Settles one hold in a transaction of its own: its wallets' turns, its row locked and found
   * pending and unexpired now (else H001), then the settlement through the ledger's rules.
   */
  const settle = (found: Hold, moveOf: (hold: Hold, now: string) => Move) =>
    inTransaction(db, async (trx) => {
      await takeWalletTurns(trx, [found.sending_wallet_id, found.receiving_wallet_id])
      const now = clock()
      const locked = await holds.lockHold(trx, found.id, now)
      if (!locked || locked.hold.status !== 'pending') throw new AppError('H001', `hold ${found.id} is ${locked?.hold.status ?? 'gone'}`)
      return applyMove(trx, moveOf(locked.hold, now), events, clock)
    })

  /** A new hold's way after its Idempotency-Key: the transfer resolved, then its reserving move run by `run`. */
  const placeHold = async (
    run: (unit: Unit) => Promise<Outcome[]>,
    walletId: number,
    request: HoldRequest,
    limits: KeyLimits | undefined,
    record?: IdempotencyRecord,
  ): Promise<Hold> => {
    const move = await resolveTransfer(new Lookups(db, limits), walletId, request)
    const [outcome] = await run({
      moves: [{ ...move, idempotency: record, reserve: { expiresIn: request.expires_in ?? DEFAULT_EXPIRES_IN } }],
      atomic: true,
    })
    if (!outcome.ok) throw outcome.error
    if (!outcome.hold) throw new Error('the hold was not recorded')
    return outcome.hold
  }

  /** Expires the hold if it is still stored as pending and past its expiry; true when it did. */
  const expireLocked = async (trx: Trx, holdId: number): Promise<boolean> => {
    const locked = await holds.lockHold(trx, holdId, clock())
    if (!locked?.unsettled || locked.hold.status !== 'expired') return false
    const { hold } = locked
    await applyMove(trx, releaseOf(hold, 'expired', hold.expires_at), events, clock)
    return true
  }

  return {
    create(walletId, request, idempotencyKey, limits) {
      return idempotency.answerOnce(walletId, idempotencyKey, holdFingerprint(request), async (record) => ({
        status: 201,
        body: await placeHold((unit) => committer.runUnit(unit), walletId, request, limits, record),
      }))
    },

    async dryRun(walletId, request, limits) {
      const rehearsed = rehearsal(db, events, clock, walletId)
      const hold = await placeHold((unit) => rehearsed.runUnit(unit), walletId, request, limits)
      return { dry_run: true, result: unrecordedHold(hold), holdings_after: await rehearsed.holdingsAfter() }
    },

    capture(walletId, holdId, request, idempotencyKey) {
      return idempotency.answerOnce(walletId, idempotencyKey, captureFingerprint(holdId, request), async (record) => {
        const found = await holds.findHold(db, holdId, clock())
        if (!found || found.sending_wallet_id !== walletId) throw new AppError('H000', `no hold ${holdId} sent by this wallet`)
        const applied = await settle(found, (hold, now) => ({
          from: hold.sending_wallet_id,
          to: hold.receiving_wallet_id,
          lines: captureLines(hold, request.assets),
          memo: hold.memo,
          kind: 'capture',
          metadata: hold.metadata,
          idempotency: record,
          settle: { hold, status: 'captured', at: now },
        }))
        return { status: 201, body: transactionOf(applied) }
      })
    },

    async void(walletId, holdId) {
      const found = await holds.findHold(db, holdId, clock())
      if (!found || (found.sending_wallet_id !== walletId && found.receiving_wallet_id !== walletId))
        throw new AppError('H000', `no hold ${holdId} of this wallet`)
      const { hold } = await settle(found, (pending, now) => releaseOf(pending, 'voided', now))
      if (!hold) throw new Error('the void recorded no hold')
      return hold
    },

    list(walletId, query) {
      const filter = { walletId, limit: query.limit ?? 10, before: query.before, after: query.after, status: query.status }
      return holds.listHolds(db, { ...filter, direction: query.direction }, clock())
    },

    async find(walletId, holdId) {
      const hold = await holds.findHold(db, holdId, clock())
      if (!hold || (hold.sending_wallet_id !== walletId && hold.receiving_wallet_id !== walletId))
        throw new AppError('H000', `no hold ${holdId} of this wallet`)
      return hold
    },

    async expireDue(limit) {
      let expired = 0
      for (const holdId of await holds.findDueHolds(db, clock(), limit)) {
        const found = await holds.findHold(db, holdId, clock())
        if (!found) continue
        const done = await inTransaction(db, async (trx) => {
          await takeWalletTurns(trx, [found.sending_wallet_id, found.receiving_wallet_id])
          return expireLocked(trx, holdId)
        })
        if (done) expired++
      }
      return expired
    },

    async findCounterparties(reader, walletId) {
      return [...new Set((await holds.findPendingHoldsOf(reader, walletId)).map((hold) => hold.counterparty))]
    },

    async settleAllOf(trx, walletId) {
      const pending = await holds.findPendingHoldsOf(trx, walletId)
      await takeWalletTurns(trx, [walletId, ...pending.map((hold) => hold.counterparty)])
      for (const { id } of pending) {
        const now = clock()
        const locked = await holds.lockHold(trx, id, now)
        if (!locked?.unsettled) continue
        const { hold } = locked
        if (hold.status === 'pending') await applyMove(trx, releaseOf(hold, 'voided', now), events, clock)
        else await expireLocked(trx, id)
      }
    },
  }
}
