import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { after, before, describe, it } from 'node:test'
import { openCliStore, runCoffer, type CliStore } from '../helpers/cli.ts'

/** `coffer` issuing units that expire, and what it says on bad usage or an unreachable database. */
describe('coffer command: expiring issuance and usage', () => {
  let store: CliStore
  const coffer = (...args: string[]) => runCoffer(store.env, ...args)

  before(async () => {
    store = await openCliStore()
  })
  after(() => store.close())

  it('issues units that expire with --expires-at, one wallet or a CSV file, and refuses a bad time issuing nothing', async () => {
    await store.addWallet('clip', 'clipoints')
    const lots = async () =>
      (
        await store.database.db
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
    const file = path.join(store.dataDir, 'expiring.csv')
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
    assert.equal(await store.holdingOf('clipoints'), 12)
  })

  it('exits 2 with usage on an unknown command', async () => {
    const result = await coffer('bogus')
    assert.equal(result.code, 2)
    assert.match(result.stderr, /Usage: coffer/)
  })

  it('says the database is unavailable, without a stack trace, when it cannot be reached', async () => {
    const result = await runCoffer({ ...store.env, DATABASE_URL: 'postgres://coffer@127.0.0.1:1/nowhere' }, 'verify')
    assert.equal(result.code, 1)
    assert.match(result.stderr, /^coffer: the database is unavailable or busy, try again/)
    assert.doesNotMatch(result.stderr, /\n\s+at /)
  })

  it('prints the usage for help, --help and -h, and exits 0', async () => {
    for (const argument of ['help', '--help', '-h']) {
      const result = await coffer(argument)
      assert.equal(result.code, 0, argument)
      assert.match(result.stdout, /Usage: coffer/)
    }
  })
})
