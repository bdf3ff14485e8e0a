import fs from 'node:fs'
import path from 'node:path'
import type { Config } from '../config.ts'
import { openDatabase, type DatabaseOptions } from '../db/database.ts'
import { adminKeyFile } from '../http/admin-key.ts'
import { listAppliedMigrations, listMigrations, MIGRATION_NAMES, migrateToLatest } from '../db/migrate.ts'
import { findSecretsKeyIds, prepareWebhookSecrets, resealWebhookSecrets } from '../events/webhook-secrets.ts'
import { generateSecretsKey, secretsKeyFrom, type SecretsKey } from '../secrets/secret-box.ts'
import {
  decodeSecretsKey,
  loadSecretsKey,
  promoteNextSecretsKeyFile,
  SecretsKeyError,
  writeNextSecretsKeyFile,
} from '../secrets/secrets-key.ts'
import { createBackup, type Progress } from './backup.ts'
import { BackupError } from './backup-format.ts'
import { checkBackup, restoreBackup } from './restore.ts'

/** The `coffer backup`, `coffer restore` commands: storage from the config, progress on stderr. */

/** Backups this large (rows) report progress as they go; smaller ones only their summary. */
const PROGRESS_FROM_ROWS = 50_000

function progressPrinter(verb: string): Progress {
  let lastTenth = -1
  let lastTable = ''
  return (table, done, total) => {
    if (total < PROGRESS_FROM_ROWS) return
    const tenth = Math.floor((done / total) * 10)
    if (process.stderr.isTTY) {
      process.stderr.write(`\r  ${verb} ${table.padEnd(20)} ${done}/${total} rows (${Math.floor((done / total) * 100)}%)`)
      if (done >= total) process.stderr.write('\n')
    } else if (tenth !== lastTenth || table !== lastTable) {
      process.stderr.write(`  ${verb} ${table}: ${done}/${total} rows (${tenth * 10}%)\n`)
    }
    lastTenth = tenth
    lastTable = table
  }
}

function describe(tables: Record<string, number>): string {
  const shown = ['users', 'wallets', 'transactions', 'webhooks'].filter((table) => table in tables)
  return shown.map((table) => `${tables[table]} ${table}`).join(', ')
}

/**
 * An operator's command may run long statements (a restore builds the indexes of millions of rows):
 * only lock waits and connecting stay bounded, not each answer as the service's are.
 */
export function operatorDatabase(config: Config): DatabaseOptions {
  return {
    ...config,
    postgresTimeouts: { ...config.postgresTimeouts, statementTimeoutMs: 0, idleInTransactionTimeoutMs: 0, queryTimeoutMs: 0 },
  }
}

export async function backupCommand(config: Config, file: string): Promise<void> {
  const database = openDatabase(operatorDatabase(config))
  try {
    const started = Date.now()
    const summary = await createBackup(database, file, {
      progress: progressPrinter('backing up'),
      secretsKeyId: async (trx) => (await findSecretsKeyIds(trx)).join(',') || null,
    })
    const seconds = ((Date.now() - started) / 1000).toFixed(1)
    console.log(
      `backup written to ${file}: ${summary.rows} rows (${describe(summary.tables)}), ` +
        `${(summary.bytes / 1024 / 1024).toFixed(1)} MB, in ${seconds} s`,
    )
  } finally {
    await database.close()
  }
}

