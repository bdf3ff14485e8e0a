import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { after, before, describe, it } from 'node:test'
import { openCliStore, runCoffer, type CliStore } from '../helpers/cli.ts'

/** `coffer` on assets, issuance and burns, verify and CSV files (expiring issuance and usage: `cli-usage.test.ts`). */
describe('coffer command', () => {
  let store: CliStore
  const coffer = (...args: string[]) => runCoffer(store.env, ...args)

  before(async () => {
    store = await openCliStore()
  })
  after(() => store.close())

  it('creates, renames and revalues assets, then lists them', async () => {
    assert.equal((await coffer('asset', 'create', 'gold', '2')).code, 0)
    assert.equal((await coffer('asset', 'rename', 'gold', 'Ore')).code, 0)
    assert.equal((await coffer('asset', 'set-value', 'ore', '3.5')).code, 0)
    const listed = await coffer('asset', 'list')
    assert.match(listed.stdout, /^\d+\tOre\t3\.5$/m)
  })

  it('issues and burns through mint, and verify passes', async () => {
    await store.addWallet('clia', 'clivault')
    const issued = await coffer('issue', 'clivault', 'ore', '40')
    assert.equal(issued.code, 0, issued.stderr)
    assert.equal(JSON.parse(issued.stdout).assets[0].quantity, 40)
    assert.equal((await coffer('burn', 'clivault', 'ore', '15')).code, 0)
    assert.equal(await store.holdingOf('clivault'), 25)
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
    await store.database.db
      .updateTable('holdings')
      .set((eb) => ({ quantity: eb('quantity', '+', 1) }))
      .where('wallet_id', '<>', 1)
      .execute()
    const verified = await coffer('verify')
    assert.equal(verified.code, 1)
    assert.match(verified.stdout, /the journal says 25/)
    assert.match(verified.stdout, /sums to 1 counting mint/)
    await store.database.db
      .updateTable('holdings')
      .set((eb) => ({ quantity: eb('quantity', '-', 1) }))
      .where('wallet_id', '<>', 1)
      .execute()
  })

  it('issues to every wallet of a CSV file (ids or addresses, a header, blank and comment lines), all at once', async () => {
    const second = await store.addWallet('clib', 'clisecond')
    const file = path.join(store.dataDir, 'airdrop.csv')
    fs.writeFileSync(file, `wallet,quantity\r\nclivault,5\r\n\r\n# the second wallet by id\r\n${second}, 7\r\n"clivault","3"\r\n`)
    const before = await store.holdingOf('clivault')
    const issued = await coffer('issue', 'ore', '--csv', file, '--memo', 'airdrop')
    assert.equal(issued.code, 0, issued.stderr)
    assert.match(issued.stdout, /^issued 15 Ore to 2 wallet\(s\) in 3 transaction\(s\), ids \d+-\d+$/m)
    assert.equal(await store.holdingOf('clivault'), before + 8)
    assert.equal(await store.holdingOf('clisecond'), 7)
    const memos = await store.database.db
      .selectFrom('transactions')
      .select(['memo', 'kind'])
      .where('receiving_wallet_id', '=', second)
      .execute()
    assert.deepEqual(memos, [{ memo: 'airdrop', kind: 'issuance' }])
  })

  it('refuses a CSV file with bad lines, naming each by its number, and issues nothing', async () => {
    const file = path.join(store.dataDir, 'bad.csv')
    const count = async () =>
      Number(
        (
          await store.database.db
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
    const empty = path.join(store.dataDir, 'empty.csv')
    fs.writeFileSync(empty, 'wallet,quantity\n')
    assert.equal((await coffer('issue', 'ore', '--csv', empty)).code, 1)
    assert.equal((await coffer('issue', 'ore', '--csv', path.join(store.dataDir, 'missing.csv'))).code, 2)
    assert.equal(await count(), before)
  })
})
