import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import fs from 'node:fs'
import { after, before, describe, it } from 'node:test'
import { promisify } from 'node:util'
import { openTestDatabase } from './helpers/app.ts'
import type { Database } from '../src/db/database.ts'

const run = promisify(execFile)

describe('coffer command', () => {
  let database: Database
  let env: NodeJS.ProcessEnv
  let dataDir: string

  before(async () => {
    const opened = await openTestDatabase()
    database = opened.database
    dataDir = opened.dataDir
    env = { ...process.env, DATA_DIR: dataDir, DATABASE_URL: opened.url ?? '', ADMIN_API_KEY: '' }
  })
  after(async () => {
    await database.close()
    fs.rmSync(dataDir, { recursive: true, force: true })
  })

  async function coffer(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
    try {
      const { stdout, stderr } = await run(process.execPath, ['bin/coffer.js', ...args], { env })
      return { code: 0, stdout, stderr }
    } catch (error) {
      const failed = error as { code: number; stdout: string; stderr: string }
      return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr }
    }
  }

  it('creates, renames and revalues assets, then lists them', async () => {
    assert.equal((await coffer('asset', 'create', 'gold', '2')).code, 0)
    assert.equal((await coffer('asset', 'rename', 'gold', 'Ore')).code, 0)
    assert.equal((await coffer('asset', 'set-value', 'ore', '3.5')).code, 0)
    const listed = await coffer('asset', 'list')
    assert.match(listed.stdout, /^\d+\tOre\t3\.5$/m)
  })

  it('issues and burns through mint, and verify passes', async () => {
    const user = await database.db.insertInto('users').values({ username: 'clia', username_key: 'clia', password_hash: 'x', primary_wallet_id: null, created_at: new Date().toISOString() }).returning('id').executeTakeFirstOrThrow()
    await database.db.insertInto('wallets').values({ address: 'clivault', user_id: user.id, created_at: new Date().toISOString(), deleted_at: null }).execute()
    const issued = await coffer('issue', 'clivault', 'ore', '40')
    assert.equal(issued.code, 0, issued.stderr)
    assert.equal(JSON.parse(issued.stdout).assets[0].quantity, 40)
    assert.equal((await coffer('burn', 'clivault', 'ore', '15')).code, 0)
    const holding = await database.db.selectFrom('holdings').innerJoin('wallets', 'wallets.id', 'holdings.wallet_id').select('quantity').where('wallets.address', '=', 'clivault').executeTakeFirstOrThrow()
    assert.equal(holding.quantity, 25)
    const verified = await coffer('verify')
    assert.equal(verified.code, 0, verified.stdout)
    assert.match(verified.stdout, /ledger OK/)
  })

  it('refuses to burn more than the wallet holds', async () => {
    const burned = await coffer('burn', 'clivault', 'ore', '1000')
    assert.equal(burned.code, 1)
    assert.match(burned.stderr, /I002/)
  })

  it('fails verify on a ledger corrupted on purpose', async () => {
    await database.db.updateTable('holdings').set((eb) => ({ quantity: eb('quantity', '+', 1) })).where('wallet_id', '<>', 1).execute()
    const verified = await coffer('verify')
    assert.equal(verified.code, 1)
    assert.match(verified.stdout, /the journal says 25/)
    assert.match(verified.stdout, /sums to 1 counting mint/)
    await database.db.updateTable('holdings').set((eb) => ({ quantity: eb('quantity', '-', 1) })).where('wallet_id', '<>', 1).execute()
  })

  it('exits 2 with usage on an unknown command', async () => {
    const result = await coffer('bogus')
    assert.equal(result.code, 2)
    assert.match(result.stderr, /Usage: coffer/)
  })

  it('says the database is unavailable, without a stack trace, when it cannot be reached', async () => {
    const saved = env
    env = { ...env, DATABASE_URL: 'postgres://coffer@127.0.0.1:1/nowhere' }
    try {
      const result = await coffer('verify')
      assert.equal(result.code, 1)
      assert.match(result.stderr, /^coffer: the database is unavailable or busy, try again/)
      assert.doesNotMatch(result.stderr, /\n\s+at /)
    } finally {
      env = saved
    }
  })

  it('prints the usage for help, --help and -h, and exits 0', async () => {
    for (const argument of ['help', '--help', '-h']) {
      const result = await coffer(argument)
      assert.equal(result.code, 0, argument)
      assert.match(result.stdout, /Usage: coffer/)
    }
  })
})
