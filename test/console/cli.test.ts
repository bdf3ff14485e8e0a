import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { after, before, describe, it } from 'node:test'
import { promisify } from 'node:util'
import { openTestDatabase } from '../helpers/app.ts'
import type { Database } from '../../src/db/database.ts'

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

  async function holdingOf(address: string): Promise<number> {
    const row = await database.db
      .selectFrom('holdings')
      .innerJoin('wallets', 'wallets.id', 'holdings.wallet_id')
      .select('quantity')
      .where('wallets.address', '=', address)
      .executeTakeFirst()
    return row ? Number(row.quantity) : 0
  }

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
    const user = await database.db
      .insertInto('users')
      .values({ username: 'clia', username_key: 'clia', password_hash: 'x', primary_wallet_id: null, created_at: new Date().toISOString() })
      .returning('id')
      .executeTakeFirstOrThrow()
    await database.db
      .insertInto('wallets')
      .values({ address: 'clivault', user_id: user.id, created_at: new Date().toISOString(), deleted_at: null })
      .execute()
    const issued = await coffer('issue', 'clivault', 'ore', '40')
    assert.equal(issued.code, 0, issued.stderr)
    assert.equal(JSON.parse(issued.stdout).assets[0].quantity, 40)
    assert.equal((await coffer('burn', 'clivault', 'ore', '15')).code, 0)
    const holding = await database.db
      .selectFrom('holdings')
      .innerJoin('wallets', 'wallets.id', 'holdings.wallet_id')
      .select('quantity')
      .where('wallets.address', '=', 'clivault')
      .executeTakeFirstOrThrow()
    assert.equal(holding.quantity, 25)
    const verified = await coffer('verify')
    assert.equal(verified.code, 0, verified.stdout)
    assert.match(verified.stdout, /ledger OK/)
  })

  it('issues units that expire with --expires-at, one wallet or a CSV file, and refuses a bad time issuing nothing', async () => {
    const owner = await database.db
      .insertInto('users')
      .values({ username: 'clip', username_key: 'clip', password_hash: 'x', primary_wallet_id: null, created_at: new Date().toISOString() })
      .returning('id')
      .executeTakeFirstOrThrow()
    await database.db
      .insertInto('wallets')
      .values({ address: 'clipoints', user_id: owner.id, created_at: new Date().toISOString(), deleted_at: null })
      .execute()
    const lots = async () =>
      (
        await database.db
          .selectFrom('lots')
          .innerJoin('wallets', 'wallets.id', 'lots.wallet_id')
          .select(['lots.quantity', 'lots.expires_at'])
          .where('wallets.address', '=', 'clipoints')
          .orderBy('lots.expires_at')
          .execute()
      ).map((lot) => ({ quantity: Number(lot.quantity), at: new Date(lot.expires_at).toISOString() }))
    assert.equal((await coffer('asset', 'create', 'points', '1')).code, 0)
    const day = new Date(Date.now() + 86_400_000)
    day.setUTCMilliseconds(0)
    const week = new Date(day.getTime() + 6 * 86_400_000)

    const issued = await coffer('issue', 'clipoints', 'points', '7', '--expires-at', day.toISOString())
    assert.equal(issued.code, 0, issued.stderr)
    assert.equal(JSON.parse(issued.stdout).kind, 'issuance')
    const file = path.join(dataDir, 'expiring.csv')
    fs.writeFileSync(file, 'wallet,quantity\nclipoints,5\n')
    const fromCsv = await coffer('issue', 'points', '--csv', file, '--expires-at', week.toISOString())
    assert.equal(fromCsv.code, 0, fromCsv.stderr)
    const expected = [
      { quantity: 7, at: day.toISOString() },
      { quantity: 5, at: week.toISOString() },
    ]
    assert.deepEqual(await lots(), expected)

    // A time that is not one, and one too far ahead (checked as the API does: G000), issue nothing.
    const notATime = await coffer('issue', 'clipoints', 'points', '3', '--expires-at', 'tomorrow')
    assert.equal(notATime.code, 2)
    assert.match(notATime.stderr, /--expires-at takes a time/)
    const tooLate = new Date(Date.now() + 11 * 366 * 86_400_000).toISOString()
    const refused = await coffer('issue', 'points', '--csv', file, '--expires-at', tooLate)
    assert.equal(refused.code, 1)
    assert.match(refused.stderr, /G000/)
    assert.deepEqual(await lots(), expected)
    assert.equal(await holdingOf('clipoints'), 12)
  })

  it('refuses to burn more than the wallet holds', async () => {
    const burned = await coffer('burn', 'clivault', 'ore', '1000')
    assert.equal(burned.code, 1)
    assert.match(burned.stderr, /I002/)
  })

  it('fails verify on a ledger corrupted on purpose', async () => {
    await database.db
      .updateTable('holdings')
      .set((eb) => ({ quantity: eb('quantity', '+', 1) }))
      .where('wallet_id', '<>', 1)
      .execute()
    const verified = await coffer('verify')
    assert.equal(verified.code, 1)
    assert.match(verified.stdout, /the journal says 25/)
    assert.match(verified.stdout, /sums to 1 counting mint/)
    await database.db
      .updateTable('holdings')
      .set((eb) => ({ quantity: eb('quantity', '-', 1) }))
      .where('wallet_id', '<>', 1)
      .execute()
  })

  it('issues to every wallet of a CSV file (ids or addresses, a header, blank and comment lines), all at once', async () => {
    const now = new Date().toISOString()
    const user = await database.db
      .insertInto('users')
      .values({ username: 'clib', username_key: 'clib', password_hash: 'x', primary_wallet_id: null, created_at: now })
      .returning('id')
      .executeTakeFirstOrThrow()
    const second = await database.db
      .insertInto('wallets')
      .values({ address: 'clisecond', user_id: user.id, created_at: now, deleted_at: null })
      .returning('id')
      .executeTakeFirstOrThrow()
    const file = path.join(dataDir, 'airdrop.csv')
    fs.writeFileSync(file, `wallet,quantity\r\nclivault,5\r\n\r\n# the second wallet by id\r\n${second.id}, 7\r\n"clivault","3"\r\n`)
    const before = await holdingOf('clivault')
    const issued = await coffer('issue', 'ore', '--csv', file, '--memo', 'airdrop')
    assert.equal(issued.code, 0, issued.stderr)
    assert.match(issued.stdout, /^issued 15 Ore to 2 wallet\(s\) in 3 transaction\(s\), ids \d+-\d+$/m)
    assert.equal(await holdingOf('clivault'), before + 8)
    assert.equal(await holdingOf('clisecond'), 7)
    const memos = await database.db
      .selectFrom('transactions')
      .select(['memo', 'kind'])
      .where('receiving_wallet_id', '=', second.id)
      .execute()
    assert.deepEqual(memos, [{ memo: 'airdrop', kind: 'issuance' }])
  })

  it('refuses a CSV file with bad lines, naming each by its number, and issues nothing', async () => {
    const file = path.join(dataDir, 'bad.csv')
    const count = async () =>
      Number(
        (
          await database.db
            .selectFrom('transactions')
            .select((eb) => eb.fn.countAll<number>().as('n'))
            .executeTakeFirstOrThrow()
        ).n,
      )
    const before = await count()
    fs.writeFileSync(file, 'clivault,5\nclivault,0\nclivault\nNot An Address,2\nclivault,1.5\nclivault,2,3\nnowhere,4\n')
    const refused = await coffer('issue', 'ore', '--csv', file)
    assert.equal(refused.code, 1)
    assert.match(refused.stderr, /nothing issued/)
    for (const line of [2, 3, 4, 5, 6]) assert.match(refused.stderr, new RegExp(`line ${line}: `))
    assert.doesNotMatch(refused.stderr, /line 1: /)
    // Lines that parse but name no wallet are refused too, once the file parses.
    fs.writeFileSync(file, 'clivault,5\nnowhere,4\n999999999,1\n')
    const unknown = await coffer('issue', 'ore', '--csv', file)
    assert.equal(unknown.code, 1)
    assert.match(unknown.stderr, /line 2: no wallet nowhere/)
    assert.match(unknown.stderr, /line 3: no wallet 999999999/)
    // A line that would overflow a holding, named by its line.
    fs.writeFileSync(file, `clivault,1\nclisecond,${Number.MAX_SAFE_INTEGER}\n`)
    const overflow = await coffer('issue', 'ore', '--csv', file)
    assert.equal(overflow.code, 1)
    assert.match(overflow.stderr, /line 2: I003/)
    const empty = path.join(dataDir, 'empty.csv')
    fs.writeFileSync(empty, 'wallet,quantity\n')
    assert.equal((await coffer('issue', 'ore', '--csv', empty)).code, 1)
    assert.equal((await coffer('issue', 'ore', '--csv', path.join(dataDir, 'missing.csv'))).code, 2)
    assert.equal(await count(), before)
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
