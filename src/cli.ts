import { parseArgs } from 'node:util'
import { ConfigError, loadConfig, type Config } from './config.ts'
import { openDatabase, type Database } from './db/database.ts'
import { describeStorageFault, isStorageUnavailable } from './db/faults.ts'
import { migrateToLatest } from './db/migrate.ts'
import { readAdminKey, resolveAdminKey } from './http/admin-key.ts'
import { outbox } from './events/outbox.ts'
import { AppError } from './http/errors.ts'
import * as assets from './ledger/assets.service.ts'
import { AssetName } from './ledger/ledger.schemas.ts'
import { createLedger, type Ledger } from './ledger/ledger.service.ts'
import { verifyLedger } from './ledger/verify.ts'
import { BackupError, backupCommand, migrateStatusCommand, restoreCommand, rotateSecretsKeyCommand, SecretsKeyError } from './operations/commands.ts'
import { findLiveWalletByAddress, findLiveWalletById } from './wallets/wallets.service.ts'

const USAGE = `Usage: coffer <command> [arguments]

Commands (storage from DATABASE_URL / DATA_DIR, as for the service):
  serve                               start the HTTP service (same as npm start)
  migrate                             bring the database schema up to date
  migrate --status                    list applied and pending migrations, changing nothing
  asset list                          list assets
  asset create <name> <value>         create an asset
  asset set-value <asset> <value>     change an asset's value
  asset rename <asset> <new-name>     rename an asset
  issue <wallet> <asset> <quantity>   issue new units from mint into a wallet
  burn <wallet> <asset> [quantity]    burn units (default: the whole holding) back to mint
  admin-key                           print the admin key (generating it on first use)
  verify                              recompute every holding from the journal and check the ledger
  backup <file>                       write a consistent backup of the whole store while it serves
  restore <file>                      restore a backup into an empty store, then verify it
  rotate-secrets-key                  re-encrypt the webhook secrets under a new key (NEW_SECRETS_KEY or generated)

<wallet> is a wallet id or address; <asset> is an asset id or name.
Exit status: 0 on success, 1 on a failed check or refused operation, 2 on bad usage or configuration.`

class UsageError extends Error {}

/** The API's asset-name pattern (`ledger/ledger.schemas.ts`), so the CLI accepts exactly what the API does. */
const ASSET_NAME = new RegExp(AssetName.pattern as string)

function assetName(raw: string | undefined, what: string): string {
  if (raw === undefined || !ASSET_NAME.test(raw)) throw new UsageError(`${what} must be ${AssetName.description}`)
  return raw
}

function positiveInteger(raw: string | undefined, what: string): number {
  if (raw === undefined || !/^[1-9][0-9]*$/.test(raw) || !Number.isSafeInteger(Number(raw))) throw new UsageError(`${what} must be a positive integer`)
  return Number(raw)
}

function nonNegativeNumber(raw: string | undefined, what: string): number {
  const value = Number(raw)
  if (raw === undefined || raw.trim() === '' || !Number.isFinite(value) || value < 0) throw new UsageError(`${what} must be a non-negative number`)
  return value
}

async function resolveWallet(database: Database, ref: string | undefined): Promise<number> {
  if (ref === undefined) throw new UsageError('missing <wallet>')
  const wallet = /^\d+$/.test(ref) ? await findLiveWalletById(database.db, Number(ref)) : await findLiveWalletByAddress(database.db, ref)
  if (!wallet) throw new AppError('W002', `no wallet ${ref}`)
  return wallet.id
}

async function resolveAsset(database: Database, ref: string | undefined): Promise<number> {
  if (ref === undefined) throw new UsageError('missing <asset>')
  const asset = /^\d+$/.test(ref) ? await assets.findLiveAssetById(database.db, Number(ref)) : await assets.findLiveAssetByName(database.db, ref)
  if (!asset) throw new AppError('I000', `no asset ${ref}`)
  return asset.id
}

function progressBar(done: number, total: number): void {
  if (!process.stderr.isTTY || total < 10_000) return
  const width = 30
  const filled = Math.round((done / total) * width)
  process.stderr.write(`\r  [${'#'.repeat(filled)}${' '.repeat(width - filled)}] ${done}/${total} transactions`)
  if (done >= total) process.stderr.write('\n')
}

async function verify(database: Database): Promise<number> {
  const started = Date.now()
  const report = await verifyLedger(database.db, progressBar)
  const seconds = ((Date.now() - started) / 1000).toFixed(1)
  const count = (n: number, noun: string) => `${n} ${noun}${n === 1 ? '' : 's'}`
  console.log(`checked ${count(report.transactions, 'transaction')}, ${count(report.holdings, 'holding')}, ${count(report.assets, 'asset')} in ${seconds} s`)
  if (report.ok) {
    console.log('ledger OK: every holding matches the journal, every asset sums to zero with mint, nothing negative')
    return 0
  }
  console.log(`ledger has ${report.problems.length} problem(s):`)
  for (const problem of report.problems.slice(0, 100)) console.log(`  - ${problem}`)
  if (report.problems.length > 100) console.log(`  … and ${report.problems.length - 100} more`)
  return 1
}

