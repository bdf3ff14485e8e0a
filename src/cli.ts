import fs from 'node:fs'
import { parseArgs } from 'node:util'
import { ConfigError, loadConfig, type Config } from './config.ts'
import { openDatabase, type Database } from './db/database.ts'
import { describeStorageFault, isStorageUnavailable } from './db/faults.ts'
import { migrateToLatest } from './db/migrate.ts'
import { forLongReads } from './db/sqlite-statements.ts'
import { readAdminKey, resolveAdminKey } from './http/admin-key.ts'
import { createOutbox } from './events/outbox.ts'
import { watchBalances } from './monitors/monitors.service.ts'
import { AppError, ERRORS } from './http/errors.ts'
import { Address } from './http/schemas.ts'
import { createAssetsService } from './ledger/assets.service.ts'
import { AssetName } from './ledger/ledger.schemas.ts'
import { createLedger, type Ledger } from './ledger/ledger.service.ts'
import { repairRunningBalances } from './ledger/repair.ts'
import { verifyLedger } from './ledger/verify.ts'
import { readJournalText } from './journal/journal.service.ts'
import { findSigningKey, verifyJournal, verifyJournalInThread } from './journal/verify-journal.ts'
import {
  BackupError,
  backupCommand,
  migrateStatusCommand,
  operatorDatabase,
  restoreCommand,
  rotateSecretsKeyCommand,
  SecretsKeyError,
} from './operations/commands.ts'
import { findLiveWalletByAddress, findLiveWalletById, findLiveWalletIds } from './wallets/wallets.service.ts'

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
  issue <asset> --csv <file> [--memo <text>]
                                      issue to every wallet of a CSV file of \`wallet,quantity\`
                                      lines (\`-\` reads standard input), all or nothing
  issue … --expires-at <time>         the issued units expire at <time> (ISO 8601, a minute to
                                      10 years ahead); either form of issue
  burn <wallet> <asset> [quantity]    burn units (default: the whole holding) back to mint
  admin-key                           print the admin key (generating it on first use)
  verify                              recompute every holding from the journal and check the ledger,
                                      then every journal hash, checkpoint root and signature
  export [--after P] [--follow]       write the journal after position P (default 0) to standard
                                      output, one Transaction (JSON) a line; --follow keeps
                                      writing new entries until interrupted
  verify --repair                     first rewrite the running balances (balances in time) that
                                      the journal does not give, from the journal, then verify;
                                      never changes the journal, holdings or holds
  backup <file>                       write a consistent backup of the whole store while it serves
  restore <file>                      restore a backup into an empty store, then verify it
  rotate-secrets-key                  re-encrypt the webhook secrets under a new key (NEW_SECRETS_KEY or generated)

<wallet> is a wallet id or address; <asset> is an asset id or name. In the CSV file, one line
per wallet: its id or address, a comma, the quantity; a first line \`wallet,quantity\` is a header.
Blank lines and lines starting with # are skipped; a bad line is refused with its number, and
then nothing is issued.
Exit status: 0 on success, 1 on a failed check or refused operation, 2 on bad usage or configuration.`

class UsageError extends Error {}

/** The API's asset-name pattern (`ledger/ledger.schemas.ts`), so the CLI accepts exactly what the API does. */
const ASSET_NAME = new RegExp(AssetName.pattern as string)
const ADDRESS = new RegExp(Address.pattern as string)

function assetName(raw: string | undefined, what: string): string {
  if (raw === undefined || !ASSET_NAME.test(raw)) throw new UsageError(`${what} must be ${AssetName.description}`)
  return raw
}

function positiveInteger(raw: string | undefined, what: string): number {
  if (raw === undefined || !/^[1-9][0-9]*$/.test(raw) || !Number.isSafeInteger(Number(raw)))
    throw new UsageError(`${what} must be a positive integer`)
  return Number(raw)
}

function nonNegativeNumber(raw: string | undefined, what: string): number {
  const value = Number(raw)
  if (raw === undefined || raw.trim() === '' || !Number.isFinite(value) || value < 0)
    throw new UsageError(`${what} must be a non-negative number`)
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
  const assets = createAssetsService({ db: database.db })
  const asset = /^\d+$/.test(ref) ? await assets.findLiveAssetById(Number(ref)) : await assets.findLiveAssetByName(ref)
  if (!asset) throw new AppError('I000', `no asset ${ref}`)
  return asset.id
}

