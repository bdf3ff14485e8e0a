import type { Kysely } from 'kysely'

/**
 * Every transfer updates two holdings' quantities. The index on `(asset_id, quantity)` made each
 * of those updates write index entries too (and, on PostgreSQL, ruled out heap-only updates);
 * its one reader, the I005 check before an asset is deleted, now reads mint's holding instead,
 * which is non-zero exactly when some wallet holds the asset (holdings of an asset sum to zero).
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.dropIndex('holdings_asset_id').execute()
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.createIndex('holdings_asset_id').on('holdings').columns(['asset_id', 'quantity']).execute()
}
