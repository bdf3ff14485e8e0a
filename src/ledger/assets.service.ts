import type { Db } from '../db/database.ts'
import { inTransaction, isUniqueViolation } from '../db/dialect.ts'
import { AppError } from '../http/errors.ts'
import * as repo from './assets.repository.ts'

export function listAssets(db: Db) {
  return repo.listAssets(db)
}

/** A live asset by id, or undefined. */
export function findLiveAssetById(db: Db, assetId: number) {
  return repo.findAssetById(db, assetId)
}

/** A live asset by name, case-insensitively, or undefined. */
export async function findLiveAssetByName(db: Db, name: string) {
  return (await repo.findAssetsByNames(db, [name])).get(name.toLowerCase())
}

async function withUniqueName<T>(name: string, work: () => Promise<T>): Promise<T> {
  try {
    return await work()
  } catch (error) {
    if (isUniqueViolation(error)) throw new AppError('I004', `an asset named "${name}" exists`)
    throw error
  }
}

/** POST /assets. Throws I004 when the name exists, case-insensitively. */
export function createAsset(db: Db, name: string, value: number) {
  return withUniqueName(name, () => repo.insertAsset(db, name, value))
}

/** PUT /assets/{id}/name. Throws I000, I004. */
export async function renameAsset(db: Db, assetId: number, name: string) {
  const asset = await withUniqueName(name, () => repo.updateAsset(db, assetId, { name }))
  if (!asset) throw new AppError('I000', `no asset ${assetId}`)
  return asset
}

/** PUT /assets/{id}/value. Throws I000. */
export async function revalueAsset(db: Db, assetId: number, value: number) {
  const asset = await repo.updateAsset(db, assetId, { value })
  if (!asset) throw new AppError('I000', `no asset ${assetId}`)
  return asset
}

/**
 * DELETE /assets/{id}. Throws I000, and I005 while any wallet holds some. Holds the asset row for
 * update, so an issuance of it (the one way to create holdings of an asset nobody holds) either
 * commits first and is seen here, or waits and then finds the asset deleted.
 */
export async function deleteAsset(db: Db, assetId: number): Promise<void> {
  await inTransaction(db, async (trx) => {
    if (!(await repo.lockAsset(trx, assetId))) throw new AppError('I000', `no asset ${assetId}`)
    if (await repo.isAssetHeld(trx, assetId)) throw new AppError('I005', 'burn every holding of it first')
    await repo.markAssetDeleted(trx, assetId)
  })
}
