import type { Db } from '../db/database.ts'
import { inTransaction, isUniqueViolation } from '../db/dialect.ts'
import { AppError } from '../http/errors.ts'
import * as repo from './assets.repository.ts'
import type { Asset } from './ledger.types.ts'

export interface AssetsServiceDeps {
  db: Db
}

export interface AssetsService {
  /** GET /assets: every live asset. */
  listAssets(): Promise<Asset[]>
  /** A live asset by id, or undefined. */
  findLiveAssetById(assetId: number): Promise<Asset | undefined>
  /** A live asset by name, case-insensitively, or undefined. */
  findLiveAssetByName(name: string): Promise<Asset | undefined>
  /** POST /assets. Throws I004 when the name exists, case-insensitively. */
  createAsset(name: string, value: number): Promise<Asset>
  /** PUT /assets/{id}/name. Throws I000, I004. */
  renameAsset(assetId: number, name: string): Promise<Asset>
  /** PUT /assets/{id}/value. Throws I000. */
  revalueAsset(assetId: number, value: number): Promise<Asset>
  /**
   * DELETE /assets/{id}. Throws I000, and I005 while any wallet holds some. The asset row is locked,
   * so an issuance of it either commits first and is seen, or waits and finds the asset deleted.
   */
  deleteAsset(assetId: number): Promise<void>
}

async function withUniqueName<T>(name: string, work: () => Promise<T>): Promise<T> {
  try {
    return await work()
  } catch (error) {
    if (isUniqueViolation(error)) throw new AppError('I004', `an asset named "${name}" exists`)
    throw error
  }
}

export function createAssetsService({ db }: AssetsServiceDeps): AssetsService {
  return {
    listAssets: () => repo.listAssets(db),
    findLiveAssetById: (assetId) => repo.findAssetById(db, assetId),
    async findLiveAssetByName(name) {
      return (await repo.findAssetsByNames(db, [name])).get(name.toLowerCase())
    },
    createAsset: (name, value) => withUniqueName(name, () => repo.insertAsset(db, name, value)),
    async renameAsset(assetId, name) {
      const asset = await withUniqueName(name, () => repo.updateAsset(db, assetId, { name }))
      if (!asset) throw new AppError('I000', `no asset ${assetId}`)
      return asset
    },
    async revalueAsset(assetId, value) {
      const asset = await repo.updateAsset(db, assetId, { value })
      if (!asset) throw new AppError('I000', `no asset ${assetId}`)
      return asset
    },
    async deleteAsset(assetId) {
      await inTransaction(db, async (trx) => {
        if (!(await repo.lockAsset(trx, assetId))) throw new AppError('I000', `no asset ${assetId}`)
        if (await repo.isAssetHeld(trx, assetId)) throw new AppError('I005', 'burn every holding of it first')
        await repo.markAssetDeleted(trx, assetId)
      })
    },
  }
}
