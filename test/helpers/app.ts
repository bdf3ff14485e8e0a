import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import { sql } from 'kysely'
import { buildApp } from '../../src/app.ts'
import type { AppOptions } from '../../src/deps.ts'
import { loadConfig, type Config } from '../../src/config.ts'
import { openPostgres, openSqlite, type Database, type Db, type Trx } from '../../src/db/database.ts'
import { migrateToLatest } from '../../src/db/migrate.ts'
import { prepareWebhookSecrets } from '../../src/events/webhook-secrets.ts'
import { hashToken } from '../../src/http/tokens.ts'
import { createOutbox } from '../../src/events/outbox.ts'
import { createLedger } from '../../src/ledger/ledger.service.ts'
import type { Asset } from '../../src/ledger/ledger.types.ts'
import { verifyLedger } from '../../src/ledger/verify.ts'
import { createDatabase } from '../../scripts/lib/postgres.ts'
import { createAsset, uniqueName } from './factories.ts'

export const STORAGE = (process.env.TEST_STORAGE ?? 'sqlite') as 'sqlite' | 'postgres'
export const ADMIN_KEY = 'cfa_test_admin_key_for_the_suite_only'

export interface TestApp {
  app: FastifyInstance
  database: Database
  config: Config
  /** Headers that authenticate as the admin. */
  admin: Record<string, string>
  close(): Promise<void>
}

/** A fresh, empty database on the storage under test (TEST_STORAGE), migrated. */
export async function openTestDatabase(): Promise<{ database: Database; url: string | undefined; dataDir: string }> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'coffer-test-'))
  if (STORAGE === 'postgres') {
    const adminUrl = process.env.TEST_PG_ADMIN_URL
    if (!adminUrl) throw new Error('TEST_PG_ADMIN_URL is not set: run the suite with `npm test` or `npm run test:pg`')
    const url = await createDatabase(adminUrl)
    const database = openPostgres(url, 20)
    await migrateToLatest(database.db)
    return { database, url, dataDir }
  }
  const database = openSqlite(path.join(dataDir, 'coffer.sqlite'))
  await migrateToLatest(database.db)
  return { database, url: undefined, dataDir }
}

/**
 * Builds the app on a fresh database, with `env` over the suite's configuration and `parts` (where
 * the log goes, traces, the ledger's clock for tests that move it past expiries). `close()` checks
 * the ledger with `verifyLedger` first, at the ledger's time.
 */
export async function buildTestApp(
  env: Record<string, string> = {},
  parts: Pick<AppOptions, 'logStream' | 'tracing' | 'clock'> = {},
): Promise<TestApp> {
  const { database, url, dataDir } = await openTestDatabase()
  const config = loadConfig({
    DATA_DIR: dataDir,
    DATABASE_URL: url,
    ADMIN_API_KEY: ADMIN_KEY,
    LOG_LEVEL: process.env.LOG_LEVEL ?? 'silent',
    AUTH_RATE_LIMIT: '0',
    WEBHOOK_ALLOW_PRIVATE: 'true',
    ...env,
  })
  const app = await buildApp({
    config,
    database,
    adminKeyHash: hashToken(ADMIN_KEY),
    secretsKey: await prepareWebhookSecrets(database.db, config),
    ...parts,
  })
  return {
    app,
    database,
    config,
    admin: { authorization: `Bearer ${ADMIN_KEY}` },
    async close() {
      await app.close()
      const report = await verifyLedger(database.db, undefined, parts.clock?.())
      await database.close()
      fs.rmSync(dataDir, { recursive: true, force: true })
      if (!report.ok) throw new Error(`ledger verification failed after the suite:\n${report.problems.join('\n')}`)
    },
  }
}

/** `buildTestApp` and one asset for the suite, named `prefix` and a unique suffix. */
export async function buildTestAppWithAsset(
  prefix: string,
  ...options: Parameters<typeof buildTestApp>
): Promise<{ t: TestApp; asset: Asset }> {
  const t = await buildTestApp(...options)
  return { t, asset: await createAsset(t, { name: uniqueName(prefix) }) }
}

/**
 * What one run of the expiry jobs does (holds past their expiry, then units past theirs), at the
 * ledger's `clock`, on the ledger of another instance: for tests that keep the jobs off.
 */
export async function runExpiryJobs(t: TestApp, clock: () => string): Promise<void> {
  const ledger = createLedger({ database: t.database, events: createOutbox(), clock })
  try {
    await ledger.holds.expireDue(1000)
    await ledger.expiry.expireDue(1000)
  } finally {
    await ledger.close()
  }
}