/** The most lines of one `coffer issue --csv` file: issued in one database transaction. */
const MAX_CSV_LINES = 100_000

/** A line of an issuance CSV file that cannot be issued: every such line is reported, and nothing issued. */
class CsvError extends Error {
  constructor(readonly problems: string[]) {
    super(problems.join('; '))
  }
}

interface CsvEntry {
  line: number
  wallet: string
  quantity: number
}

/** One field of a CSV line: surrounding spaces dropped, and the quotes of a quoted field. */
function csvField(raw: string): string {
  const field = raw.trim()
  return field.length >= 2 && field.startsWith('"') && field.endsWith('"') ? field.slice(1, -1).replaceAll('""', '"').trim() : field
}

/** Parses `wallet,quantity` lines; throws CsvError naming every bad line by its number. */
function parseIssuanceCsv(text: string): CsvEntry[] {
  const entries: CsvEntry[] = []
  const problems: string[] = []
  let first = true
  for (const [index, raw] of text.split(/\r?\n/).entries()) {
    const line = index + 1
    const content = raw.replace(/^\uFEFF/, '').trim()
    if (content === '' || content.startsWith('#')) continue
    const fields = content.split(',').map(csvField)
    const header = first && fields.length === 2 && fields[0].toLowerCase() === 'wallet' && fields[1].toLowerCase() === 'quantity'
    first = false
    if (header) continue
    if (fields.length !== 2) {
      problems.push(`line ${line}: expected "wallet,quantity", got ${fields.length} field(s)`)
      continue
    }
    const [wallet, quantity] = fields
    if (/^\d+$/.test(wallet) ? !Number.isSafeInteger(Number(wallet)) || Number(wallet) === 0 : !ADDRESS.test(wallet))
      problems.push(`line ${line}: "${wallet}" is neither a wallet id nor an address (${Address.description})`)
    else if (!/^[1-9][0-9]*$/.test(quantity) || !Number.isSafeInteger(Number(quantity)))
      problems.push(`line ${line}: the quantity "${quantity}" is not a positive integer up to 2^53-1`)
    else entries.push({ line, wallet, quantity: Number(quantity) })
  }
  if (problems.length === 0 && entries.length === 0) problems.push('the file has no `wallet,quantity` line')
  if (entries.length > MAX_CSV_LINES) problems.push(`the file has ${entries.length} lines to issue, more than ${MAX_CSV_LINES}: split it`)
  if (problems.length > 0) throw new CsvError(problems)
  return entries
}

/** `coffer issue <asset> --csv <file>`: every line's wallet resolved first, then one issuance of all lines, or nothing. */
async function issueCsv(
  ledger: Ledger,
  database: Database,
  assetRef: string | undefined,
  file: string,
  memo: string | undefined,
  expiresAt: string | undefined,
): Promise<number> {
  const assetId = await resolveAsset(database, assetRef)
  if (memo !== undefined && memo.length > 64) throw new UsageError('--memo must be at most 64 characters')
  let text: string
  try {
    text = fs.readFileSync(file === '-' ? 0 : file, 'utf8')
  } catch (error) {
    throw new UsageError(`cannot read ${file}: ${(error as Error).message}`)
  }
  const entries = parseIssuanceCsv(text)
  const problems: string[] = []
  const walletIds: number[] = []
  // Ids in one query; addresses one by one.
  const byId = (entry: CsvEntry) => /^\d+$/.test(entry.wallet)
  const liveIds = await findLiveWalletIds(
    database.db,
    entries.filter(byId).map((entry) => Number(entry.wallet)),
  )
  for (const entry of entries) {
    const walletId = byId(entry)
      ? liveIds.has(Number(entry.wallet))
        ? Number(entry.wallet)
        : undefined
      : (await findLiveWalletByAddress(database.db, entry.wallet))?.id
    if (walletId !== undefined) walletIds.push(walletId)
    else problems.push(`line ${entry.line}: no wallet ${entry.wallet}`)
  }
  if (problems.length > 0) throw new CsvError(problems)
  let transactions
  try {
    transactions = await ledger.issuance.issueToMany({
      asset_id: assetId,
      entries: entries.map((entry, i) => ({ wallet_id: walletIds[i], quantity: entry.quantity })),
      memo,
      expires_at: expiresAt,
    })
  } catch (error) {
    // The ledger names the entry (`entries[i]: …`): name its line instead.
    const item = error instanceof AppError ? /^entries\[(\d+)\]: (.*)$/.exec(error.detail ?? '') : null
    if (item && error instanceof AppError)
      throw new CsvError([`line ${entries[Number(item[1])].line}: ${error.code} ${ERRORS[error.code].message}: ${item[2]}`])
    throw error
  }
  const total = entries.reduce((sum, entry) => sum + entry.quantity, 0)
  const asset = transactions[0].assets[0].asset.name
  console.log(
    `issued ${total} ${asset} to ${new Set(walletIds).size} wallet(s) in ${transactions.length} transaction(s), ` +
      `ids ${transactions[0].id}-${transactions[transactions.length - 1].id}`,
  )
  return 0
}

