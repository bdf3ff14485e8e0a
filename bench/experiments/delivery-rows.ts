/**
 * What a webhook delivery row costs the transfers' write statement on PostgreSQL, index by index
 * and foreign key by foreign key (`npx tsx bench/experiments/delivery-rows.ts [batches]`, about a minute and a half).
 *
 * One throwaway server, one database per variant of the `webhook_deliveries` schema, each with
 * 100 wallets of which 20 have a webhook. Each batch is the part of the transfers' write
 * statement that writes events and deliveries (`events/outbox.ts`): 16 transfers' 32 events and a
 * delivery for each event of a wallet with a webhook (about 6.7), in a transaction of its own.
 * The variants take turns batch by batch, in a random order each time, so that whatever else runs
 * on the machine slows them alike; the figure is the median time of the statement. The cost of the
 * delivery rows is the difference with the variant without webhooks.
 */
import { sql } from 'kysely'
import pg from 'pg'
import { openDatabase } from '../../src/db/database.ts'
import { migrateTo, migrateToLatest } from '../../src/db/migrate.ts'
import { startPostgres } from '../../scripts/lib/postgres.ts'

const TRANSFERS = 16
const BATCHES = Number(process.argv[2] ?? 3000)
const WARMUP = 300

const DROP_EVENT_FK = 'alter table webhook_deliveries drop constraint webhook_deliveries_event_id_fkey'
const DROP_WALLET_FK = 'alter table webhook_deliveries drop constraint webhook_deliveries_wallet_id_fkey'
const drop = (index: string) => `drop index ${index}`

/** A schema: migrated to `migration` (the latest when absent), then changed by hand. */
const VARIANTS: { label: string; migration?: string; ddl: string[]; webhooks?: false }[] = [
  { label: 'no webhooks (no delivery rows)', ddl: [], webhooks: false },
  { label: 'before 0012 (6 indexes, 2 foreign keys)', migration: '0011_webhook_origins', ddl: [] },
  { label: '  without the foreign key to events', migration: '0011_webhook_origins', ddl: [DROP_EVENT_FK] },
  { label: '  without the foreign key to wallets', migration: '0011_webhook_origins', ddl: [DROP_WALLET_FK] },
  { label: '  without both foreign keys', migration: '0011_webhook_origins', ddl: [DROP_EVENT_FK, DROP_WALLET_FK] },
  { label: '  without _due', migration: '0011_webhook_origins', ddl: [drop('webhook_deliveries_due')] },
  { label: '  without _wallet', migration: '0011_webhook_origins', ddl: [drop('webhook_deliveries_wallet')] },
  { label: '  without _event', migration: '0011_webhook_origins', ddl: [drop('webhook_deliveries_event')] },
  { label: '  without _pending', migration: '0011_webhook_origins', ddl: [drop('webhook_deliveries_pending')] },
  { label: '  without _leased', migration: '0011_webhook_origins', ddl: [drop('webhook_deliveries_leased')] },
  { label: 'after 0012 (5 indexes, no foreign key)', migration: '0013_page_label_generation', ddl: [] },
  {
    label: '  and only the primary key',
    migration: '0013_page_label_generation',
    ddl: ['webhook_deliveries_wallet', 'webhook_deliveries_event', 'webhook_deliveries_pending', 'webhook_deliveries_leased'].map(drop),
  },
  { label: 'after 0014 (4 indexes, fillfactor 90)', ddl: [] },
]

/** The events and deliveries of one batch, as `outbox.ts` writes them on PostgreSQL. */
const STATEMENT = `with w0 as (insert into events (id, event_id, wallet_id, type, transaction_id, created_at)
    select id, event_id, wallet_id, type, transaction_id, created_at from unnest($1::bigint[], $2::text[], $3::bigint[], $4::text[], $5::bigint[], $6::text[])
      as r(id, event_id, wallet_id, type, transaction_id, created_at)),
  w1 as (insert into webhook_deliveries (event_id, wallet_id, url, status, attempts, next_attempt_at, created_at, updated_at)
    select r.id, r.wallet_id, webhooks.url, 'pending', 0, r.created_at, r.created_at, r.created_at
    from unnest($1::bigint[], $2::text[], $3::bigint[], $4::text[], $5::bigint[], $6::text[]) as r(id, event_id, wallet_id, type, transaction_id, created_at)
      join webhooks on webhooks.wallet_id = r.wallet_id)
  select null as w0, null as w1`