/**
 * A second service instance on the same PostgreSQL database as `t`, as a second process would be:
 * its own pool, its own background workers, the same config unless overridden.
 */
export async function buildPeerApp(t: TestApp, overrides: Partial<Config> = {}): Promise<{ app: FastifyInstance; close(): Promise<void> }> {
  if (!t.config.databaseUrl) throw new Error('a peer instance needs a shared PostgreSQL database')
  return buildInstance({ ...t.config, ...overrides }, openPostgres(t.config.databaseUrl, 10))
}

/** An app on its own connection to a shared store; the same data directory, so the same secrets key. */
async function buildInstance(config: Config, database: Database): Promise<{ app: FastifyInstance; close(): Promise<void> }> {
  let app: FastifyInstance
  try {
    app = await buildApp({
      config,
      database,
      adminKeyHash: hashToken(ADMIN_KEY),
      secretsKey: await prepareWebhookSecrets(database.db, config),
    })
  } catch (error) {
    // An instance that failed to start must not keep its pool open: the test file would never end.
    await database.close()
    throw error
  }
  return {
    app,
    async close() {
      await app.close()
      await database.close()
    },
  }
}

/**
 * A second instance on the same store as `t`, as another process (or the CLI) would be: on
 * PostgreSQL another pool (`buildPeerApp`), on SQLite another connection to the same file.
 */
export async function buildSameStoreApp(t: TestApp): Promise<{ app: FastifyInstance; close(): Promise<void> }> {
  if (STORAGE === 'postgres') return buildPeerApp(t)
  return buildInstance(t.config, openSqlite(path.join(t.config.dataDir, 'coffer.sqlite')))
}

/** Asserts an error response has the contract's layout, status and code. */
export function expectError(response: LightMyRequestResponse, status: number, code: string): void {
  const body = response.json()
  if (response.statusCode !== status || body.code !== code) {
    throw new Error(`expected ${status} ${code}, got ${response.statusCode} ${response.body}`)
  }
  if (typeof body.message !== 'string' || typeof body.request_id !== 'string') {
    throw new Error(`error body lacks message or request_id: ${response.body}`)
  }
}

/**
 * A request racing a change: runs `change` in a transaction and, while that is still open (its
 * changes made, not committed), starts `request`; commits after `holdMs`, long enough for a
 * request that does not wait for the change to finish, and returns the request's answer. On
 * PostgreSQL the request runs beside the open transaction; SQLite runs it after the commit.
 */
export async function whileOpen<T>(db: Db, change: (trx: Trx) => Promise<void>, request: () => Promise<T>, holdMs = 300): Promise<T> {
  let pending: Promise<T> | undefined
  await db.transaction().execute(async (trx) => {
    await change(trx)
    pending = request()
    await new Promise((resolve) => setTimeout(resolve, holdMs))
  })
  return pending as Promise<T>
}

/**
 * Waits, when the clock's minute has less than `marginMs` left, until the next one begins. On
 * PostgreSQL login and registration attempts are counted in windows aligned to the clock's
 * minutes (`src/http/rate-limit.ts`), so attempts that must fall in one window begin after this.
 */
export async function awayFromTheMinute(marginMs = 20_000): Promise<void> {
  const left = 60_000 - (Date.now() % 60_000)
  if (left < marginMs) await new Promise((resolve) => setTimeout(resolve, left + 50))
}

/** Waits until the journal's sequencer has positioned every committed transaction (it runs within a second of each commit). */
export async function journalSettled(db: Db): Promise<void> {
  for (;;) {
    const { rows } = await sql<{ waiting: number }>`select count(*) as waiting from transactions t
      where not exists (select 1 from journal_entries j where j.transaction_id = t.id)`.execute(db)
    if (Number(rows[0].waiting) === 0) return
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

/** Waits until every committed transaction is positioned and a signed checkpoint covers it (within the checkpoint interval). */
export async function journalCovered(db: Db): Promise<void> {
  await journalSettled(db)
  const { rows } = await sql<{ size: number }>`select size from journal_state where id = 1`.execute(db)
  for (;;) {
    const latest = await sql<{ size: number }>`select coalesce(max(size), 0) as size from journal_checkpoints`.execute(db)
    if (Number(latest.rows[0].size) >= Number(rows[0].size)) return
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}
