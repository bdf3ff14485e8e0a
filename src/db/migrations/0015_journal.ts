import { sql, type Kysely } from 'kysely'
import { isPostgres } from '../dialect.ts'

/**
 * The journal (`journal/README.md`): one gap-free order of every transaction, its hash chain, the
 * Merkle tree over it and the signed checkpoints.
 *
 * - `journal_entries`: a transaction's `position` (from 1, gap-free) and its chained `hash`,
 *   written by the sequencer after the transaction committed. Only ever inserted.
 * - `journal_nodes`: the hash of every complete subtree of the Merkle tree above the leaves
 *   (`level` ≥ 1, `idx` counting from the left at that level), so a proof reads a logarithmic
 *   number of rows.
 * - `journal_state`: one row: how many entries there are, the last entry's hash and the roots of
 *   the tree's complete subtrees (the frontier, JSON) from which the next leaves and the root follow.
 * - `journal_checkpoints`: every signed checkpoint.
 * - PostgreSQL: `journal_pending`, the ids of committed transactions without a position yet, filled
 *   by a statement trigger on `transactions` in the writer's own transaction: ids there are taken
 *   before commit, so id order is not commit order and the sequencer cannot go by id alone. On
 *   SQLite one writer at a time takes ids and commits in the same order, and the sequencer takes the
 *   transactions above the last positioned id.
 *
 * Existing transactions are positioned by the sequencer after the upgrade, in id order, in batches.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('journal_entries')
    .addColumn('position', 'integer', (col) => col.primaryKey())
    .addColumn('transaction_id', 'integer', (col) => col.notNull().unique())
    .addColumn('hash', 'text', (col) => col.notNull())
    .execute()
  await db.schema
    .createTable('journal_nodes')
    .addColumn('level', 'integer', (col) => col.notNull())
    .addColumn('idx', 'integer', (col) => col.notNull())
    .addColumn('hash', 'text', (col) => col.notNull())
    .addPrimaryKeyConstraint('journal_nodes_pkey', ['level', 'idx'])
    .execute()
  await db.schema
    .createTable('journal_state')
    .addColumn('id', 'integer', (col) => col.primaryKey())
    .addColumn('size', 'integer', (col) => col.notNull())
    .addColumn('last_transaction_id', 'integer', (col) => col.notNull())
    .addColumn('head', 'text', (col) => col.notNull())
    .addColumn('frontier', 'text', (col) => col.notNull())
    .execute()
  await db
    .insertInto('journal_state')
    .values({ id: 1, size: 0, last_transaction_id: 0, head: '0'.repeat(64), frontier: '[]' })
    .execute()
  await db.schema
    .createTable('journal_checkpoints')
    .addColumn('size', 'integer', (col) => col.primaryKey())
    .addColumn('root', 'text', (col) => col.notNull())
    .addColumn('signed_at', 'text', (col) => col.notNull())
    .addColumn('signature', 'text', (col) => col.notNull())
    .execute()
  if (isPostgres(db)) {
    await db.schema
      .createTable('journal_pending')
      .addColumn('transaction_id', 'integer', (col) => col.primaryKey())
      .execute()
    await sql`insert into journal_pending (transaction_id) select id from transactions`.execute(db)
    await sql`create function coffer_journal_pending() returns trigger language plpgsql as $$
      begin insert into journal_pending (transaction_id) select id from inserted; return null; end $$`.execute(db)
    await sql`create trigger transactions_journal_pending after insert on transactions referencing new table as inserted
      for each statement execute function coffer_journal_pending()`.execute(db)
  }
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  if (isPostgres(db)) {
    await sql`drop trigger transactions_journal_pending on transactions`.execute(db)
    await sql`drop function coffer_journal_pending()`.execute(db)
    await db.schema.dropTable('journal_pending').execute()
  }
  for (const table of ['journal_checkpoints', 'journal_state', 'journal_nodes', 'journal_entries'])
    await db.schema.dropTable(table).execute()
}
