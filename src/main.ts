import { buildApp } from './app.ts'
import { ConfigError, loadConfig, type Config } from './config.ts'
import { openDatabase } from './db/database.ts'
import { describeStorageFault, isStorageUnavailable } from './db/faults.ts'
import { migrateToLatest } from './db/migrate.ts'
import { resolveAdminKey } from './http/admin-key.ts'

/** Starts the service: config → storage → server → signals. Resolves once it is listening. */
export async function serve(config: Config): Promise<void> {
  const adminKey = resolveAdminKey(config)
  const database = openDatabase({ ...config, backgroundCheckpoints: true })
  await migrateToLatest(database.db)
  const app = await buildApp({ config, database, adminKeyHash: adminKey.hash })

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
    app.log.error({ cause: cause.code, reason: cause.message }, `storage fault outside any request: ${cause.code ?? 'unknown cause'}: ${cause.message}`)
  }
  process.on('uncaughtException', survive)
  process.on('unhandledRejection', survive)
  process.on('SIGTERM', () => void shutdown('SIGTERM'))
  process.on('SIGINT', () => void shutdown('SIGINT'))

  await app.listen({ port: config.port, host: config.host })
  const shown = config.host === '0.0.0.0' || config.host === '::' ? 'localhost' : config.host
  const address = app.server.address()
  const port = typeof address === 'object' && address ? address.port : config.port
  const url = `http://${shown}:${port}`
  const storage = config.databaseUrl ? 'PostgreSQL' : `SQLite (${config.dataDir}/coffer.sqlite)`
  console.log(`Coffer is listening on ${url}`)
  console.log(`  API reference: ${url}/docs`)
  console.log(`  storage:       ${storage}`)
  console.log(adminKey.file ? `  admin key:     stored in ${adminKey.file}` : '  admin key:     from ADMIN_API_KEY')
}

function isMain(): boolean {
  return process.argv[1] !== undefined && import.meta.url.endsWith(process.argv[1].replace(/\\/g, '/').split('/').pop() ?? '')
}

if (isMain()) {
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
