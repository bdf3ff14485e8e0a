import type { Executor, Trx } from '../db/database.ts'
import { sql } from 'kysely'
import { coalescedStatement } from '../db/coalesce.ts'
import { forUpdate, holdRow, isPostgres, nowIso, readRows } from '../db/dialect.ts'
import type { AssetRow } from '../db/tables.ts'
import { compareAssetNames, MINT_WALLET_ID, type Asset, type TransactionKind } from './ledger.types.ts'
import { expiredOf, expiringOf, type Lot } from './lots.ts'
import { findHeld, findLots, holdingKey } from './moves.repository.ts'
import { spendable } from './spendable.ts'

export function toAsset(row: Pick<AssetRow, 'id' | 'name' | 'value'>): Asset {
  return { id: row.id, name: row.name, value: row.value }
}

export async function listAssets(db: Executor): Promise<Asset[]> {
  const rows = await db.selectFrom('assets').select(['id', 'name', 'value']).where('deleted_at', 'is', null).orderBy('id').execute()
  return rows.map(toAsset)
}

export async function findAssetById(db: Executor, assetId: number): Promise<Asset | undefined> {
  const row = await db
    .selectFrom('assets')
    .select(['id', 'name', 'value'])
    .where('id', '=', assetId)
    .where('deleted_at', 'is', null)
    .executeTakeFirst()
  return row && toAsset(row)
}

/** Live assets by name, case-insensitively; the map is keyed by the lower-cased name. */
export async function findAssetsByNames(db: Executor, names: string[]): Promise<Map<string, Asset>> {
  const keys = [...new Set(names.map((name) => name.toLowerCase()))]
  if (keys.length === 0) return new Map()
  const rows = await db
    .selectFrom('assets')
    .select(['id', 'name', 'value', 'name_key'])
    .where('name_key', 'in', keys)
    .where('deleted_at', 'is', null)
    .execute()
  return new Map(rows.map((row) => [row.name_key, toAsset(row)]))
}

/** The live asset of this name (case-insensitive); lookups of concurrent requests share one query (`coalesce.ts`). */
const assetByKey = coalescedStatement(
  'select id, name, value, name_key from assets where name_key = $keys and deleted_at is null',
  'text',
  (row: Pick<AssetRow, 'id' | 'name' | 'value' | 'name_key'>) => row.name_key,
)

export async function findAssetByName(db: Executor, name: string): Promise<Asset | undefined> {
  const row = await assetByKey(db, name.toLowerCase())
  return row && toAsset(row)
}

export async function insertAsset(db: Executor, name: string, value: number): Promise<Asset> {
  const row = await db
    .insertInto('assets')
    .values({ name, name_key: name.toLowerCase(), value, created_at: nowIso(), deleted_at: null })
    .returning(['id', 'name', 'value'])
    .executeTakeFirstOrThrow()
  return toAsset(row)
}

export async function updateAsset(db: Executor, assetId: number, changes: { name?: string; value?: number }): Promise<Asset | undefined> {
  const set = changes.name === undefined ? { value: changes.value } : { name: changes.name, name_key: changes.name.toLowerCase() }
  const row = await db
    .updateTable('assets')
    .set(set)
    .where('id', '=', assetId)
    .where('deleted_at', 'is', null)
    .returning(['id', 'name', 'value'])
    .executeTakeFirst()
  return row && toAsset(row)
}

/** Whether any wallet holds the asset: mint's holding is not zero, or (credit) debts and claims cancel out in it. */
export async function isAssetHeld(db: Executor, assetId: number): Promise<boolean> {
  if ((await findHolding(db, MINT_WALLET_ID, assetId)) !== 0) return true
  const lent = await db.selectFrom('credit_limits').select('id').where('asset_id', '=', assetId).limit(1).executeTakeFirst()
  if (!lent) return false
  const held = await db
    .selectFrom('holdings')
    .select('wallet_id')
    .where('asset_id', '=', assetId)
    .where('wallet_id', '<>', MINT_WALLET_ID)
    .where('quantity', '<>', 0)
    .limit(1)
    .executeTakeFirst()
  return held !== undefined
}

/** Locks the live asset row for deleting or marking it; undefined when it is gone. */
export async function lockAsset(trx: Trx, assetId: number): Promise<Asset | undefined> {
  const query = trx.selectFrom('assets').select(['id', 'name', 'value']).where('id', '=', assetId).where('deleted_at', 'is', null)
  const row = await forUpdate(query, trx).executeTakeFirst()
  return row && toAsset(row)
}

