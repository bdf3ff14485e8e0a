import { sql, type Kysely } from 'kysely'
import { isPostgres } from '../dialect.ts'

/**
 * Transaction kinds, links and metadata (`docs/decisions.md#transaction-kinds-and-metadata`).
 * Existing rows are classified from their sides (the memo "wallet deleted" marks a sweep). Partial
 * indexes over the rare kinds and the `transaction_metadata` side table (one row per key per side,
 * and one for the whole journal as wallet 0) keep filtered pages as cheap as unfiltered ones;
 * stored bodies and idempotent answers gain `kind` and `metadata: {}`.
 */

const MINT_WALLET_ID = 1
const NOT_TRANSFER = sql<boolean>`kind <> 'transfer'`

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .alterTable('transactions')
    .addColumn('kind', 'text', (col) =>
      col
        .notNull()
        .defaultTo('transfer')
        .check(sql`kind in ('transfer', 'issuance', 'burn', 'sweep', 'capture', 'reversal')`),
    )
    .execute()
  await db.schema.alterTable('transactions').addColumn('reverses', 'bigint').execute()
  await db.schema.alterTable('transactions').addColumn('hold_id', 'bigint').execute()
  await db.schema.alterTable('transactions').addColumn('metadata', 'text').execute()

  await sql`update transactions set kind = 'issuance' where sending_wallet_id = ${MINT_WALLET_ID}`.execute(db)
  await sql`update transactions set kind = 'burn' where receiving_wallet_id = ${MINT_WALLET_ID}`.execute(db)
  await sql`
    update transactions set kind = 'sweep'
    where memo = 'wallet deleted' and kind = 'transfer'
      and exists (select 1 from wallets where wallets.id = transactions.sending_wallet_id and wallets.deleted_at is not null)
      and not exists (select 1 from transactions as later
        where later.sending_wallet_id = transactions.sending_wallet_id and later.id > transactions.id)`.execute(db)

  await sql`
    update transactions set body = substr(body, 1, length(body) - 1) || ',"kind":"' || kind || '","metadata":{}}'
    where body is not null`.execute(db)
  const lacksKind = isPostgres(db) ? sql`strpos(response_body, ',"kind":"') = 0` : sql`instr(response_body, ',"kind":"') = 0`
  await sql`
    update idempotency_keys set response_body = substr(response_body, 1, length(response_body) - 1) || ',"kind":"transfer","metadata":{}}'
    where status_code = 201 and ${lacksKind}`.execute(db)

  await db.schema
    .createTable('transaction_metadata')
    .addColumn('wallet_id', 'bigint', (col) => col.notNull())
    .addColumn('key', 'text', (col) => col.notNull())
    .addColumn('value', 'text', (col) => col.notNull())
    .addColumn('transaction_id', 'bigint', (col) => col.notNull())
    .addPrimaryKeyConstraint('transaction_metadata_pk', ['wallet_id', 'key', 'value', 'transaction_id'])
    .execute()
  await db.schema
    .createIndex('transactions_sending_kind')
    .on('transactions')
    .columns(['sending_wallet_id', 'kind', 'id'])
    .where(NOT_TRANSFER)
    .execute()
  await db.schema
    .createIndex('transactions_receiving_kind')
    .on('transactions')
    .columns(['receiving_wallet_id', 'kind', 'id'])
    .where(NOT_TRANSFER)
    .execute()
  await db.schema.createIndex('transactions_kind').on('transactions').columns(['kind', 'id']).where(NOT_TRANSFER).execute()
  await db.schema
    .createIndex('transactions_reverses')
    .on('transactions')
    .column('reverses')
    .where(sql<boolean>`reverses is not null`)
    .execute()
}

/** Back to 0007 (tests): the fields leave the stored answers again; kinds, links and metadata are lost. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  for (const index of ['transactions_reverses', 'transactions_kind', 'transactions_receiving_kind', 'transactions_sending_kind'])
    await db.schema.dropIndex(index).execute()
  await db.schema.dropTable('transaction_metadata').execute()
  // The first `,"kind":"` is the ledger's: a string before it escapes its quotes.
  for (const [table, column] of [
    ['transactions', 'body'],
    ['idempotency_keys', 'response_body'],
  ] as const) {
    const start = isPostgres(db) ? sql`strpos(${sql.ref(column)}, ',"kind":"')` : sql`instr(${sql.ref(column)}, ',"kind":"')`
    await sql`update ${sql.table(table)} set ${sql.ref(column)} = substr(${sql.ref(column)}, 1, ${start} - 1) || '}'
      where ${start} > 0`.execute(db)
  }
  for (const column of ['metadata', 'hold_id', 'reverses', 'kind']) await db.schema.alterTable('transactions').dropColumn(column).execute()
}
