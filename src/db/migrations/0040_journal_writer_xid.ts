import { sql, type Kysely } from 'kysely'
import { isPostgres } from '../dialect.ts'

/**
 * PostgreSQL: the journal's sequencer finds what waits for a position by the writer's transaction
 * id instead of a queue (`docs/journal.md`). Each transaction row holds the full id of the
 * transaction that wrote it (`journal_xid`, its default: no trigger, no queue row, no delete);
 * the sequencer reads the rows at or above the oldest writer still running at its last round
 * (`journal_state.watermark_xid`, with `watermark_id` for a round that stopped at its batch).
 *
 * The column is added without a default first, so existing rows stay null and the table is not
 * written again; only the rows still queued get a value (this migration's id), so the sequencer
 * positions them. The index holds only rows with a value. The watermark columns are on both
 * storages so a backup of one restores into the other; SQLite keeps `last_transaction_id`.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .alterTable('journal_state')
    .addColumn('watermark_xid', 'bigint', (col) => col.notNull().defaultTo(0))
    .execute()
  await db.schema
    .alterTable('journal_state')
    .addColumn('watermark_id', 'bigint', (col) => col.notNull().defaultTo(0))
    .execute()
  if (!isPostgres(db)) return
  await sql`alter table transactions add column journal_xid xid8`.execute(db)
  await sql`alter table transactions alter column journal_xid set default pg_current_xact_id()`.execute(db)
  await sql`update transactions set journal_xid = pg_current_xact_id()
    where id in (select transaction_id from journal_pending)`.execute(db)
  await sql`create index transactions_journal_xid on transactions (journal_xid, id) where journal_xid is not null`.execute(db)
  await sql`drop trigger transactions_journal_pending on transactions`.execute(db)
  await sql`drop function coffer_journal_pending()`.execute(db)
  await db.schema.dropTable('journal_pending').execute()
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  if (isPostgres(db)) {
    await db.schema
      .createTable('journal_pending')
      .addColumn('transaction_id', 'integer', (col) => col.primaryKey())
      .execute()
    await sql`insert into journal_pending (transaction_id) select id from transactions t
      where not exists (select 1 from journal_entries j where j.transaction_id = t.id)`.execute(db)
    await sql`create function coffer_journal_pending() returns trigger language plpgsql as $$
      begin insert into journal_pending (transaction_id) select id from inserted; return null; end $$`.execute(db)
    await sql`create trigger transactions_journal_pending after insert on transactions referencing new table as inserted
      for each statement execute function coffer_journal_pending()`.execute(db)
    await sql`drop index transactions_journal_xid`.execute(db)
    await sql`alter table transactions drop column journal_xid`.execute(db)
  }
  await db.schema.alterTable('journal_state').dropColumn('watermark_id').execute()
  await db.schema.alterTable('journal_state').dropColumn('watermark_xid').execute()
}