/** Holds the asset row against its deletion, waiting for one in progress; read the asset after it. */
export async function holdAsset(trx: Trx, assetId: number): Promise<void> {
  await holdRow(trx, 'assets', assetId)
}

/** Whether the asset has ever been issued with `expires_at` (`markAssetExpiring`). */
export async function isAssetExpiring(db: Executor, assetId: number): Promise<boolean> {
  const row = await db.selectFrom('assets').select('expiring').where('id', '=', assetId).executeTakeFirst()
  return Number(row?.expiring ?? 0) === 1
}

/** Whether a wallet (mint aside) has a credit limit on the asset, or owes some of it. */
export async function hasCredit(db: Executor, assetId: number): Promise<boolean> {
  const row = await db
    .selectFrom('holdings')
    .select('wallet_id')
    .where('asset_id', '=', assetId)
    .where('wallet_id', '<>', MINT_WALLET_ID)
    .where((eb) => eb.or([eb('credit_limit', '>', 0), eb('quantity', '<', 0)]))
    .limit(1)
    .executeTakeFirst()
  return row !== undefined
}

/** Marks the asset as one that has had an issuance with `expires_at`. */
export async function markAssetExpiring(db: Executor, assetId: number): Promise<void> {
  await db.updateTable('assets').set({ expiring: 1 }).where('id', '=', assetId).where('expiring', '=', 0).execute()
}

/** Marks the asset deleted and frees its name; the row stays for the history that names it. */
export async function markAssetDeleted(db: Executor, assetId: number): Promise<void> {
  await db
    .updateTable('assets')
    .set((eb) => ({
      deleted_at: nowIso(),
      name_key: eb.fn<string>('concat', [eb.ref('name_key'), eb.cast(eb.val('#deleted#'), 'text'), eb.cast(eb.ref('id'), 'text')]),
    }))
    .where('id', '=', assetId)
    .execute()
}

/** Written once per dialect: a hot polled read, where Kysely cost as much as SQLite (`docs/performance.md#reads`). */
const HOLDINGS_SQLITE =
  'select a.id, a.name, a.value, h.quantity, h.wallet_id, h.asset_id, h.held, h.credit_limit, h.dated ' +
  'from holdings h inner join assets a on a.id = h.asset_id where h.wallet_id = ? and (h.quantity <> 0 or h.held > 0 or h.credit_limit > 0)'
const HOLDINGS_POSTGRES = HOLDINGS_SQLITE.replace('?', '$1')

type HoldingRow = Pick<AssetRow, 'id' | 'name' | 'value'> & {
  quantity: number
  wallet_id: number
  asset_id: number
  held: number
  credit_limit: number
  dated: number
}

/**
 * Holdings not zero, held or on credit, by asset name, each with what pending holds reserve of it,
 * its `credit_limit` and its units with an expiry; units expired by `now` are not counted, whether
 * or not their expiry is written.
 */
export async function listHoldings(db: Executor, walletId: number, now: string) {
  const rows = await readRows<HoldingRow>(db, isPostgres(db) ? HOLDINGS_POSTGRES : HOLDINGS_SQLITE, [walletId])
  rows.sort((a, b) => compareAssetNames(a.name, b.name) || a.id - b.id)
  const held = await findHeld(db, rows, [], now)
  const dated = rows.filter((row) => Number(row.dated) === 1)
  const lots = dated.length === 0 ? new Map<string, Lot[]>() : (await findLots(db, dated, [], now)).lots
  return rows.flatMap((row) => {
    const key = holdingKey(walletId, row.id)
    const reserved = held.get(key) ?? 0
    const quantity = Number(row.quantity) - expiredOf(lots.get(key), now)
    const creditLimit = Number(row.credit_limit)
    if (quantity === 0 && reserved === 0 && creditLimit === 0) return []
    return [{ asset: toAsset(row), quantity, held: reserved, credit_limit: creditLimit, expiring: expiringOf(lots.get(key), now) }]
  })
}

