import fs from 'node:fs'
import path from 'node:path'
import type { Config } from '../config.ts'
import { openDatabase } from '../db/database.ts'
import { listAppliedMigrations, listMigrations, MIGRATION_NAMES } from '../db/migrate.ts'
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
  const shown = ['users', 'wallets', 'transactions', 'webhooks', 'events'].filter((table) => table in tables)
  return shown.map((table) => `${tables[table]} ${table}`).join(', ')
}

export async function backupCommand(config: Config, file: string): Promise<void> {
  const database = openDatabase(config)
  try {
    const started = Date.now()
    const summary = await createBackup(database, file, { progress: progressPrinter('backing up') })
    const seconds = ((Date.now() - started) / 1000).toFixed(1)
    console.log(`backup written to ${file}: ${summary.rows} rows (${describe(summary.tables)}), ${(summary.bytes / 1024 / 1024).toFixed(1)} MB, in ${seconds} s`)
  } finally {
    await database.close()
  }
}

/** Checks the whole file before the store is even opened, so a refused restore writes nothing anywhere. */
export async function restoreCommand(config: Config, file: string): Promise<void> {
  const checked = await checkBackup(file)
  const database = openDatabase(config)
  try {
    const started = Date.now()
    const summary = await restoreBackup(database, checked, progressPrinter('restoring'))
    const seconds = ((Date.now() - started) / 1000).toFixed(1)
    const target = database.dialect === 'postgres' ? 'PostgreSQL' : `SQLite (${config.dataDir})`
    console.log(`restored ${summary.rows} rows (${describe(summary.tables)}) into ${target} in ${seconds} s, from a backup of ${checked.header.created_at}`)
    if (summary.upgraded.length > 0) console.log(`schema brought up to date: ${summary.upgraded.join(', ')}`)
  } finally {
    await database.close()
  }
}

/**
 * `coffer migrate --status`: every migration of this release, applied (with when) or pending, and
 * any the store has that this release does not know. Exit status 0 when nothing is pending.
 */
export async function migrateStatusCommand(config: Config): Promise<number> {
  const file = path.join(config.dataDir, 'coffer.sqlite')
  if (!config.databaseUrl && !fs.existsSync(file)) {
    console.log(`no database yet at ${file}: every migration is pending`)
    for (const name of MIGRATION_NAMES) console.log(`pending  ${name}`)
    return 0
  }
  const database = openDatabase(config)
  try {
    const migrations = await listMigrations(database.db)
    const applied = await listAppliedMigrations(database.db)
    for (const { name, appliedAt } of migrations) console.log(appliedAt ? `applied  ${name}  ${appliedAt.toISOString()}` : `pending  ${name}`)
    for (const name of applied.filter((known) => !migrations.some((migration) => migration.name === known))) console.log(`unknown  ${name}  (applied by a newer Coffer)`)
    const pending = migrations.filter((migration) => !migration.appliedAt).length
    console.log(pending === 0 ? 'schema is up to date' : `${pending} pending: they run when the service starts, or with \`coffer migrate\``)
    return 0
  } finally {
    await database.close()
  }
}

export { BackupError }
