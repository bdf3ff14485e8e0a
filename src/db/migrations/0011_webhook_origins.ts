import { sql, type Kysely } from 'kysely'

/**
 * Webhook delivery per receiving origin (`docs/webhooks.md#delivery-at-scale`): `webhooks.origin`,
 * a partial index of each wallet's pending deliveries for the claim, and one of leased deliveries.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .alterTable('webhooks')
    .addColumn('origin', 'text', (col) => col.notNull().defaultTo(''))
    .execute()
  const hooks: { wallet_id: number; url: string }[] = await db.selectFrom('webhooks').select(['wallet_id', 'url']).execute()
  for (const hook of hooks) {
    let origin = ''
    try {
      origin = new URL(hook.url).origin
    } catch {
      // Checked when set; an unparsable one keeps the default.
    }
    await db.updateTable('webhooks').set({ origin }).where('wallet_id', '=', hook.wallet_id).execute()
  }
  await db.schema.createIndex('webhooks_origin').on('webhooks').columns(['origin', 'wallet_id']).execute()
  await db.schema
    .createIndex('webhook_deliveries_pending')
    .on('webhook_deliveries')
    .columns(['wallet_id', 'next_attempt_at', 'id'])
    .where(sql.ref('status'), '=', sql.lit('pending'))
    .execute()
  await db.schema
    .createIndex('webhook_deliveries_leased')
    .on('webhook_deliveries')
    .column('lease_until')
    .where(sql.ref('lease_until'), 'is not', null)
    .execute()
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropIndex('webhook_deliveries_leased').execute()
  await db.schema.dropIndex('webhook_deliveries_pending').execute()
  await db.schema.dropIndex('webhooks_origin').execute()
  await db.schema.alterTable('webhooks').dropColumn('origin').execute()
}
