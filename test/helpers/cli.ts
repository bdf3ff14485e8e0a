import { execFile } from 'node:child_process'
import fs from 'node:fs'
import { promisify } from 'node:util'
import type { Database } from '../../src/db/database.ts'
import { openTestDatabase } from './app.ts'

const run = promisify(execFile)

export interface CofferRun {
  code: number
  stdout: string
  stderr: string
}

/** Runs `coffer …` as an operator would, in a process of its own, with `env` added to this one's. */
export async function runCoffer(env: Record<string, string | undefined>, ...args: string[]): Promise<CofferRun> {
  try {
    const { stdout, stderr } = await run(process.execPath, ['bin/coffer.js', ...args], { env: { ...process.env, ...env }, timeout: 60_000 })
    return { code: 0, stdout, stderr }
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string }
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr }
  }
}

/** A store for `coffer …` to work on: its database opened here too, the environment that names it. */
export interface CliStore {
  database: Database
  dataDir: string
  env: Record<string, string>
  /** What the wallet at `address` holds of its one asset (0 without a holding). */
  holdingOf(address: string): Promise<number>
  /** A user with one wallet at `address`, written straight into the store. */
  addWallet(username: string, address: string): Promise<number>
  close(): Promise<void>
}

export async function openCliStore(): Promise<CliStore> {
  const { database, dataDir, url } = await openTestDatabase()
  return {
    database,
    dataDir,
    env: { DATA_DIR: dataDir, DATABASE_URL: url ?? '', ADMIN_API_KEY: '' },
    async holdingOf(address) {
      const row = await database.db
        .selectFrom('holdings')
        .innerJoin('wallets', 'wallets.id', 'holdings.wallet_id')
        .select('quantity')
        .where('wallets.address', '=', address)
        .executeTakeFirst()
      return row ? Number(row.quantity) : 0
    },
    async addWallet(username, address) {
      const now = new Date().toISOString()
      const user = await database.db
        .insertInto('users')
        .values({ username, username_key: username, password_hash: 'x', primary_wallet_id: null, created_at: now })
        .returning('id')
        .executeTakeFirstOrThrow()
      const wallet = await database.db
        .insertInto('wallets')
        .values({ address, user_id: user.id, created_at: now, deleted_at: null })
        .returning('id')
        .executeTakeFirstOrThrow()
      return Number(wallet.id)
    },
    async close() {
      await database.close()
      fs.rmSync(dataDir, { recursive: true, force: true })
    },
  }
}
