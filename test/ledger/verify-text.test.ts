import assert from 'node:assert/strict'
import fs from 'node:fs'
import { describe, it } from 'node:test'
import { sql } from 'kysely'
import { EncodedRange } from '../../src/journal/encoded-range.ts'
import { parseLines, verifyLedger } from '../../src/ledger/verify.ts'
import { buildTestApp, STORAGE } from '../helpers/app.ts'
import { createAsset, createUser, issue, transfer } from '../helpers/factories.ts'

/**
 * `coffer verify` reads each range of the ledger and of the journal as one text the database
 * writes; a text that is not as written (a value no safe integer, an order the pass does not
 * expect, a length the database counts otherwise) is never trusted: the range is read as rows.
 */
describe(`coffer verify: ranges read as text (${STORAGE})`, () => {
  it('reads the lines of a range, and refuses a text that is not as written', () => {
    assert.deepEqual(parseLines('7,1,2,,,3,40,:-5,5,;8,2,1,7,,3,40,8:reversal0,0,;', false), [
      [7, 1, 2, null, null, null, 3, 40, -5, 5],
      [8, 2, 1, 'reversal', 7, null, 3, 40, 0, 0],
    ])
    assert.deepEqual(parseLines('9,1,2,,,,,:24:2026-01-01T00:00:00.000Z;', true), [
      [9, 1, 2, null, null, null, null, null, '2026-01-01T00:00:00.000Z', null],
    ])
    assert.deepEqual(parseLines(null, false), [])
    for (const text of [
      '7,1,2,,,3,1.5,:-5,5,;',
      '7,1,2,,,3,9007199254740993,:-5,5,;',
      '8,1,2,,,3,40,:-5,5,;7,2,1,,,3,40,:0,0,;',
      '7,1,2,,,3,40,:-5,5,',
      '7,1,2,,,3,,:-5,5,;',
      '9,1,2,,,3,40,:2:😀;',
    ])
      assert.equal(parseLines(text, text.includes('😀')), undefined, text)
  })

  it('reads the entries of a range, each line of one in order of asset, and refuses positions out of order', () => {
    const hash = (digit: string) => digit.repeat(64)
    const entry = (position: number, line: string, metadata = '') =>
      `${position},${position + 10},${hash(String(position))},["coffer-transaction/v1",${position},${position + 10},"transfer",` +
      `"2026-01-01T00:00:00.000Z",1,2,"memo",[\u0003${line}\u0003],null,null,\u0001${metadata}`
    const head = (position: number) =>
      `["coffer-transaction/v1",${position},${position + 10},"transfer","2026-01-01T00:00:00.000Z",1,2,"memo",[`
    const text = [entry(1, '[5,1]', '{"a":"b"}'), entry(2, '[9,2]'), entry(2, '[3,4]'), `3,13,${hash('3')},\u0003\u0003\u0001`].join(
      '\u0002',
    )
    // Each entry as the check reads it: position, transaction id, stored hash, encoding with its metadata.
    const read = (text: string | Buffer) => {
      const range = new EncodedRange()
      if (!range.read(text)) return undefined
      return Array.from({ length: range.count }, (_, k) => [range.position(k), range.transactionId(k), range.hashHex(k), range.encoding(k)])
    }
    assert.deepEqual(read(text), [
      [1, 11, hash('1'), `${head(1)}[5,1]],null,null,[["a","b"]]]`],
      [2, 12, hash('2'), `${head(2)}[3,4],[9,2]],null,null,[]]`],
      [3, 13, hash('3'), null],
    ])
    assert.deepEqual(read(Buffer.from(text)), read(text))
    assert.equal(read([entry(2, '[5,1]'), entry(1, '[5,1]')].join('\u0002')), undefined)
    assert.equal(read(`${entry(1, '[5,1]')}\u0002x`), undefined)
    // A stored hash that is not 64 lower-case hex digits is read as rows.
    assert.equal(read(entry(1, '[5,1]').replace(hash('1'), 'A'.repeat(64))), undefined)
    // Metadata of one plain key is copied; anything else is as `encodeMetadata` writes it.
    for (const [metadata, encoded] of [
      ['{"":""}', '[["",""]]'],
      ['{"k":"v w"}', '[["k","v w"]]'],
      ['{"b":"2","a":"1"}', '[["a","1"],["b","2"]]'],
      ['{"k":"\\u0041é"}', '[["k","Aé"]]'],
      ['{"k":"é"}', '[["k","é"]]'],
      ['{}', '[]'],
    ])
      assert.equal(read(entry(1, '[5,1]', metadata))?.[0][3], `${head(1)}[5,1]],null,null,${encoded}]`, metadata)
  })

  it('names a quantity that is no safe integer, read as rows', async () => {
    const t = await buildTestApp()
    try {
      const alice = await createUser(t.app)
      const bob = await createUser(t.app)
      const gold = (await createAsset(t, { name: 'gold' })).id
      await issue(t, alice.walletId, gold, 100)
      await transfer(t, alice, bob.username, { gold: 30 })
      const { id } = await t.database.db
        .selectFrom('transactions')
        .select('id')
        .where('receiving_wallet_id', '=', bob.walletId)
        .executeTakeFirstOrThrow()
      await t.database.db
        .updateTable('transaction_assets')
        .set({ quantity: sql<number>`9007199254740993` })
        .where('transaction_id', '=', id)
        .execute()
      const report = await verifyLedger(t.database.db)
      assert.ok(report.problems.includes(`transaction ${id} moves 9007199254740992 of asset ${gold}`), report.problems.join('\n'))
    } finally {
      await t.app.close()
      await t.database.close()
      fs.rmSync(t.config.dataDir, { recursive: true, force: true })
    }
  })
})
