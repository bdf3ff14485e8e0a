import { Migrator, type Migration, type MigrationProvider } from 'kysely'
import type { Db } from './database.ts'
import * as initial from './migrations/0001_initial.ts'
import * as usersPrimaryWalletIndex from './migrations/0002_users_primary_wallet_index.ts'
import * as holdingsWithoutAssetIndex from './migrations/0003_holdings_without_asset_index.ts'

/** Migrations live in code, in order; both dialects run the same ones. */
const migrations: Record<string, Migration> = {
  '0001_initial': initial,
  '0002_users_primary_wallet_index': usersPrimaryWalletIndex,
  '0003_holdings_without_asset_index': holdingsWithoutAssetIndex,
}

const provider: MigrationProvider = { getMigrations: async () => migrations }

/** Brings the schema up to date; throws on the first failing migration. */
export async function migrateToLatest(db: Db): Promise<string[]> {
  const migrator = new Migrator({ db, provider, migrationTableName: 'coffer_migrations', migrationLockTableName: 'coffer_migrations_lock' })
  const { error, results } = await migrator.migrateToLatest()
  if (error) throw error
  return (results ?? []).filter((result) => result.status === 'Success').map((result) => result.migrationName)
}