async function withDatabase(config: Config, work: (database: Database) => Promise<number>): Promise<number> {
  // An operator's command (migrate, verify, backup, restore) may run statements far longer than a
  // request's: on PostgreSQL only its lock waits and its connecting stay bounded.
  const database = openDatabase({ ...config, postgresTimeouts: { ...config.postgresTimeouts, statementTimeoutMs: 0, idleInTransactionTimeoutMs: 0 } })
  try {
    await migrateToLatest(database.db)
    return await work(database)
  } finally {
    await database.close()
  }
}

/** Issues or burns through the ledger, as the admin routes do (events recorded by the outbox). */
function withLedger(config: Config, work: (ledger: Ledger, database: Database) => Promise<number>): Promise<number> {
  return withDatabase(config, async (database) => {
    const ledger = createLedger({ database, events: outbox, maxBatch: config.groupCommitMaxBatch })
    try {
      return await work(ledger, database)
    } finally {
      await ledger.close()
    }
  })
}

async function run(config: Config, command: string | undefined, rest: string[], flags: { status?: boolean } = {}): Promise<number> {
  switch (command) {
    case 'serve': {
      const { serve } = await import('./main.ts')
      await serve(config)
      return new Promise<number>(() => {})
    }
    case 'migrate':
      if (flags.status) return migrateStatusCommand(config)
      return withDatabase(config, async () => {
        console.log('schema is up to date')
        return 0
      })
    case 'admin-key':
      resolveAdminKey(config)
      console.log(readAdminKey(config))
      return 0
    case 'verify':
      return withDatabase(config, verify)
    case 'backup':
      if (!rest[0]) throw new UsageError('missing <file>')
      await backupCommand(config, rest[0])
      return 0
    case 'rotate-secrets-key':
      await rotateSecretsKeyCommand(config, process.env.NEW_SECRETS_KEY)
      return 0
    case 'restore':
      if (!rest[0]) throw new UsageError('missing <file>')
      await restoreCommand(config, rest[0])
      return withDatabase(config, verify)
    case 'asset':
      return withDatabase(config, async (database) => {
        const [action, first, second] = rest
        if (action === 'list') {
          for (const asset of await assets.listAssets(database.db)) console.log(`${asset.id}\t${asset.name}\t${asset.value}`)
          return 0
        }
        if (action === 'create') {
          console.log(JSON.stringify(await assets.createAsset(database.db, assetName(first, '<name>'), nonNegativeNumber(second, '<value>'))))
          return 0
        }
        if (action === 'set-value') {
          const id = await resolveAsset(database, first)
          console.log(JSON.stringify(await assets.revalueAsset(database.db, id, nonNegativeNumber(second, '<value>'))))
          return 0
        }
        if (action === 'rename') {
          const id = await resolveAsset(database, first)
          console.log(JSON.stringify(await assets.renameAsset(database.db, id, assetName(second, '<new-name>'))))
          return 0
        }
        throw new UsageError('asset needs one of: list, create, set-value, rename')
      })
    case 'issue':
      return withLedger(config, async (ledger, database) => {
        const walletId = await resolveWallet(database, rest[0])
        const assetId = await resolveAsset(database, rest[1])
        console.log(JSON.stringify(await ledger.issue(walletId, assetId, positiveInteger(rest[2], '<quantity>'))))
        return 0
      })
    case 'burn':
      return withLedger(config, async (ledger, database) => {
        const walletId = await resolveWallet(database, rest[0])
        const assetId = await resolveAsset(database, rest[1])
        const quantity = rest[2] === undefined ? undefined : positiveInteger(rest[2], '<quantity>')
        const transaction = await ledger.burn(walletId, assetId, quantity)
        console.log(transaction ? JSON.stringify(transaction) : 'nothing to burn')
        return 0
      })
    default:
      throw new UsageError(command ? `unknown command "${command}"` : 'missing command')
  }
}

/** Runs the `coffer` command line; resolves to the process exit status. */
export async function main(argv: string[]): Promise<number> {
  const { positionals, values } = parseArgs({ args: argv, allowPositionals: true, strict: false, options: { help: { type: 'boolean', short: 'h' }, status: { type: 'boolean' } } })
  if (values.help || positionals.length === 0 || positionals[0] === 'help') {
    console.log(USAGE)
    return positionals.length === 0 && !values.help ? 2 : 0
  }
  try {
    const config = loadConfig()
    return await run(config, positionals[0], positionals.slice(1), { status: values.status === true })
  } catch (error) {
    if (error instanceof UsageError) {
      console.error(`coffer: ${error.message}\n\n${USAGE}`)
      return 2
    }
    if (error instanceof ConfigError) {
      console.error(`coffer: ${error.message}`)
      return 2
    }
    if (error instanceof BackupError || error instanceof SecretsKeyError) {
      console.error(`coffer: ${error.message}`)
      return 1
    }
    if (error instanceof AppError) {
      console.error(`coffer: ${error.message}`)
      return 1
    }
    if (isStorageUnavailable(error)) {
      const cause = describeStorageFault(error)
      console.error(`coffer: the database is unavailable or busy, try again (${cause.code ?? 'unknown cause'}: ${cause.message})`)
      return 1
    }
    throw error
  }
}
