import { sql, type Kysely } from 'kysely'
import { isPostgres } from '../dialect.ts'

/** The reserved `mint` wallet: the first row, so its id is 1 on both dialects (a migration keeps its own copy). */
const MINT_WALLET_ID = 1
const MINT_ADDRESS = 'mint'

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  const idType = isPostgres(db) ? 'bigserial' : 'integer'
  const bigint = 'bigint'
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  const id = (col: any) => (isPostgres(db) ? col.primaryKey() : col.primaryKey().autoIncrement())

  await db.schema
    .createTable('users')
    .addColumn('id', idType, id)
    .addColumn('username', 'text', (col) => col.notNull())
    .addColumn('username_key', 'text', (col) => col.notNull().unique())
    .addColumn('password_hash', 'text', (col) => col.notNull())
    .addColumn('primary_wallet_id', bigint)
    .addColumn('created_at', 'text', (col) => col.notNull())
    .execute()

  await db.schema
    .createTable('wallets')
    .addColumn('id', idType, id)
    .addColumn('address', 'text', (col) => col.notNull().unique())
    .addColumn('user_id', bigint, (col) => col.references('users.id'))
    .addColumn('created_at', 'text', (col) => col.notNull())
    .addColumn('deleted_at', 'text')
    .execute()
  await db.schema.createIndex('wallets_user_id').on('wallets').column('user_id').execute()

  await db.schema
    .createTable('user_sessions')
    .addColumn('id', idType, id)
    .addColumn('user_id', bigint, (col) => col.notNull().references('users.id'))
    .addColumn('wallet_id', bigint, (col) => col.notNull().references('wallets.id'))
    .addColumn('token_hash', 'text', (col) => col.notNull().unique())
    .addColumn('created_at', 'text', (col) => col.notNull())
    .addColumn('last_used_at', 'text', (col) => col.notNull())
    .addColumn('expires_at', 'text', (col) => col.notNull())
    .execute()
  await db.schema.createIndex('user_sessions_user_id').on('user_sessions').column('user_id').execute()
  await db.schema.createIndex('user_sessions_wallet_id').on('user_sessions').column('wallet_id').execute()

  await db.schema
    .createTable('wallet_users')
    .addColumn('wallet_id', bigint, (col) => col.notNull().references('wallets.id'))
    .addColumn('user_id', bigint, (col) => col.notNull().references('users.id'))
    .addColumn('created_at', 'text', (col) => col.notNull())
    .addPrimaryKeyConstraint('wallet_users_pk', ['wallet_id', 'user_id'])
    .execute()
  await db.schema.createIndex('wallet_users_user_id').on('wallet_users').column('user_id').execute()

  await db.schema
    .createTable('wallet_sessions')
    .addColumn('id', idType, id)
    .addColumn('wallet_id', bigint, (col) => col.notNull().references('wallets.id'))
    .addColumn('user_id', bigint, (col) => col.notNull().references('users.id'))
    .addColumn('name', 'text', (col) => col.notNull())
    .addColumn('token_hash', 'text', (col) => col.notNull().unique())
    .addColumn('created_at', 'text', (col) => col.notNull())
    .addColumn('last_used_at', 'text')
    .execute()
  await db.schema.createIndex('wallet_sessions_wallet_id').on('wallet_sessions').column('wallet_id').execute()

  await db.schema
    .createTable('assets')
    .addColumn('id', idType, id)
    .addColumn('name', 'text', (col) => col.notNull())
    .addColumn('name_key', 'text', (col) => col.notNull().unique())
    .addColumn('value', 'double precision', (col) => col.notNull())
    .addColumn('created_at', 'text', (col) => col.notNull())
    // Deleted assets keep their row so that old transactions still name them.
    .addColumn('deleted_at', 'text')
    .execute()

  await db.schema
    .createTable('holdings')
    .addColumn('wallet_id', bigint, (col) => col.notNull().references('wallets.id'))
    .addColumn('asset_id', bigint, (col) => col.notNull().references('assets.id'))
    .addColumn('quantity', bigint, (col) => col.notNull())
    .addPrimaryKeyConstraint('holdings_pk', ['wallet_id', 'asset_id'])
    // The database itself refuses an overdraft; only the mint wallet may go negative.
    .addCheckConstraint('holdings_not_negative', sql.raw(`quantity >= 0 or wallet_id = ${MINT_WALLET_ID}`))
    .execute()
  await db.schema.createIndex('holdings_asset_id').on('holdings').columns(['asset_id', 'quantity']).execute()

  await db.schema
    .createTable('transactions')
    .addColumn('id', idType, id)
    .addColumn('sending_wallet_id', bigint, (col) => col.notNull().references('wallets.id'))
    .addColumn('receiving_wallet_id', bigint, (col) => col.notNull().references('wallets.id'))
    .addColumn('memo', 'text', (col) => col.notNull())
    .addColumn('created_at', 'text', (col) => col.notNull())
    .addCheckConstraint('transactions_distinct_wallets', sql`sending_wallet_id <> receiving_wallet_id`)
    .execute()
  await db.schema.createIndex('transactions_sending').on('transactions').columns(['sending_wallet_id', 'id']).execute()
  await db.schema.createIndex('transactions_receiving').on('transactions').columns(['receiving_wallet_id', 'id']).execute()

  await db.schema
    .createTable('transaction_assets')
    .addColumn('transaction_id', bigint, (col) => col.notNull().references('transactions.id'))
    .addColumn('asset_id', bigint, (col) => col.notNull().references('assets.id'))
    .addColumn('quantity', bigint, (col) => col.notNull())
    .addPrimaryKeyConstraint('transaction_assets_pk', ['transaction_id', 'asset_id'])
    .addCheckConstraint('transaction_assets_positive', sql`quantity > 0`)
    .execute()
  await db.schema.createIndex('transaction_assets_asset').on('transaction_assets').columns(['asset_id', 'transaction_id']).execute()

  await db.schema
    .createTable('idempotency_keys')
    .addColumn('wallet_id', bigint, (col) => col.notNull().references('wallets.id'))
    .addColumn('key', 'text', (col) => col.notNull())
    .addColumn('request_hash', 'text', (col) => col.notNull())
    .addColumn('status_code', 'integer', (col) => col.notNull())
    .addColumn('response_body', 'text', (col) => col.notNull())
    .addColumn('created_at', 'text', (col) => col.notNull())
    .addPrimaryKeyConstraint('idempotency_keys_pk', ['wallet_id', 'key'])
    .execute()
  await db.schema.createIndex('idempotency_keys_created').on('idempotency_keys').column('created_at').execute()

  await db.schema
    .createTable('webhooks')
    .addColumn('wallet_id', bigint, (col) => col.primaryKey().references('wallets.id'))
    .addColumn('url', 'text', (col) => col.notNull())
    .addColumn('secret', 'text', (col) => col.notNull())
    .addColumn('created_at', 'text', (col) => col.notNull())
    .execute()

  await db.schema
    .createTable('events')
    .addColumn('id', idType, id)
    .addColumn('event_id', 'text', (col) => col.notNull().unique())
    .addColumn('wallet_id', bigint, (col) => col.notNull().references('wallets.id'))
    .addColumn('type', 'text', (col) => col.notNull())
    .addColumn('transaction_id', bigint, (col) => col.notNull().references('transactions.id'))
    .addColumn('payload', 'text', (col) => col.notNull())
    .addColumn('created_at', 'text', (col) => col.notNull())
    .execute()
  await db.schema.createIndex('events_wallet').on('events').columns(['wallet_id', 'id']).execute()

  await db.schema
    .createTable('webhook_deliveries')
    .addColumn('id', idType, id)
    .addColumn('event_id', bigint, (col) => col.notNull().references('events.id'))
    .addColumn('wallet_id', bigint, (col) => col.notNull().references('wallets.id'))
    .addColumn('url', 'text', (col) => col.notNull())
    .addColumn('status', 'text', (col) => col.notNull())
    .addColumn('attempts', 'integer', (col) => col.notNull())
    .addColumn('next_attempt_at', 'text')
    .addColumn('lease_until', 'text')
    .addColumn('last_status_code', 'integer')
    .addColumn('last_error', 'text')
    .addColumn('created_at', 'text', (col) => col.notNull())
    .addColumn('updated_at', 'text', (col) => col.notNull())
    .execute()
  await db.schema.createIndex('webhook_deliveries_due').on('webhook_deliveries').columns(['status', 'next_attempt_at']).execute()
  await db.schema.createIndex('webhook_deliveries_wallet').on('webhook_deliveries').columns(['wallet_id', 'id']).execute()

  await db.schema
    .createTable('webhook_attempts')
    .addColumn('id', idType, id)
    .addColumn('delivery_id', bigint, (col) => col.notNull().references('webhook_deliveries.id'))
    .addColumn('attempted_at', 'text', (col) => col.notNull())
    .addColumn('status_code', 'integer')
    .addColumn('latency_ms', 'integer', (col) => col.notNull())
    .addColumn('error', 'text')
    .execute()
  await db.schema.createIndex('webhook_attempts_delivery').on('webhook_attempts').columns(['delivery_id', 'id']).execute()

  const mint = await db
    .insertInto('wallets')
    .values({ address: MINT_ADDRESS, user_id: null, created_at: new Date().toISOString(), deleted_at: null })
    .returning('id')
    .executeTakeFirstOrThrow()
  if (Number(mint.id) !== MINT_WALLET_ID) throw new Error(`mint wallet got id ${mint.id}, expected ${MINT_WALLET_ID}`)
}
