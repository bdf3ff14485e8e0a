import type { Executor, Trx } from '../db/database.ts'
import type { MonitorsTable } from '../db/tables.ts'
import type { Insertable, Selectable } from 'kysely'
import { anyOf } from '../db/dialect.ts'
import { sql } from 'kysely'

/** The SQL of balance monitors. */

export type MonitorRow = Selectable<MonitorsTable> & { asset_name: string }

const COLUMNS = [
  'monitors.id',
  'monitors.wallet_id',
  'monitors.asset_id',
  'monitors.below',
  'monitors.above',
  'monitors.state',
  'monitors.created_at',
  'assets.name as asset_name',
] as const

export function listMonitors(db: Executor, walletId: number): Promise<MonitorRow[]> {
  return db
    .selectFrom('monitors')
    .innerJoin('assets', 'assets.id', 'monitors.asset_id')
    .select(COLUMNS)
    .where('monitors.wallet_id', '=', walletId)
    .orderBy('monitors.id')
    .execute()
}

export async function countMonitors(trx: Trx, walletId: number): Promise<number> {
  const row = await trx
    .selectFrom('monitors')
    .select((eb) => eb.fn.countAll<number>().as('count'))
    .where('wallet_id', '=', walletId)
    .executeTakeFirstOrThrow()
  return Number(row.count)
}

export async function insertMonitor(trx: Trx, row: Insertable<MonitorsTable>): Promise<number> {
  const inserted = await trx.insertInto('monitors').values(row).returning('id').executeTakeFirstOrThrow()
  return Number(inserted.id)
}

/** Deletes the wallet's monitor; false when it has none of that id. */
export async function deleteMonitor(db: Executor, walletId: number, id: number): Promise<boolean> {
  const result = await db.deleteFrom('monitors').where('id', '=', id).where('wallet_id', '=', walletId).executeTakeFirst()
  return Number(result.numDeletedRows) > 0
}

/**
 * The monitors on these wallets and assets (the write path, holding the wallets' turns) whose
 * state a spendable value between `low` and `high` could change: a normal monitor whose `below`
 * is above `low` or whose `above` is under `high`, a crossed one the other way round. The rest
 * stay in the database, so a monitor far from its threshold costs the lookup alone.
 */
export async function findWatching(
  trx: Trx,
  walletIds: number[],
  assetIds: number[],
  { low, high }: { low: number; high: number },
): Promise<Selectable<MonitorsTable>[]> {
  const { rows } = await sql<Selectable<MonitorsTable>>`
    select id, wallet_id, asset_id, below, above, state, created_at from monitors
    where ${anyOf(trx, sql.ref('wallet_id'), walletIds)} and ${anyOf(trx, sql.ref('asset_id'), assetIds)}
      and case when state = 'normal' then below > ${low} or above < ${high} else below <= ${high} or above >= ${low} end
    order by id`.execute(trx)
  return rows
}

/** What the wallet owns of the asset and what pending holds reserve of it (zeros without a holding). */
export async function findHolding(
  trx: Trx,
  walletId: number,
  assetId: number,
): Promise<{ quantity: number; held: number; creditLimit: number }> {
  const row = await trx
    .selectFrom('holdings')
    .select(['quantity', 'held', 'credit_limit'])
    .where('wallet_id', '=', walletId)
    .where('asset_id', '=', assetId)
    .executeTakeFirst()
  return { quantity: Number(row?.quantity ?? 0), held: Number(row?.held ?? 0), creditLimit: Number(row?.credit_limit ?? 0) }
}

export async function setMonitorStates(trx: Trx, states: { id: number; state: string }[]): Promise<void> {
  for (const { id, state } of states) await trx.updateTable('monitors').set({ state }).where('id', '=', id).execute()
}
