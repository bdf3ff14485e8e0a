/**
 * Writes the backup fixture of this release (test/fixtures/backup-<version>.coffer.gz and its
 * credentials, .json): a small ledger built through the API on SQLite, backed up by `coffer
 * backup`'s code. test/operations/upgrade.test.ts restores every fixture into the current code.
 * Run at each release, before its schema changes land:  npx tsx scripts/make-backup-fixture.ts
 */
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { buildApp } from '../src/app.ts'
import { loadConfig } from '../src/config.ts'
import { openSqlite } from '../src/db/database.ts'
import { migrateToLatest } from '../src/db/migrate.ts'
import { prepareWebhookSecrets } from '../src/events/webhook-secrets.ts'
import { hashToken } from '../src/http/tokens.ts'
import { createBackup } from '../src/operations/backup.ts'
import { VERSION } from '../src/version.ts'
import { buildLedgerWorld } from '../test/helpers/ledger-world.ts'

const ADMIN_KEY = 'cfa_fixture_admin_key_not_secret'
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'coffer-fixture-'))
const database = openSqlite(path.join(dataDir, 'coffer.sqlite'))
await migrateToLatest(database.db)
const config = loadConfig({
  DATA_DIR: dataDir,
  ADMIN_API_KEY: ADMIN_KEY,
  LOG_LEVEL: 'silent',
  AUTH_RATE_LIMIT: '0',
  WEBHOOK_ALLOW_PRIVATE: 'true',
})
const app = await buildApp({
  config,
  database,
  adminKeyHash: hashToken(ADMIN_KEY),
  secretsKey: await prepareWebhookSecrets(database.db, config),
})
const world = await buildLedgerWorld(app, { authorization: `Bearer ${ADMIN_KEY}` }, { prefix: 'fx' })
await app.close()
const file = path.join('test', 'fixtures', `backup-${VERSION}.coffer.gz`)
const summary = await createBackup(database, file)
await database.close()
fs.writeFileSync(file.replace(/\.coffer\.gz$/, '.json'), `${JSON.stringify({ adminKey: ADMIN_KEY, world }, null, 2)}\n`)
fs.rmSync(dataDir, { recursive: true, force: true })
console.log(`wrote ${file}: ${summary.rows} rows`)