interface Run {
  label: string
  client: pg.Client
  nextId: number
  micros: number[]
}

function batchValues(run: Run): unknown[][] {
  const columns: unknown[][] = [[], [], [], [], [], []]
  const at = new Date().toISOString()
  for (let i = 0; i < TRANSFERS * 2; i++) {
    const id = run.nextId++
    const values = [id, `evt_${id.toString(16).padStart(32, '0')}`, 2 + Math.floor(Math.random() * 99), 'transaction.sent', 1, at]
    values.forEach((value, column) => columns[column].push(value))
  }
  return columns
}

async function runBatch(run: Run, record: boolean): Promise<void> {
  const values = batchValues(run)
  await run.client.query('begin')
  const started = process.hrtime.bigint()
  await run.client.query({ name: 'write', text: STATEMENT, values })
  if (record) run.micros.push(Number(process.hrtime.bigint() - started) / 1000)
  await run.client.query('commit')
}

const server = await startPostgres({
  name: 'coffer-bench-rows',
  flags: ['-c', 'max_connections=50', '-c', 'shared_buffers=256MB', '-c', 'listen_addresses=127.0.0.1'],
})
const runs: Run[] = []
try {
  const admin = new pg.Client({ connectionString: server.url })
  await admin.connect()
  for (const [i, variant] of VARIANTS.entries()) {
    await admin.query(`create database rows_${i}`)
    const url = server.url.replace(/\/postgres$/, `/rows_${i}`)
    const database = openDatabase({ databaseUrl: url, dataDir: '' })
    await migrateToLatest(database.db)
    if (variant.migration) await migrateTo(database.db, variant.migration)
    const db = database.db
    await sql`insert into wallets (address, created_at) select 'w' || g, '2026-01-01T00:00:00.000Z' from generate_series(1, 100) as g`.execute(
      db,
    )
    if (variant.webhooks !== false) {
      await sql`insert into webhooks (wallet_id, url, origin, secret, created_at)
        select id, 'http://127.0.0.1:9/w/' || id, 'http://127.0.0.1:9', 'sealed', '2026-01-01T00:00:00.000Z' from wallets where id between 2 and 21`.execute(
        db,
      )
    }
    await sql`insert into transactions (id, sending_wallet_id, receiving_wallet_id, memo, created_at, body) values (1, 2, 3, '', '2026-01-01T00:00:00.000Z', '{}')`.execute(
      db,
    )
    for (const statement of variant.ddl) await sql.raw(statement).execute(db)
    await database.close()
    const client = new pg.Client({ connectionString: url })
    await client.connect()
    // Only the statement is timed; its commit needs no disk here.
    await client.query('set synchronous_commit = off')
    runs.push({ label: variant.label, client, nextId: 1, micros: [] })
  }
  await admin.end()
  for (let i = 0; i < WARMUP; i++) for (const run of runs) await runBatch(run, false)
  for (let i = 0; i < BATCHES; i++) {
    const order = [...runs].sort(() => Math.random() - 0.5)
    for (const run of order) await runBatch(run, true)
  }
  const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]
  const base = median(runs[0].micros)
  const rows: string[][] = [['schema of webhook_deliveries', 'statement µs (median)', 'delivery rows µs', 'per row µs']]
  for (const run of runs) {
    const { rows: counted } = await run.client.query<{ n: number }>('select count(*)::int as n from webhook_deliveries')
    const perBatch = counted[0].n / (WARMUP + BATCHES)
    const cost = median(run.micros) - base
    rows.push([
      run.label,
      median(run.micros).toFixed(0),
      run === runs[0] ? '-' : cost.toFixed(0),
      perBatch > 0 ? (cost / perBatch).toFixed(1) : '-',
    ])
  }
  const widths = rows[0].map((_, column) => Math.max(...rows.map((row) => row[column].length)))
  console.log(
    `${TRANSFERS} transfers (${TRANSFERS * 2} events, about 6.7 deliveries) per batch, ${BATCHES} batches per schema, taking turns`,
  )
  for (const row of rows)
    console.log(row.map((cell, column) => (column === 0 ? cell.padEnd(widths[column]) : cell.padStart(widths[column]))).join('  '))
} finally {
  for (const run of runs) await run.client.end().catch(() => {})
  await server.stop()
}
