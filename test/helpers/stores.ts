import crypto from 'node:crypto'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after } from 'node:test'
import type { FastifyInstance } from 'fastify'
import { buildApp } from '../../src/app.ts'
import { loadConfig, type Config } from '../../src/config.ts'
import { openDatabase, type Database } from '../../src/db/database.ts'
import { migrateToLatest } from '../../src/db/migrate.ts'
import { prepareWebhookSecrets } from '../../src/events/webhook-secrets.ts'
import { hashToken } from '../../src/http/tokens.ts'
import { ADMIN_KEY } from './app.ts'
import { createDatabase } from '../../scripts/lib/postgres.ts'

export type StoreKind = 'sqlite' | 'postgres'

/** An empty store of either kind, as an operator's environment names it; nothing is created in it yet. */
export interface Store {
  kind: StoreKind
  /** DATA_DIR and DATABASE_URL for `coffer` and the service. */
  env: Record<string, string>
  config: Config
  remove(): void
}

export async function emptyStore(kind: StoreKind, env: Record<string, string> = {}): Promise<Store> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'coffer-store-'))
  let url = ''
  if (kind === 'postgres') {
    const adminUrl = process.env.TEST_PG_ADMIN_URL
    if (!adminUrl) throw new Error('TEST_PG_ADMIN_URL is not set: run with `npm run test:pg`')
    url = await createDatabase(adminUrl)
  }
  const storeEnv = { DATA_DIR: dataDir, DATABASE_URL: url, ADMIN_API_KEY: ADMIN_KEY, ...env }
  const config = loadConfig({
    ...storeEnv,
    LOG_LEVEL: process.env.LOG_LEVEL ?? 'silent',
    AUTH_RATE_LIMIT: '0',
    WEBHOOK_ALLOW_PRIVATE: 'true',
  })
  return { kind, env: storeEnv, config, remove: () => fs.rmSync(dataDir, { recursive: true, force: true }) }
}

/** The service on a store, as `coffer serve` builds it (migrations run first). */
export async function serveStore(store: Store): Promise<{ app: FastifyInstance; database: Database; close(): Promise<void> }> {
  const database = openDatabase(store.config)
  await migrateToLatest(database.db)
  const app = await buildApp({
    config: store.config,
    database,
    adminKeyHash: hashToken(store.config.adminApiKey ?? ADMIN_KEY),
    secretsKey: await prepareWebhookSecrets(database.db, store.config),
  })
  return {
    app,
    database,
    async close() {
      await app.close()
      await database.close()
    },
  }
}

/**
 * The stores of one test file, all removed after it with a scratch directory for its files. By
 * default every store shares one secrets key, as the instances of one deployment do (SECRETS_KEY);
 * `sharedKey: false` leaves it to the store's data directory, as a fresh install does.
 */
export function storesOfThisFile(prefix: string) {
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), prefix))
  const made: Store[] = []
  const secretsKey = crypto.randomBytes(32).toString('base64')
  after(() => {
    for (const one of made) one.remove()
    fs.rmSync(scratch, { recursive: true, force: true })
  })
  return {
    scratch,
    made,
    async store(kind: StoreKind, options: { sharedKey?: boolean } = {}): Promise<Store> {
      const one = await emptyStore(kind, options.sharedKey === false ? {} : { SECRETS_KEY: secretsKey })
      made.push(one)
      return one
    },
  }
}
