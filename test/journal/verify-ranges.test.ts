import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { chainRanges, findSigningKey, verifyJournal, verifyJournalInThread } from '../../src/journal/verify-journal.ts'
import { buildTestApp, journalCovered, STORAGE, type TestApp } from '../helpers/app.ts'
import { createAsset, createUser, fundedUser, sendTransaction } from '../helpers/factories.ts'

/**
 * `coffer verify`'s journal check on a journal long enough for stored subtrees above the lowest
 * level (32 and 64 leaves) and for ranges that end and start between them: what is changed or
 * missing there is named alike in process, in chunks of any size, and on threads.
 */
describe(`coffer verify across the journal's ranges and upper subtrees (${STORAGE})`, () => {
  let t: TestApp
  before(async () => {
    t = await buildTestApp({ CHECKPOINT_INTERVAL_MS: '100' })
    const gold = await createAsset(t, { name: 'gold' })
    const alice = await fundedUser(t, [[gold, 10_000]])
    const bob = await createUser(t.app)
    for (let i = 0; i < 70; i++) await sendTransaction(t, alice, { recipient: bob.username, assets: { gold: i + 1 }, memo: `memo ${i}` })
    await journalCovered(t.database.db)
  })
  after(() => t.close())

  /** Every way the check runs: the reports it gives, in process by chunks and on threads. */
  async function reports() {
    const key = findSigningKey(t.config.signingKey, t.config.dataDir)
    const db = t.database.db
    const inProcess = await Promise.all([16, 5, 20_000].map((chunk) => verifyJournal(db, key, undefined, chunk)))
    return [...inProcess, await verifyJournalInThread(t.config, key)]
  }

  it('is sound before anything is changed', async () => {
    for (const report of await reports()) assert.deepEqual(report.problems, [])
  })

  it('names a changed subtree above the lowest level, and the subtree above it that is hashed from it', async () => {
    const db = t.database.db
    const node = await db.selectFrom('journal_nodes').select('hash').where('level', '=', 5).where('idx', '=', 0).executeTakeFirstOrThrow()
    await db
      .updateTable('journal_nodes')
      .set({ hash: (node.hash[0] === '0' ? '1' : '0') + node.hash.slice(1) })
      .where('level', '=', 5)
      .where('idx', '=', 0)
      .execute()
    try {
      for (const report of await reports()) {
        assert.equal(report.ok, false)
        assert.equal(report.firstMismatch, undefined, 'every transaction still gives its hash')
        const named = (leaves: string) => report.problems.some((problem) => problem.includes(`subtree over positions ${leaves} is not`))
        assert.ok(named('1 to 32'), report.problems.join('; '))
        assert.ok(named('1 to 64'), report.problems.join('; '))
        assert.ok(!named('33 to 64'), 'its sibling is sound')
      }
    } finally {
      await db.updateTable('journal_nodes').set({ hash: node.hash }).where('level', '=', 5).where('idx', '=', 0).execute()
    }
  })

  it('names positions missing across the end of a range once, from the first, as one pass does', async () => {
    const db = t.database.db
    const entries = await db.selectFrom('journal_entries').selectAll().where('position', '>=', 31).where('position', '<=', 34).execute()
    await db.deleteFrom('journal_entries').where('position', '>=', 31).where('position', '<=', 34).execute()
    try {
      for (const report of await reports()) {
        assert.equal(report.firstMismatch, 31)
        assert.deepEqual(
          report.problems.filter((problem) => problem.includes('is missing')),
          ['position 31 is missing (the next entry is 35)'],
        )
      }
    } finally {
      await db.insertInto('journal_entries').values(entries).execute()
    }
  })

  it('shares the chain out in ranges from multiples of 16, smaller towards the end, none smaller than a read', () => {
    for (const [last, threads, chunk] of [
      [72, 2, 16],
      [1_000_000, 2, 20_000],
      [10_000_000, 4, 20_000],
      [20_001, 2, 20_000],
    ]) {
      const ranges = chainRanges(last, threads, chunk)
      assert.equal(ranges[0][0], 0)
      assert.equal(ranges.at(-1)?.[1], last)
      for (const [i, [after, upTo]] of ranges.entries()) {
        assert.equal(after % 16, 0)
        if (i > 0) assert.equal(after, ranges[i - 1][1])
        if (i < ranges.length - 1)
          assert.ok(upTo - after >= chunk && upTo - after <= ranges[Math.max(0, i - 1)][1] - ranges[Math.max(0, i - 1)][0])
      }
    }
  })

  for (const position of [32, 33]) {
    it(`names position ${position} missing, at the end or the start of a range`, async () => {
      const db = t.database.db
      const entry = await db.selectFrom('journal_entries').selectAll().where('position', '=', position).executeTakeFirstOrThrow()
      await db.deleteFrom('journal_entries').where('position', '=', position).execute()
      try {
        for (const report of await reports()) {
          assert.equal(report.firstMismatch, position, report.problems.join('; '))
          assert.ok(
            report.problems.includes(`position ${position} is missing (the next entry is ${position + 1})`),
            report.problems.join('; '),
          )
        }
      } finally {
        await db.insertInto('journal_entries').values(entry).execute()
      }
      for (const report of await reports()) assert.deepEqual(report.problems, [])
    })
  }
})