function progressBar(done: number, total: number, noun = 'transactions'): void {
  if (!process.stderr.isTTY || total < 10_000) return
  const width = 30
  const filled = Math.round((done / total) * width)
  process.stderr.write(`\r  [${'#'.repeat(filled)}${' '.repeat(width - filled)}] ${done}/${total} ${noun}`)
  if (done >= total) process.stderr.write('\n')
}

const count = (n: number, noun: string, plural = `${noun}s`) => `${n} ${n === 1 ? noun : plural}`

type Progress = (done: number, total: number) => void

/** Transactions from which the journal's check gets a thread: below, starting one costs more than it saves. */
const THREAD_FROM = 100_000

/**
 * `coffer verify`: the ledger and the journal at once, the journal on a thread of its own with its own
 * connection and snapshot, so the two halves take both cores (and on PostgreSQL the server's too).
 */
function verify(config: Config): (database: Database) => Promise<number> {
  return async (database) => {
    const halves = [
      [0, 0],
      [0, 0],
    ]
    const progress =
      (half: number): Progress =>
      (done, total) => {
        halves[half] = [done, total]
        if (halves[0][1] > 0 && halves[1][1] > 0) progressBar(halves[0][0] + halves[1][0], halves[0][1] + halves[1][1], 'rows checked')
      }
    await forLongReads(database.db)
    const { last } = await database.db
      .selectFrom('transactions')
      .select((eb) => eb.fn.max('id').as('last'))
      .executeTakeFirstOrThrow()
    const inThread = Number(last ?? 0) >= THREAD_FROM
    const [ledger, journal] = await Promise.all([checkLedger(database, progress(0)), checkJournal(config, database, inThread, progress(1))])
    const ledgerStatus = ledger()
    return journal() || ledgerStatus
  }
}

/** Verifies the journal; answers what prints its report and gives the exit status. */
async function checkJournal(config: Config, database: Database, inThread: boolean, progress: Progress): Promise<() => number> {
  const started = Date.now()
  const key = findSigningKey(config.signingKey, config.dataDir)
  const report = inThread
    ? await verifyJournalInThread(operatorDatabase(config), key, progress)
    : await verifyJournal(database.db, key, progress)
  const seconds = ((Date.now() - started) / 1000).toFixed(1)
  return () => {
    console.log(
      `checked ${count(report.entries, 'journal entry', 'journal entries')}, ${count(report.checkpoints, 'checkpoint')} in ${seconds} s` +
        (report.unpositioned > 0 ? ` (${count(report.unpositioned, 'transaction')} not positioned yet)` : ''),
    )
    if (!report.signaturesChecked)
      console.log('no signing key found (SIGNING_KEY or DATA_DIR/signing-key): checkpoint signatures not checked')
    if (report.ok) {
      console.log('journal OK: every hash, checkpoint root and signature matches the transactions')
      return 0
    }
    if (report.firstMismatch !== undefined) console.log(`journal: position ${report.firstMismatch} is the first that no longer matches`)
    console.log(`journal has ${report.problems.length} problem(s):`)
    for (const problem of report.problems.slice(0, 100)) console.log(`  - ${problem}`)
    return 1
  }
}

