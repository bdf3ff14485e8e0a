import { sql, type Kysely } from 'kysely'
import { isPostgres } from '../dialect.ts'
import { derivedPublicId } from '../ids.ts'
import { rebuildSqliteTable } from './sqlite-rebuild.ts'

/**
 * A transaction's events are derived from its row instead of written as rows of their own
 * (`docs/webhooks.md#event-ids`): `transaction.sent` has the id 2 × the transaction's id,
 * `transaction.received` 2 × it + 1. The events that are still rows (a hold's, a schedule's run, a
 * monitor's crossing) take their ids the same way from a transaction id no transaction uses, so
 * every event of a wallet still counts up in commit order.
 *
 * `event_state` says from which transaction on the events are derived (the ones before keep the
 * rows they were written with, and the ids a stream has seen) and holds the random part that makes
 * a derived event's public id unique across stores. The transactions' ids jump past half the
 * largest event id, so that no derived id falls on an id already given. A delivery's `event_id` no
 * longer always names an event row: SQLite drops that reference (PostgreSQL's went in migration 0012).
 */

/** The reserved `mint` wallet (a migration keeps its own copy). */
const MINT_WALLET_ID = 1

const REFERENCED = '"event_id" bigint not null references "events" ("id")'
const PLAIN = '"event_id" bigint not null'

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('event_state')
    .addColumn('id', 'integer', (col) => col.primaryKey())
    .addColumn('derived_from', 'bigint', (col) => col.notNull())
    .addColumn('salt', 'text', (col) => col.notNull())
    .execute()
  const used = isPostgres(db)
    ? sql<{ last: string }>`select greatest(
        (select case when is_called then last_value else last_value - 1 end from transactions_id_seq),
        coalesce((select max(id) from transactions), 0),
        coalesce((select max(id) from events), 0) / 2) as last`
    : sql<{ last: number }>`select max(
        coalesce((select seq from sqlite_sequence where name = 'transactions'), 0),
        coalesce((select max(id) from transactions), 0),
        coalesce((select max(id) from events), 0) / 2) as last`
  const last = Number((await used.execute(db)).rows[0].last)
  if (isPostgres(db) && last > 0) await sql`select setval('transactions_id_seq', ${last})`.execute(db)
  const salt = Array.from(crypto.getRandomValues(new Uint8Array(4)), (byte) => byte.toString(16).padStart(2, '0')).join('')
  await db
    .insertInto('event_state')
    .values({ id: 1, derived_from: last + 1, salt })
    .execute()
  if (!isPostgres(db)) await rebuildSqliteTable(db, 'webhook_deliveries', REFERENCED, PLAIN)
}

/** Back: every derived event written as the row it would have been, the same id and public id, before the reference returns. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  const state = await db.selectFrom('event_state').select(['derived_from', 'salt']).where('id', '=', 1).executeTakeFirstOrThrow()
  for (let after = Number(state.derived_from) - 1; ;) {
    const rows: { id: number; sending_wallet_id: number; receiving_wallet_id: number; created_at: string }[] = await db
      .selectFrom('transactions')
      .select(['id', 'sending_wallet_id', 'receiving_wallet_id', 'created_at'])
      .where('id', '>', after)
      .where('body', 'is not', null)
      .orderBy('id')
      .limit(1_000)
      .execute()
    if (rows.length === 0) break
    const events = rows.flatMap((row) =>
      ([0, 1] as const)
        .map((side) => ({ side, walletId: Number(side === 0 ? row.sending_wallet_id : row.receiving_wallet_id) }))
        .filter(({ walletId }) => walletId !== MINT_WALLET_ID)
        .map(({ side, walletId }) => {
          const id = 2 * Number(row.id) + side
          return {
            id,
            event_id: derivedPublicId(id, row.created_at, state.salt),
            wallet_id: walletId,
            type: side === 0 ? 'transaction.sent' : 'transaction.received',
            transaction_id: Number(row.id),
            created_at: row.created_at,
          }
        }),
    )
    if (events.length > 0) await db.insertInto('events').values(events).execute()
    after = Number(rows[rows.length - 1].id)
  }
  if (isPostgres(db)) await sql`select setval('events_id_seq', greatest(1, (select max(id) from events)))`.execute(db)
  else await rebuildSqliteTable(db, 'webhook_deliveries', PLAIN, REFERENCED)
  await db.schema.dropTable('event_state').execute()
}
