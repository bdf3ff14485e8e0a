import { buildApp } from './app.ts'
import { ConfigError, loadConfig, type Config } from './config.ts'
import { openDatabase } from './db/database.ts'
import { describeStorageFault, isStorageUnavailable } from './db/faults.ts'
import { migrateToLatest } from './db/migrate.ts'
import { prepareWebhookSecrets } from './events/webhook-secrets.ts'
import { checkJournalWatermark } from './journal/journal.service.ts'
import { secretsKeyFile } from './secrets/secrets-key.ts'
import { resolveAdminKey } from './http/admin-key.ts'
import { startTracing } from './telemetry/sdk.ts'
import { VERSION } from './version.ts'

/**
 * Standard output for the service's JSON log lines, holding them back until `release`: the start
 * banner goes out first as plain lines, then the logs begin. After that, the lines of one turn of
 * the event loop go out as one write (a system call per line cost every request), before the next
 * turn's I/O and when the process exits.
 */
class HeldLog {
  #held: string[] | undefined = []
  #pending: string[] = []

  write(line: string): void {
    if (this.#held) {
      this.#held.push(line)
      return
    }
    if (this.#pending.length === 0) setImmediate(() => this.flush())
    this.#pending.push(line)
  }

  release(): void {
    const held = this.#held ?? []
    this.#held = undefined
    for (const line of held) process.stdout.write(line)
    process.once('exit', () => this.flush())
  }

  /** Writes the lines of this turn; standard output is written synchronously to files and pipes, so also at exit. */
  flush(): void {
    if (this.#pending.length === 0) return
    const lines = this.#pending.join('')
    this.#pending = []
    process.stdout.write(lines)
  }
}

/** The start banner: where the service answers and what it runs on, as plain lines for a person. */
function banner(url: string, storage: string, adminKeyFile: string | undefined, secretsFile: string | undefined): string[] {
  return [
    `Coffer is listening on ${url}`,
    `  console:       ${url}/console/`,
    `  API reference: ${url}/docs`,
    `  storage:       ${storage}`,
    adminKeyFile ? `  admin key:     stored in ${adminKeyFile}` : '  admin key:     from ADMIN_API_KEY',
    secretsFile
      ? `  secrets key:   stored in ${secretsFile} (keep it with the admin key, apart from backups)`
      : '  secrets key:   from SECRETS_KEY',
  ]
}

/** Starts the service: config → storage → server → signals. Resolves once it is listening. */
export async function serve(config: Config): Promise<void> {
  const adminKey = resolveAdminKey(config)
  const tracing = await startTracing(process.env, VERSION)
  const log = new HeldLog()
  const database = openDatabase({ ...config, backgroundCheckpoints: true })
  let app
  try {
    await migrateToLatest(database.db).catch((error: unknown) => {
      throw timedOut(error)
        ? new Error(
            "a migration ran past the service's PostgreSQL timeouts (PG_STATEMENT_TIMEOUT_MS, PG_QUERY_TIMEOUT_MS): " +
              'run `coffer migrate`, which has none, then start again (docs/operations.md, "Upgrades")',
            { cause: error },
          )
        : error
    })
    let secretsKey
    try {
      await checkJournalWatermark(database.db)
      secretsKey = await prepareWebhookSecrets(database.db, config)
    } catch (error) {
      await database.close()
      throw error
    }
    app = await buildApp({ config, database, adminKeyHash: adminKey.hash, secretsKey, logStream: log, tracing })
  } catch (error) {
    log.release()
    throw error
  }

  let closing = false
  const shutdown = async (signal: string) => {
    if (closing) return
    closing = true
    app.log.info({ signal }, 'shutting down: finishing in-flight requests')
    const force = setTimeout(() => process.exit(1), 25_000)
    force.unref()
    try {
      await app.close()
      await database.close()
      await tracing?.shutdown()
      app.log.info('stopped')
    } finally {
      process.exit(0)
    }
  }
  // Last line of defence: every connection and loop handles its own storage errors (db/postgres.ts,
  // events/), but a storage fault that still escapes is logged, never a reason to stop serving.
  // Anything else ends the process as Node would.
  const survive = (error: unknown) => {
    if (!isStorageUnavailable(error)) throw error
    const cause = describeStorageFault(error)
    app.log.error(
      { cause: cause.code, reason: cause.message },
      `storage fault outside any request: ${cause.code ?? 'unknown cause'}: ${cause.message}`,
    )
  }
  process.on('uncaughtException', survive)
  process.on('unhandledRejection', survive)
  process.on('SIGTERM', () => void shutdown('SIGTERM'))
  process.on('SIGINT', () => void shutdown('SIGINT'))

  try {
    await app.listen({ port: config.port, host: config.host })
  } catch (error) {
    log.release()
    throw error
  }
  const shown = config.host === '0.0.0.0' || config.host === '::' ? 'localhost' : config.host
  const address = app.server.address()
  const port = typeof address === 'object' && address ? address.port : config.port
  const storage = config.databaseUrl ? 'PostgreSQL' : `SQLite (${config.dataDir}/coffer.sqlite)`
  process.stdout.write(
    `${banner(`http://${shown}:${port}`, storage, adminKey.file, config.secretsKey ? undefined : secretsKeyFile(config)).join('\n')}\n\n`,
  )
  log.release()
}

/** Whether PostgreSQL cancelled a statement at `statement_timeout`, or no answer came within the client's bound. */
function timedOut(error: unknown): boolean {
  const code = (error as { code?: unknown } | undefined)?.code
  return code === '57014' || code === 'QUERY_TIMEOUT'
}

/** `npm start` and `node dist/main.js`: reads the configuration and serves; exits 2 on a bad configuration, 1 when it cannot start. */
export function start(): void {
  let config: Config
  try {
    config = loadConfig()
  } catch (error) {
    if (error instanceof ConfigError) {
      console.error(error.message)
      process.exit(2)
    }
    throw error
  }
  serve(config).catch((error) => {
    console.error('Coffer failed to start:', error instanceof Error ? error.message : error)
    process.exit(1)
  })
}

function isMain(): boolean {
  return process.argv[1] !== undefined && import.meta.url.endsWith(process.argv[1].replace(/\\/g, '/').split('/').pop() ?? '')
}

if (isMain()) start()
