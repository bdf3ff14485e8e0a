import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { pathToFileURL } from 'node:url'
import type { InjectOptions, LightMyRequestResponse } from 'fastify'

/**
 * Calling an app in process with Fastify's `inject`, for the tools that measure the service's own
 * CPU without a socket or a load generator. They may load the app from another checkout, so this
 * takes anything with `inject`.
 */

/** A caller of the app: sends a request and answers its JSON body; throws, naming it, unless the status is `status`. */
export function injector(app: { inject(options: InjectOptions): Promise<LightMyRequestResponse> }, label = '') {
  return async (options: InjectOptions, status: number) => {
    const response = await app.inject(options)
    if (response.statusCode !== status) throw new Error(`${label}: ${JSON.stringify(options)}: ${response.statusCode} ${response.body}`)
    return response.json()
  }
}

export type Call = ReturnType<typeof injector>

/** Registers `name`, signs in and makes a wallet key: the session's token, the key's, and its wallet. */
export async function signUpWithKey(call: Call, name: string): Promise<{ session: string; key: string; walletId: number }> {
  await call({ method: 'POST', url: '/users', payload: { username: name, password: 'correct horse' } }, 201)
  const login = await call(
    { method: 'POST', url: `/users/${name}/sessions`, payload: { password: 'correct horse', return_token: true } },
    201,
  )
  const key = await call(
    { method: 'POST', url: '/wallet/sessions', headers: { authorization: `Bearer ${login.token}` }, payload: { name: 'bench' } },
    201,
  )
  return { session: login.token, key: key.token, walletId: key.wallet_id }
}

/** An asset `gold`, and `count` wallets named `prefix0…` each holding a billion of it, with a key each. */
export async function keyedGoldWallets(
  call: Call,
  adminKey: string,
  prefix: string,
  count: number,
): Promise<{ walletId: number; key: string }[]> {
  const admin = { authorization: `Bearer ${adminKey}` }
  const asset = await call({ method: 'POST', url: '/assets', headers: admin, payload: { name: 'gold', value: 1 } }, 201)
  return Promise.all(
    Array.from({ length: count }, async (_, i) => {
      const { walletId, key } = await signUpWithKey(call, `${prefix}${i}`)
      await call(
        { method: 'POST', url: `/wallets/${walletId}/assets`, headers: admin, payload: { id: asset.id, quantity: 1_000_000_000 } },
        201,
      )
      return { walletId, key }
    }),
  )
}

/** The modules an app is built from, out of the checkout at `root` (so that two checkouts can run in one process). */
export async function appCode(root: string) {
  const load = (file: string) => import(pathToFileURL(path.join(root, file)).href)
  const [app, config, database, migrate, secrets, tokens] = await Promise.all([
    load('src/app.ts'),
    load('src/config.ts'),
    load('src/db/database.ts'),
    load('src/db/migrate.ts'),
    load('src/events/webhook-secrets.ts'),
    load('src/http/tokens.ts'),
  ])
  return {
    buildApp: app.buildApp as typeof import('../src/app.ts').buildApp,
    loadConfig: config.loadConfig as typeof import('../src/config.ts').loadConfig,
    openDatabase: database.openDatabase as typeof import('../src/db/database.ts').openDatabase,
    openSqlite: database.openSqlite as typeof import('../src/db/database.ts').openSqlite,
    migrateToLatest: migrate.migrateToLatest as typeof import('../src/db/migrate.ts').migrateToLatest,
    prepareWebhookSecrets: secrets.prepareWebhookSecrets as typeof import('../src/events/webhook-secrets.ts').prepareWebhookSecrets,
    hashToken: tokens.hashToken as typeof import('../src/http/tokens.ts').hashToken,
  }
}

/**
 * The app of the checkout at `root` on a fresh store (SQLite in a temp directory, or the PostgreSQL
 * database at `databaseUrl`), with `settings` added to its environment, logging to nowhere; `close` stops it and removes the directory.
 */
export async function buildAppAt(
  root: string,
  adminKey: string,
  databaseUrl: string | undefined,
  prefix: string,
  settings: Record<string, string> = {},
) {
  const { buildApp, loadConfig, openDatabase, migrateToLatest, prepareWebhookSecrets, hashToken } = await appCode(root)
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), `${prefix}-`))
  const env: Record<string, string> = { DATA_DIR: dataDir, ADMIN_API_KEY: adminKey, LOG_LEVEL: 'info', AUTH_RATE_LIMIT: '0', ...settings }
  if (databaseUrl) env.DATABASE_URL = databaseUrl
  const config = loadConfig(env)
  const database = openDatabase({ ...config, backgroundCheckpoints: true })
  await migrateToLatest(database.db)
  const app = await buildApp({
    config,
    database,
    adminKeyHash: hashToken(adminKey),
    secretsKey: await prepareWebhookSecrets(database.db, config),
    logStream: { write: () => undefined },
  })
  return {
    app,
    database,
    dataDir,
    async close() {
      await app.close()
      await database.close()
      fs.rmSync(dataDir, { recursive: true, force: true })
    },
  }
}