/** Holdings not zero at `asOf`: the last running balance of each asset, with the credit limit set last before it. */
export async function listHoldingsAsOf(db: Executor, walletId: number, asOf: string) {
  const rows = await db
    .selectFrom('holdings')
    .innerJoin('assets', 'assets.id', 'holdings.asset_id')
    .select((eb) => [
      'assets.id',
      'assets.name',
      'assets.value',
      'holdings.dated',
      eb
        .selectFrom('running_balances')
        .select('running_balances.quantity')
        .where('running_balances.wallet_id', '=', walletId)
        .whereRef('running_balances.asset_id', '=', 'holdings.asset_id')
        .where('running_balances.created_at', '<=', asOf)
        .orderBy('running_balances.created_at', 'desc')
        .orderBy('running_balances.transaction_id', 'desc')
        .limit(1)
        .as('quantity'),
      eb
        .selectFrom('credit_limits')
        .select('credit_limits.credit_limit')
        .where('credit_limits.wallet_id', '=', walletId)
        .whereRef('credit_limits.asset_id', '=', 'holdings.asset_id')
        .where('credit_limits.set_at', '<=', asOf)
        .orderBy('credit_limits.id', 'desc')
        .limit(1)
        .as('credit_limit'),
    ])
    .where('holdings.wallet_id', '=', walletId)
    .execute()
  const lapsed = rows.some((row) => Number(row.dated) === 1) ? await findExpiredAsOf(db, walletId, asOf) : new Map<number, number>()
  const then = rows
    .map((row) => ({ ...row, quantity: row.quantity === null ? 0 : Number(row.quantity) - (lapsed.get(row.id) ?? 0) }))
    .filter((row) => row.quantity !== 0)
  then.sort((a, b) => compareAssetNames(a.name, b.name) || a.id - b.id)
  return then.map((row) => ({
    asset: toAsset(row),
    quantity: row.quantity,
    held: 0,
    credit_limit: Number(row.credit_limit ?? 0),
    expiring: [],
  }))
}

/**
 * By asset, the wallet's units that had expired by `asOf` and were still in its holding then
 * (their expiry not yet written): its units by expiry at that instant, from what its transactions
 * moved (`transaction_lots`), for the instants that had passed.
 */
async function findExpiredAsOf(db: Executor, walletId: number, asOf: string): Promise<Map<number, number>> {
  const { rows } = await sql<{ asset_id: number; quantity: number | string }>`
    select asset_id, sum(quantity) as quantity from (
      select l.asset_id, l.expires_at,
        sum(case when t.receiving_wallet_id = ${walletId} then l.quantity else -l.quantity end) as quantity
      from transactions t join transaction_lots l on l.transaction_id = t.id
      where (t.sending_wallet_id = ${walletId} or t.receiving_wallet_id = ${walletId})
        and t.created_at <= ${asOf} and l.expires_at <= ${asOf}
      group by l.asset_id, l.expires_at
    ) as by_lot where quantity > 0 group by asset_id`.execute(db)
  return new Map(rows.map((row) => [Number(row.asset_id), Number(row.quantity)]))
}

async function findHolding(db: Executor, walletId: number, assetId: number): Promise<number> {
  const row = await db
    .selectFrom('holdings')
    .select('quantity')
    .where('wallet_id', '=', walletId)
    .where('asset_id', '=', assetId)
    .executeTakeFirst()
  return row?.quantity ?? 0
}

/**
 * What the wallet may spend of the asset now (`spendable.ts`: what it owns less expired units and
 * what pending, unexpired holds reserve, plus its credit limit unless it is a burn). For anything
 * that must know before it moves (a burn of everything); the move itself checks again under the turns.
 */
export async function findSpendable(db: Executor, walletId: number, assetId: number, kind: TransactionKind, now: string): Promise<number> {
  const row = await db
    .selectFrom('holdings')
    .select(['wallet_id', 'asset_id', 'quantity', 'held', 'credit_limit', 'dated'])
    .where('wallet_id', '=', walletId)
    .where('asset_id', '=', assetId)
    .executeTakeFirst()
  if (!row) return 0
  const key = holdingKey(walletId, assetId)
  const held = await findHeld(db, [row], [], now)
  const expired = Number(row.dated) === 1 ? expiredOf((await findLots(db, [row], [], now)).lots.get(key), now) : 0
  return spendable({ quantity: Number(row.quantity), held: held.get(key) ?? 0, creditLimit: Number(row.credit_limit), expired }, kind)
}