/** Checks the whole file before the store is even opened, so a refused restore writes nothing anywhere. */
export async function restoreCommand(config: Config, file: string): Promise<void> {
  const checked = await checkBackup(file)
  const sealedWith = checked.header.secrets_key_id
  if (sealedWith) {
    // The secrets travel sealed; the key never does. Without it they could never be opened again.
    const key = loadSecretsKey(config)
    if (key?.id !== sealedWith) {
      const have = key ? `this store's key is ${key.id}` : `no SECRETS_KEY is set and ${config.dataDir} has no secrets-key file`
      throw new BackupError(
        `the backup's webhook secrets are encrypted with key ${sealedWith} and ${have}: set SECRETS_KEY to the source's key ` +
          '(or copy its secrets-key file into DATA_DIR), then restore again',
      )
    }
  }
  const database = openDatabase(operatorDatabase(config))
  try {
    const started = Date.now()
    const summary = await restoreBackup(database, checked, progressPrinter('restoring'))
    const seconds = ((Date.now() - started) / 1000).toFixed(1)
    const target = database.dialect === 'postgres' ? 'PostgreSQL' : `SQLite (${config.dataDir})`
    console.log(
      `restored ${summary.rows} rows (${describe(summary.tables)}) into ${target} in ${seconds} s, ` +
        `from a backup of ${checked.header.created_at}`,
    )
    if (summary.upgraded.length > 0) console.log(`schema brought up to date: ${summary.upgraded.join(', ')}`)
    // The admin key is never in a backup; without the source's, the service would make a new one.
    if (!config.adminApiKey && !fs.existsSync(adminKeyFile(config))) {
      console.log(
        `note: the admin key is not in backups: copy admin-key from the source's data directory into ${config.dataDir} ` +
          '(or set ADMIN_API_KEY) to keep using it',
      )
    }
  } finally {
    await database.close()
  }
}

/** `coffer migrate --status`: applied, pending and unknown migrations; exit 0 when nothing is pending. */
export async function migrateStatusCommand(config: Config): Promise<number> {
  const file = path.join(config.dataDir, 'coffer.sqlite')
  if (!config.databaseUrl && !fs.existsSync(file)) {
    console.log(`no database yet at ${file}: every migration is pending`)
    for (const name of MIGRATION_NAMES) console.log(`pending  ${name}`)
    return 0
  }
  const database = openDatabase(operatorDatabase(config))
  try {
    const migrations = await listMigrations(database.db)
    const applied = await listAppliedMigrations(database.db)
    for (const { name, appliedAt } of migrations)
      console.log(appliedAt ? `applied  ${name}  ${appliedAt.toISOString()}` : `pending  ${name}`)
    for (const name of applied.filter((known) => !migrations.some((migration) => migration.name === known)))
      console.log(`unknown  ${name}  (applied by a newer Coffer)`)
    const pending = migrations.filter((migration) => !migration.appliedAt).length
    console.log(pending === 0 ? 'schema is up to date' : `${pending} pending: they run when the service starts, or with \`coffer migrate\``)
    return 0
  } finally {
    await database.close()
  }
}

/**
 * `coffer rotate-secrets-key`: re-seals every webhook secret in one transaction. A key file goes
 * through `secrets-key.next` so a start in between finishes the swap; with SECRETS_KEY, NEW_SECRETS_KEY is required.
 */
export async function rotateSecretsKeyCommand(config: Config, newKeyText: string | undefined): Promise<void> {
  let next: SecretsKey | undefined
  if (newKeyText) {
    const decoded = decodeSecretsKey(newKeyText)
    if (!decoded)
      throw new SecretsKeyError(
        'NEW_SECRETS_KEY must be 32 random bytes, base64 (44 characters) or hex (64), e.g. from `openssl rand -base64 32`',
      )
    next = secretsKeyFrom(decoded)
  } else if (config.secretsKey) {
    throw new SecretsKeyError(
      'SECRETS_KEY is set: put a new key in NEW_SECRETS_KEY (e.g. `openssl rand -base64 32`), rotate, ' +
        'then set SECRETS_KEY to it on every instance',
    )
  }
  const database = openDatabase(operatorDatabase(config))
  try {
    await migrateToLatest(database.db)
    const current = await prepareWebhookSecrets(database.db, config)
    const file = loadSecretsKey(config)?.file
    next ??= generateSecretsKey()
    if (next.id === current.id) throw new SecretsKeyError('the new key is the current key')
    if (file) writeNextSecretsKeyFile(config, next)
    const count = await resealWebhookSecrets(database.db, current, next)
    if (file) promoteNextSecretsKeyFile(config)
    console.log(`re-encrypted ${count} webhook secrets from key ${current.id} to key ${next.id}`)
    console.log(
      file ? `the new key is in ${file}; restart every instance` : 'now set SECRETS_KEY to the new key on every instance and restart them',
    )
  } finally {
    await database.close()
  }
}

export { BackupError, SecretsKeyError }
