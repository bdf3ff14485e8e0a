import { Migrator, sql, type Migration, type MigrationProvider, type MigrationResultSet } from 'kysely'
import type { Db, Executor } from './database.ts'
import { withRetries } from './retry.ts'
import * as initial from './migrations/0001_initial.ts'
import * as usersPrimaryWalletIndex from './migrations/0002_users_primary_wallet_index.ts'
import * as holdingsWithoutAssetIndex from './migrations/0003_holdings_without_asset_index.ts'
import * as transactionBody from './migrations/0004_transaction_body.ts'
import * as ledgerReferences from './migrations/0005_ledger_references.ts'
import * as operatorSessions from './migrations/0006_operator_sessions.ts'
import * as retentionAndSharedLimits from './migrations/0007_retention_and_shared_limits.ts'
import * as transactionKindsAndMetadata from './migrations/0008_transaction_kinds_and_metadata.ts'
import * as holds from './migrations/0009_holds.ts'
import * as runningBalances from './migrations/0010_running_balances.ts'
import * as webhookOrigins from './migrations/0011_webhook_origins.ts'
import * as leanWebhookDeliveries from './migrations/0012_lean_webhook_deliveries.ts'
import * as pageLabelGeneration from './migrations/0013_page_label_generation.ts'
import * as webhookLeaseCounts from './migrations/0014_webhook_lease_counts.ts'
import * as journal from './migrations/0015_journal.ts'
import * as walletKeyScopes from './migrations/0016_wallet_key_scopes.ts'
import * as keyUses from './migrations/0017_key_uses.ts'
import * as creditLimits from './migrations/0018_credit_limits.ts'
import * as schedules from './migrations/0020_schedules.ts'
import * as transactionSchedule from './migrations/0021_transaction_schedule.ts'
import * as monitors from './migrations/0022_monitors.ts'
import * as expiringUnits from './migrations/0023_expiring_units.ts'
import * as sessionUserAgents from './migrations/0026_session_user_agents.ts'
import * as keyUseTotals from './migrations/0027_key_use_totals.ts'
import * as leanLedgerRows from './migrations/0031_lean_ledger_rows.ts'
import * as retentionState from './migrations/0032_retention_state.ts'
import * as eventIdsUnindexed from './migrations/0038_event_ids_unindexed.ts'
import * as journalUpperNodes from './migrations/0039_journal_upper_nodes.ts'
import * as journalWriterXid from './migrations/0040_journal_writer_xid.ts'
import * as derivedTransactionEvents from './migrations/0041_derived_transaction_events.ts'

/** Migrations live in code, in order; both dialects run the same ones. */
const migrations: Record<string, Migration> = {
  '0001_initial': initial,
  '0002_users_primary_wallet_index': usersPrimaryWalletIndex,
  '0003_holdings_without_asset_index': holdingsWithoutAssetIndex,
  '0004_transaction_body': transactionBody,
  '0005_ledger_references': ledgerReferences,
  '0006_operator_sessions': operatorSessions,
  '0007_retention_and_shared_limits': retentionAndSharedLimits,
  '0008_transaction_kinds_and_metadata': transactionKindsAndMetadata,
  '0009_holds': holds,
  '0010_running_balances': runningBalances,
  '0011_webhook_origins': webhookOrigins,
  '0012_lean_webhook_deliveries': leanWebhookDeliveries,
  '0013_page_label_generation': pageLabelGeneration,
  '0014_webhook_lease_counts': webhookLeaseCounts,
  '0015_journal': journal,
  '0016_wallet_key_scopes': walletKeyScopes,
  '0017_key_uses': keyUses,
  '0018_credit_limits': creditLimits,
  '0020_schedules': schedules,
  '0021_transaction_schedule': transactionSchedule,
  '0022_monitors': monitors,
  '0023_expiring_units': expiringUnits,
  '0026_session_user_agents': sessionUserAgents,
  '0027_key_use_totals': keyUseTotals,
  '0031_lean_ledger_rows': leanLedgerRows,
  '0032_retention_state': retentionState,
  '0038_event_ids_unindexed': eventIdsUnindexed,
  '0039_journal_upper_nodes': journalUpperNodes,
  '0040_journal_writer_xid': journalWriterXid,
  '0041_derived_transaction_events': derivedTransactionEvents,
}

const provider: MigrationProvider = { getMigrations: async () => migrations }

function migrator(db: Db): Migrator {
  return new Migrator({ db, provider, migrationTableName: 'coffer_migrations', migrationLockTableName: 'coffer_migrations_lock' })
}

/**
 * Brings the schema up to date; throws on the first failing migration. On PostgreSQL the
 * migrator runs every pending migration in one transaction, so after a race `withRetries` names
 * (a statement the server can no longer run) they run again from the start; SQLite raises none.
 */
export async function migrateToLatest(db: Db): Promise<string[]> {
  return withRetries(async () => applied(await migrator(db).migrateToLatest()))
}

/** Moves the schema up or down to the named migration (restore; tests of a migration's data changes), as `migrateToLatest`. */
export async function migrateTo(db: Db, name: string): Promise<string[]> {
  return withRetries(async () => applied(await migrator(db).migrateTo(name)))
}

function applied({ error, results }: MigrationResultSet): string[] {
  if (error) throw error
  return (results ?? []).filter((result) => result.status === 'Success').map((result) => result.migrationName)
}

/** Every migration this release knows, applied or not, with when it was applied (`coffer migrate --status`). */
export async function listMigrations(db: Db): Promise<{ name: string; appliedAt: Date | undefined }[]> {
  return (await migrator(db).getMigrations()).map((info) => ({ name: info.name, appliedAt: info.executedAt }))
}

/** Names of the migrations applied to the store, in order; none when it holds no schema yet. */
export async function listAppliedMigrations(db: Executor): Promise<string[]> {
  const tables = await db.introspection.getTables({ withInternalKyselyTables: true })
  if (!tables.some((table) => table.name === 'coffer_migrations')) return []
  const { rows } = await sql<{ name: string }>`select name from coffer_migrations order by name`.execute(db)
  return rows.map((row) => row.name)
}

/** The names of every migration of this release, in order. */
export const MIGRATION_NAMES = Object.keys(migrations)