/** `coffer export`: the journal as NDJSON on standard output; ends cleanly on SIGINT, SIGTERM or a closed pipe. */
async function exportJournal(database: Database, after: number, follow: boolean): Promise<number> {
  const stop = new AbortController()
  const end = () => stop.abort()
  process.once('SIGINT', end)
  process.once('SIGTERM', end)
  const closed = (error: NodeJS.ErrnoException) => {
    if (error.code === 'EPIPE') stop.abort()
  }
  process.stdout.on('error', closed)
  try {
    for await (const text of readJournalText(database.db, after, follow, stop.signal)) {
      if (!process.stdout.write(text) && !stop.signal.aborted) {
        await new Promise((resolve) => {
          process.stdout.once('drain', resolve)
          stop.signal.addEventListener('abort', resolve)
        })
      }
      if (stop.signal.aborted) break
    }
    return 0
  } finally {
    process.off('SIGINT', end)
    process.off('SIGTERM', end)
  }
}

/** Verifies the ledger; answers what prints its report and gives the exit status. */
async function checkLedger(database: Database, progress: Progress): Promise<() => number> {
  const started = Date.now()
  const report = await verifyLedger(database.db, progress)
  const seconds = ((Date.now() - started) / 1000).toFixed(1)
  return () => {
    console.log(
      `checked ${count(report.transactions, 'transaction')}, ${count(report.holdings, 'holding')}, ` +
        `${count(report.assets, 'asset')} in ${seconds} s`,
    )
    if (report.ok) {
      console.log('ledger OK: every holding matches the journal, every asset sums to zero with mint, nothing below its credit limit')
      return 0
    }
    console.log(`ledger has ${report.problems.length} problem(s):`)
    for (const problem of report.problems.slice(0, 100)) console.log(`  - ${problem}`)
    if (report.problems.length > 100) console.log(`  … and ${report.problems.length - 100} more`)
    if (report.wrongRunningBalances > 0)
      console.log('running balances that the journal does not give are rewritten from it by `coffer verify --repair`')
    return 1
  }
}

/** `coffer verify --repair`: rewrites the running balances, then verifies; the exit status is verify's. */
function repairAndVerify(config: Config): (database: Database) => Promise<number> {
  return async (database) => {
    const started = Date.now()
    const repair = await repairRunningBalances(database.db, (done, total) => progressBar(done, total, 'wallets'))
    const seconds = ((Date.now() - started) / 1000).toFixed(1)
    const changes = (r: { rewritten: number; added: number; removed: number }) =>
      `${r.rewritten} rewritten, ${r.added} added, ${r.removed} removed`
    if (repair.holdings === 0) {
      console.log(`repair: every running balance is what the journal gives, nothing changed (${seconds} s)`)
    } else {
      console.log(
        `repair: ${count(repair.rewritten + repair.added + repair.removed, 'running balance')} of ` +
          `${count(repair.holdings, 'holding')} changed in ${seconds} s (${changes(repair)}):`,
      )
      for (const holding of repair.named) console.log(`  - wallet ${holding.wallet_id}, asset ${holding.asset_id}: ${changes(holding)}`)
      if (repair.holdings > repair.named.length) console.log(`  … and ${count(repair.holdings - repair.named.length, 'more holding')}`)
    }
    const status = await verify(config)(database)
    if (status !== 0)
      console.log(
        'the repair rewrites only running balances; the journal, holdings and holds are never changed ' +
          '(docs/operations.md#repairing-running-balances)',
      )
    return status
  }
}

async function withDatabase(config: Config, work: (database: Database) => Promise<number>): Promise<number> {
  const database = openDatabase(operatorDatabase(config))
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
    const outbox = createOutbox()
    const ledger = createLedger({
      database,
      events: { ...outbox, watchBalances: watchBalances(outbox) },
      maxBatch: config.groupCommitMaxBatch,
    })
    try {
      return await work(ledger, database)
    } finally {
      await ledger.close()
    }
  })
}

