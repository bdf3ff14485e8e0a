import { sql, type Kysely } from 'kysely'

/**
 * Webhook delivery per receiving origin (`docs/webhooks.md#delivery-at-scale`):
 *
 * - `webhooks.origin`: the origin (`scheme://host:port`) of the webhook's URL, written when the
 *   webhook is set. Deliveries are queued, limited and backed off per origin; a delivery's origin is
 *   its wallet's webhook's (a pending delivery always goes to the wallet's current webhook). Rows set
 *   before this migration get theirs here; `''` (the default) would only group a row written
 *   without one, which then still gets delivered.
 * - `webhook_deliveries_pending`: one wallet's due deliveries, oldest first, for the worker's claim,
 *   which takes a few from each wallet of an origin so that none waits behind another's backlog.
 *   Partial: only pending rows, so delivered ones leave it.
 * - `webhook_deliveries_leased`: the deliveries under a lease (in flight on some instance), counted
 *   per origin at each claim so that no origin's limit is exceeded across instances.
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
      // Every stored URL was checked when it was set; an unparsable one keeps the default.
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
