import type { Kysely } from 'kysely'

/**
 * Every transfer updates two holdings, and this index made each update write index entries; the
 * I005 check reads mint's holding instead (non-zero exactly when some wallet holds the asset).
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.dropIndex('holdings_asset_id').execute()
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.createIndex('holdings_asset_id').on('holdings').columns(['asset_id', 'quantity']).execute()
}
