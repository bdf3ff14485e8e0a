import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { chainHashHex, GENESIS_HASH } from '../../src/journal/encoding.ts'
import { encodingsByDatabase, findSigningKey, verifyJournal, verifyJournalInThread } from '../../src/journal/verify-journal.ts'
import { buildTestApp, journalCovered, STORAGE, type TestApp } from '../helpers/app.ts'
import { createAsset, createUser, fundedUser, sendTransaction } from '../helpers/factories.ts'

/**
 * On PostgreSQL `coffer verify` hashes each transaction's encoding as the server writes it, and the
 * encoding JavaScript writes from the columns decides wherever that text does not give the stored
 * hash. Texts that need escaping, several lines and several metadata keys give the same text, and
 * a change to any of them is named, on both storages.
 */
describe(`coffer verify: encodings that need escaping (${STORAGE})`, () => {
  let t: TestApp
  const memos = ['quote " backslash \\ slash /', 'tab\tnew line\nreturn\rfeed\fback\b', 'controls \u0001\u001f\u007f', 'é ü ∑ \u2028 😀 𝄞']
  const sent: number[] = []
  before(async () => {
    t = await buildTestApp({ CHECKPOINT_INTERVAL_MS: '100' })
    const gold = await createAsset(t, { name: 'gold' })
    const silver = await createAsset(t, { name: 'silver' })
    const alice = await fundedUser(t, [
      [silver, 1000],
      [gold, 1000],
    ])
    const bob = await createUser(t.app)
    for (const [i, memo] of memos.entries()) {
      const metadata = i % 2 === 0 ? { zeta: 'last "quoted"', alpha: 'first\\', Mid: '∑ 😀\n' } : { order: `o${i}` }
      const assets = i < 2 ? { silver: i + 1, gold: i + 2 } : { gold: i + 1 }
      sent.push((await sendTransaction(t, alice, { recipient: bob.username, assets, memo, metadata })).id)
    }
    // More than 16 in all, so that a stored subtree covers the changed rows.
    for (let i = 0; i < 14; i++) await sendTransaction(t, alice, { recipient: bob.username, assets: { gold: 1 } })
    await journalCovered(t.database.db)
  })
  after(() => t.close())

  const key = () => findSigningKey(t.config.signingKey, t.config.dataDir)

  it("writes every transaction's encoding as JavaScript does: each gives its stored hash", { skip: STORAGE !== 'postgres' }, async () => {
    const db = t.database.db
    const entries = await db.selectFrom('journal_entries').select(['position', 'hash']).orderBy('position').execute()
    const texts = await db.transaction().execute((trx) => encodingsByDatabase(trx, 0, entries.length))
    assert.equal(texts.length, entries.length)
    let previous = GENESIS_HASH
    for (const [i, entry] of entries.entries()) {
      assert.notEqual(texts[i], null, `position ${entry.position}`)
      assert.equal(chainHashHex(previous, texts[i] as string), entry.hash, `position ${entry.position}: ${texts[i]}`)
      previous = entry.hash
    }
    assert.deepEqual((await verifyJournal(db, key())).problems, [])
  })

  it('names a memo, a metadata value or a second line changed, in process and on threads', async () => {
    const db = t.database.db
    const [id, other] = [sent[3], sent[0]]
    const positionOf = async (of: number) =>
      Number(
        (await db.selectFrom('journal_entries').select('position').where('transaction_id', '=', of).executeTakeFirstOrThrow()).position,
      )
    const { memo, metadata } = await db
      .selectFrom('transactions')
      .select(['memo', 'metadata'])
      .where('id', '=', id)
      .executeTakeFirstOrThrow()
    // A memo that holds what JSON writes for the first one: quoted as it is, it would write that entry's encoding.
    const escaped = JSON.stringify(memos[0]).slice(1, -1)
    const lines = await db.selectFrom('transaction_assets').select(['asset_id', 'quantity']).where('transaction_id', '=', other).execute()
    assert.equal(lines.length, 2)
    const second = lines.reduce((a, b) => (Number(a.asset_id) > Number(b.asset_id) ? a : b))
    const changes: [string, number, () => Promise<unknown>, () => Promise<unknown>][] = [
      [
        'memo',
        id,
        () =>
          db
            .updateTable('transactions')
            .set({ memo: memo.replace('😀', '😁') })
            .where('id', '=', id)
            .execute(),
        () => db.updateTable('transactions').set({ memo }).where('id', '=', id).execute(),
      ],
      [
        'memo as its JSON text',
        other,
        () => db.updateTable('transactions').set({ memo: escaped }).where('id', '=', other).execute(),
        () => db.updateTable('transactions').set({ memo: memos[0] }).where('id', '=', other).execute(),
      ],
      [
        'metadata',
        id,
        () =>
          db
            .updateTable('transactions')
            .set({ metadata: JSON.stringify({ order: 'o4' }) })
            .where('id', '=', id)
            .execute(),
        () => db.updateTable('transactions').set({ metadata }).where('id', '=', id).execute(),
      ],
      [
        'second line',
        other,
        () =>
          db
            .updateTable('transaction_assets')
            .set({ quantity: Number(second.quantity) + 1 })
            .where('transaction_id', '=', other)
            .where('asset_id', '=', second.asset_id)
            .execute(),
        () =>
          db
            .updateTable('transaction_assets')
            .set({ quantity: second.quantity })
            .where('transaction_id', '=', other)
            .where('asset_id', '=', second.asset_id)
            .execute(),
      ],
    ]
    for (const [what, changed, change, undo] of changes) {
      const position = await positionOf(changed)
      await change()
      try {
        for (const report of [
          await verifyJournal(db, key()),
          await verifyJournal(db, key(), undefined, 3),
          await verifyJournalInThread(t.config, key()),
        ]) {
          assert.equal(report.firstMismatch, position, what)
          assert.deepEqual(
            report.problems,
            [`position ${position} (transaction ${changed}): the transaction no longer gives its hash`],
            what,
          )
        }
      } finally {
        await undo()
      }
    }
    assert.deepEqual((await verifyJournal(db, key())).problems, [])
  })
})