async function run(
  config: Config,
  command: string | undefined,
  rest: string[],
  flags: { status?: boolean; repair?: boolean; csv?: string; memo?: string; after?: string; follow?: boolean; expiresAt?: string } = {},
): Promise<number> {
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
      return withDatabase(config, flags.repair ? repairAndVerify(config) : verify(config))
    case 'export': {
      const after = flags.after === undefined ? 0 : Number(flags.after)
      if (!Number.isSafeInteger(after) || after < 0) throw new UsageError('--after takes a position (an integer, 0 or more)')
      return withDatabase(config, (database) => exportJournal(database, after, flags.follow === true))
    }
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
      return withDatabase(config, verify(config))
    case 'asset':
      return withDatabase(config, async (database) => {
        const [action, first, second] = rest
        const assets = createAssetsService({ db: database.db })
        if (action === 'list') {
          for (const asset of await assets.listAssets()) console.log(`${asset.id}\t${asset.name}\t${asset.value}`)
          return 0
        }
        if (action === 'create') {
          console.log(JSON.stringify(await assets.createAsset(assetName(first, '<name>'), nonNegativeNumber(second, '<value>'))))
          return 0
        }
        if (action === 'set-value') {
          const id = await resolveAsset(database, first)
          console.log(JSON.stringify(await assets.revalueAsset(id, nonNegativeNumber(second, '<value>'))))
          return 0
        }
        if (action === 'rename') {
          const id = await resolveAsset(database, first)
          console.log(JSON.stringify(await assets.renameAsset(id, assetName(second, '<new-name>'))))
          return 0
        }
        throw new UsageError('asset needs one of: list, create, set-value, rename')
      })
    case 'issue':
      if (flags.expiresAt !== undefined && Number.isNaN(Date.parse(flags.expiresAt)))
        throw new UsageError('--expires-at takes a time (ISO 8601, say 2030-03-01T00:00:00Z)')
      if (flags.csv !== undefined)
        return withLedger(config, (ledger, database) =>
          issueCsv(ledger, database, rest[0], flags.csv as string, flags.memo, flags.expiresAt),
        )
      return withLedger(config, async (ledger, database) => {
        const walletId = await resolveWallet(database, rest[0])
        const assetId = await resolveAsset(database, rest[1])
        const quantity = positiveInteger(rest[2], '<quantity>')
        console.log(JSON.stringify(await ledger.issuance.issue(walletId, assetId, quantity, undefined, flags.expiresAt)))
        return 0
      })
    case 'burn':
      return withLedger(config, async (ledger, database) => {
        const walletId = await resolveWallet(database, rest[0])
        const assetId = await resolveAsset(database, rest[1])
        const quantity = rest[2] === undefined ? undefined : positiveInteger(rest[2], '<quantity>')
        const transaction = await ledger.issuance.burn(walletId, assetId, quantity)
        console.log(transaction ? JSON.stringify(transaction) : 'nothing to burn')
        return 0
      })
    default:
      throw new UsageError(command ? `unknown command "${command}"` : 'missing command')
  }
}

/** Runs the `coffer` command line; resolves to the process exit status. */
export async function main(argv: string[]): Promise<number> {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    strict: false,
    options: {
      help: { type: 'boolean', short: 'h' },
      status: { type: 'boolean' },
      repair: { type: 'boolean' },
      csv: { type: 'string' },
      memo: { type: 'string' },
      after: { type: 'string' },
      follow: { type: 'boolean' },
      'expires-at': { type: 'string' },
    },
  })
  if (values.help || positionals.length === 0 || positionals[0] === 'help') {
    console.log(USAGE)
    return positionals.length === 0 && !values.help ? 2 : 0
  }
  try {
    const config = loadConfig()
    const text = (value: unknown) => (typeof value === 'string' ? value : undefined)
    if (values['expires-at'] === true) throw new UsageError('--expires-at takes a time')
    return await run(config, positionals[0], positionals.slice(1), {
      status: values.status === true,
      repair: values.repair === true,
      csv: text(values.csv),
      memo: text(values.memo),
      after: text(values.after),
      follow: values.follow === true,
      expiresAt: text(values['expires-at']),
    })
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
    if (error instanceof CsvError) {
      console.error('coffer: nothing issued:')
      for (const problem of error.problems.slice(0, 50)) console.error(`  ${problem}`)
      if (error.problems.length > 50) console.error(`  … and ${error.problems.length - 50} more`)
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
