import type { Db, Trx } from '../db/database.ts'
import { inTransaction, nowIso } from '../db/dialect.ts'
import { AppError } from '../http/errors.ts'
import { takeWalletTurns, type Ledger } from '../ledger/ledger.service.ts'
import {
  MINT_WALLET_ID,
  type Asset,
  type EventWriter,
  type HoldingChange,
  type HoldingState,
  type WalletEvent,
} from '../ledger/ledger.types.ts'
import { spendable } from '../ledger/spendable.ts'
import * as repository from './monitors.repository.ts'

/** A balance monitor as the API answers it. */
export interface Monitor {
  id: number
  asset: string
  below: number | null
  above: number | null
  state: 'normal' | 'crossed'
  created_at: string
}

/** Most monitors on one wallet. */
const MAX_MONITORS = 20

type Thresholds = { below: number | null; above: number | null }

/** Crossed: what can be spent is under `below`, or over `above`. */
function isCrossed(monitor: Thresholds, spendable: number): boolean {
  return monitor.below !== null ? spendable < Number(monitor.below) : spendable > Number(monitor.above)
}

/**
 * What the wallet can spend of a holding, by the ledger's one rule (`spendable.ts`): what it owns
 * less what pending holds reserve, plus its credit. Units that expire count until their expiry is
 * written (a move the monitors see).
 */
function canSpend(holding: HoldingState): number {
  return spendable({ quantity: holding.quantity, held: holding.held, creditLimit: holding.creditLimit, expired: 0 }, 'transfer')
}

function toMonitor(
  row: { id: number; below: number | null; above: number | null; state: string; created_at: string },
  asset: string,
): Monitor {
  return {
    id: Number(row.id),
    asset,
    below: row.below === null ? null : Number(row.below),
    above: row.above === null ? null : Number(row.above),
    state: row.state as Monitor['state'],
    created_at: row.created_at,
  }
}

export interface MonitorsService {
  /**
   * POST /wallet/monitors: its state as things stand, decided while holding the wallet's turn so
   * that no move slips between the reading and the record. Throws G000 (not exactly one of
   * `below` and `above`), I001 (unknown asset), M001 (a 21st monitor).
   */
  create(walletId: number, body: { asset: string; below?: number; above?: number }): Promise<Monitor>
  list(walletId: number): Promise<Monitor[]>
  /** DELETE /wallet/monitors/{id}. Throws M000. */
  remove(walletId: number, id: number): Promise<void>
}

export function createMonitorsService({ db, ledger }: { db: Db; ledger: Pick<Ledger, 'assets'> }): MonitorsService {
  return {
    async create(walletId, body) {
      if ((body.below === undefined) === (body.above === undefined)) throw new AppError('G000', 'give exactly one of below and above')
      const asset = await ledger.assets.findLiveAssetByName(body.asset)
      if (!asset) throw new AppError('I001', `no asset named "${body.asset}"`)
      const thresholds = { below: body.below ?? null, above: body.above ?? null }
      return inTransaction(db, async (trx) => {
        await takeWalletTurns(trx, [walletId])
        if ((await repository.countMonitors(trx, walletId)) >= MAX_MONITORS)
          throw new AppError('M001', `a wallet has at most ${MAX_MONITORS} monitors`)
        const holding = await repository.findHolding(trx, walletId, asset.id)
        const row = { ...thresholds, state: isCrossed(thresholds, canSpend(holding)) ? 'crossed' : 'normal', created_at: nowIso() }
        const id = await repository.insertMonitor(trx, { wallet_id: walletId, asset_id: asset.id, ...row })
        return toMonitor({ id, ...row }, asset.name)
      })
    },
    async list(walletId) {
      return (await repository.listMonitors(db, walletId)).map((row) => toMonitor(row, row.asset_name))
    },
    async remove(walletId, id) {
      if (!(await repository.deleteMonitor(db, walletId, id))) throw new AppError('M000', `no monitor ${id}`)
    },
  }
}

/**
 * The hook the ledger calls with every batch's changes of holdings, in the batch's transaction
 * (`EventWriter` watchBalances): each monitor on a changed holding follows the changes in order,
 * and each time it goes from normal to crossed or back, its new state is stored and one
 * `balance.crossed` or `balance.restored` event is recorded, all with the move that caused it.
 * The ledger holds the wallets' turns, so no two batches follow one monitor at once.
 */
export function watchBalances(events: Pick<EventWriter, 'recordEvents'>): (trx: Trx, changes: HoldingChange[]) => Promise<void> {
  return async (trx, changes) => {
    // Each holding's changes in order, and the least and most any of them can spend after a move:
    // only a monitor whose threshold lies between can change, and only those are read.
    const byHolding = new Map<string, HoldingChange[]>()
    const walletIds = new Set<number>()
    const assetIds = new Set<number>()
    const reach = { low: Infinity, high: -Infinity }
    for (const change of changes) {
      if (change.walletId === MINT_WALLET_ID) continue
      const key = `${change.walletId}:${change.asset.id}`
      const list = byHolding.get(key)
      if (list) list.push(change)
      else byHolding.set(key, [change])
      walletIds.add(change.walletId)
      assetIds.add(change.asset.id)
      const value = canSpend(change.after)
      reach.low = Math.min(reach.low, value)
      reach.high = Math.max(reach.high, value)
    }
    if (byHolding.size === 0) return
    const monitors = await repository.findWatching(trx, [...walletIds], [...assetIds], reach)
    if (monitors.length === 0) return
    const recorded: WalletEvent[] = []
    const states: { id: number; state: string }[] = []
    const at = nowIso()
    for (const monitor of monitors) {
      let state = monitor.state
      for (const change of byHolding.get(`${monitor.wallet_id}:${monitor.asset_id}`) ?? []) {
        const next = isCrossed(monitor, canSpend(change.after)) ? 'crossed' : 'normal'
        if (next === state) continue
        state = next
        recorded.push({
          walletId: change.walletId,
          type: next === 'crossed' ? 'balance.crossed' : 'balance.restored',
          createdAt: at,
          data: { monitor: toMonitor({ ...monitor, state }, change.asset.name), holding: holdingOf(change.asset, change.after) },
        })
      }
      if (state !== monitor.state) states.push({ id: Number(monitor.id), state })
    }
    if (recorded.length === 0) return
    await repository.setMonitorStates(trx, states)
    await events.recordEvents(trx, recorded)
  }
}

function holdingOf(asset: Asset, holding: HoldingState) {
  return { asset, quantity: holding.quantity, held: holding.held, credit_limit: holding.creditLimit }
}
