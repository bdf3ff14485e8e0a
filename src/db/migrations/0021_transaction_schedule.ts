import { sql, type Kysely } from 'kysely'

/**
 * `transactions.schedule_id`: the schedule whose run recorded the transaction (null otherwise),
 * written with the transaction; a partial index lists a schedule's transactions
 * (`GET /wallet/transactions?schedule_id=`).
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('transactions').addColumn('schedule_id', 'bigint').execute()
  await db.schema
    .createIndex('transactions_schedule')
    .on('transactions')
    .columns(['schedule_id', 'id'])
    .where(sql.ref('schedule_id'), 'is not', null)
    .execute()
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropIndex('transactions_schedule').execute()
  await db.schema.alterTable('transactions').dropColumn('schedule_id').execute()
}
