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
 *
 * Every Transaction now answers `position` and `hash` after its other fields, null until it is
 * positioned. The stored answers written before (each transaction's `body`, the data of its events,
 * and the stored answers of Idempotency-Keys) gain them as null, as they were at commit, so old
 * events and replays have the same shape as new ones.
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
  await sql`update transactions set body = substr(body, 1, length(body) - 1) || ${JOURNAL_FIELDS}
    where body is not null`.execute(db)
  await rewriteStoredAnswers(db, addJournalFields)
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
  // The ledger writes the two fields last, null, in every body.
  const ending = sql`substr(body, length(body) - ${JOURNAL_FIELDS.length - 1})`
  await sql`update transactions set body = substr(body, 1, length(body) - ${JOURNAL_FIELDS.length}) || '}'
    where body is not null and ${ending} = ${JOURNAL_FIELDS}`.execute(db)
  await rewriteStoredAnswers(db, dropJournalFields)
}

/** The end of a transaction's stored body with the journal's fields, as the ledger writes it at commit. */
const JOURNAL_FIELDS = ',"position":null,"hash":null}'

/** A Transaction in a stored answer: a transfer's, a capture's, each of a batch's. */
function isTransaction(value: Record<string, unknown>): boolean {
  return 'sending_wallet_id' in value && 'receiving_wallet_id' in value && 'assets' in value && 'kind' in value
}

/** Applies `change` to every Transaction in `value`; true when one changed. */
function eachTransaction(value: unknown, change: (transaction: Record<string, unknown>) => boolean): boolean {
  if (Array.isArray(value)) return value.map((item) => eachTransaction(item, change)).some(Boolean)
  if (value === null || typeof value !== 'object') return false
  const object = value as Record<string, unknown>
  if (isTransaction(object)) return change(object)
  return Object.values(object)
    .map((item) => eachTransaction(item, change))
    .some(Boolean)
}

function addJournalFields(transaction: Record<string, unknown>): boolean {
  if ('position' in transaction) return false
  transaction.position = null
  transaction.hash = null
  return true
}

function dropJournalFields(transaction: Record<string, unknown>): boolean {
  if (!('position' in transaction)) return false
  delete transaction.position
  delete transaction.hash
  return true
}

/**
 * The stored answers of Idempotency-Keys, page by page: those holding Transactions are rewritten
 * with `change` (they were written by JSON.stringify, so parsing and writing them again keeps every
 * other byte).
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
async function rewriteStoredAnswers(db: Kysely<any>, change: (transaction: Record<string, unknown>) => boolean): Promise<void> {
  let after: { wallet_id: number; key: string } | undefined
  for (;;) {
    const from = after ? sql`where (wallet_id, key) > (${after.wallet_id}, ${after.key})` : sql``
    const { rows } = await sql<{ wallet_id: number; key: string; response_body: string }>`
      select wallet_id, key, response_body from idempotency_keys ${from} order by wallet_id, key limit 1000`.execute(db)
    if (rows.length === 0) return
    for (const row of rows) {
      const body: unknown = JSON.parse(row.response_body)
      if (!eachTransaction(body, change)) continue
      await sql`update idempotency_keys set response_body = ${JSON.stringify(body)}
        where wallet_id = ${row.wallet_id} and key = ${row.key}`.execute(db)
    }
    const last = rows[rows.length - 1]
    after = { wallet_id: last.wallet_id, key: last.key }
  }
}
