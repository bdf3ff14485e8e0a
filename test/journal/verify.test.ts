import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { createPublicKey, verify } from 'node:crypto'
import { after, before, describe, it } from 'node:test'
import { sql } from 'kysely'
import { verifyJournal, verifyJournalInThread, findSigningKey } from '../../src/journal/verify-journal.ts'
import {
  importJournalKey,
  type InclusionProof,
  verifyCheckpoint,
  verifyConsistency as clientVerifyConsistency,
  verifyInclusionProof,
} from '../../client/journal.ts'
import { leafHash, subtreeHash, treeRoot, verifyConsistency, verifyInclusion } from '../../src/journal/merkle.ts'
import { buildTestApp, expectError, journalCovered, STORAGE, type TestApp } from '../helpers/app.ts'
import { runCoffer } from '../helpers/cli.ts'
import { findTransactionById } from '../../src/ledger/history.service.ts'
import { createAsset, createUser, fundedUser, sendTransaction, type TestUser } from '../helpers/factories.ts'

interface Proof {
  transaction: { id: number; position: number; hash: string }
  leaf_index: number
  checkpoint: { size: number; root: string; signed_at: string; signature: string }
  audit_path: string[]
}

describe(`the journal's proofs and coffer verify (${STORAGE})`, () => {
  let t: TestApp
  let alice: TestUser
  let bob: TestUser
  let sent: number[]
  before(async () => {
    t = await buildTestApp({ CHECKPOINT_INTERVAL_MS: '100' })
    const gold = await createAsset(t, { name: 'gold' })
    alice = await fundedUser(t, [[gold, 1000]])
    bob = await createUser(t.app)
    sent = []
    // More than 16, so that some subtrees are stored (`journal_nodes`) and the smaller ones are not.
    for (let i = 0; i < 20; i++)
      sent.push((await sendTransaction(t, alice, { recipient: bob.username, assets: { gold: i + 1 }, memo: `memo ${i}` })).id)
    await journalCovered(t.database.db)
  })
  after(() => t.close())

  const env = () => ({ DATA_DIR: t.config.dataDir, DATABASE_URL: t.config.databaseUrl, ADMIN_API_KEY: 'x'.repeat(24), LOG_LEVEL: 'silent' })

  it('proves a transaction against a signed checkpoint that verifies with the published key', async () => {
    const key = (await t.app.inject({ method: 'GET', url: '/journal/key' })).json() as { algorithm: string; public_key: string }
    assert.equal(key.algorithm, 'Ed25519')
    const publicKey = createPublicKey({
      key: { kty: 'OKP', crv: 'Ed25519', x: Buffer.from(key.public_key, 'base64').toString('base64url') },
      format: 'jwk',
    })
    for (const id of [sent[0], sent[5], sent[10]]) {
      for (const who of [alice, bob]) {
        const response = await t.app.inject({ method: 'GET', url: `/wallet/transactions/${id}/proof`, headers: who.auth })
        assert.equal(response.statusCode, 200, response.body)
        const proof = response.json() as Proof
        assert.equal(proof.leaf_index, proof.transaction.position - 1)
        const { size, root, signed_at, signature } = proof.checkpoint
        const text = `coffer-checkpoint/v1\n${size}\n${root}\n${signed_at}\n`
        assert.ok(verify(null, Buffer.from(text), publicKey, Buffer.from(signature, 'base64')), 'the checkpoint signature verifies')
        const leaf = leafHash(Buffer.from(proof.transaction.hash, 'hex'))
        const path = proof.audit_path.map((hex) => Buffer.from(hex, 'hex'))
        assert.ok(verifyInclusion(proof.leaf_index, size, leaf, path, Buffer.from(root, 'hex')), 'the audit path leads to the root')
      }
    }
    const stranger = await createUser(t.app)
    expectError(await t.app.inject({ method: 'GET', url: `/wallet/transactions/${sent[0]}/proof`, headers: stranger.auth }), 404, 'T000')
    expectError(await t.app.inject({ method: 'GET', url: '/wallet/transactions/987654/proof', headers: alice.auth }), 404, 'T000')
  })

  it('proves positions whose small subtrees are not stored: the client checks every proof and every consistency proof', async () => {
    const db = t.database.db
    const levels = (await db.selectFrom('journal_nodes').select('level').distinct().execute()).map((row) => Number(row.level))
    assert.ok(levels.length > 0 && levels.every((level) => level >= 4), `stored levels ${levels.join(', ')}`)
    const key = await importJournalKey(
      ((await t.app.inject({ method: 'GET', url: '/journal/key' })).json() as { public_key: string }).public_key,
    )
    // Every position from the first subtree of 16 to past it: paths through hashed and stored subtrees alike.
    for (const id of sent) {
      const proof = (
        await t.app.inject({ method: 'GET', url: `/wallet/transactions/${id}/proof`, headers: bob.auth })
      ).json() as InclusionProof
      assert.equal(await verifyCheckpoint(key, proof.checkpoint), true)
      assert.equal(await verifyInclusionProof(proof), true, `position ${proof.transaction.position}`)
    }
    const latest = (await t.app.inject({ method: 'GET', url: '/journal/checkpoint', headers: bob.auth })).json() as Proof['checkpoint']
    const entries = await db.selectFrom('journal_entries').select('hash').orderBy('position').execute()
    const hashes = entries.map((entry) => Buffer.from(entry.hash, 'hex'))
    // The root of the first `size` entries from all of their hashes, none read from journal_nodes.
    const rootOfFirst = (size: number) =>
      treeRoot((level, idx) => subtreeHash(hashes.slice(idx * 2 ** level, (idx + 1) * 2 ** level)), size)
    for (let from = 1; from <= latest.size; from++) {
      const response = await t.app.inject({ method: 'GET', url: `/journal/consistency?from=${from}&to=${latest.size}`, headers: bob.auth })
      const proof = (response.json() as { proof: string[] }).proof.map((hex) => Buffer.from(hex, 'hex'))
      assert.equal(
        await clientVerifyConsistency(from, latest.size, proof, rootOfFirst(from), Buffer.from(latest.root, 'hex')),
        true,
        `from ${from}`,
      )
    }
  })

  it('proves that a later checkpoint extends an earlier one; refuses sizes out of range with G002', async () => {
    const latest = (await t.app.inject({ method: 'GET', url: '/journal/checkpoint', headers: alice.auth })).json() as Proof['checkpoint']
    const { rows } = await sql<{
      size: number
      root: string
    }>`select size, root from journal_checkpoints where size > 0 order by size`.execute(t.database.db)
    for (const old of rows) {
      const response = await t.app.inject({
        method: 'GET',
        url: `/journal/consistency?from=${old.size}&to=${latest.size}`,
        headers: bob.auth,
      })
      assert.equal(response.statusCode, 200, response.body)
      const { proof } = response.json() as { proof: string[] }
      const hashes = proof.map((hex) => Buffer.from(hex, 'hex'))
      assert.ok(verifyConsistency(Number(old.size), latest.size, hashes, Buffer.from(old.root, 'hex'), Buffer.from(latest.root, 'hex')))
    }
    for (const query of [`from=0&to=1`, `from=2&to=1`, `from=1&to=${latest.size + 1}`, 'from=1', 'from=a&to=2']) {
      expectError(await t.app.inject({ method: 'GET', url: `/journal/consistency?${query}`, headers: bob.auth }), 400, 'G002')
    }
  })

  it('finds a memo, a quantity or a wallet changed in the database and names its position; coffer verify says so', async () => {
    const db = t.database.db
    const key = findSigningKey(t.config.signingKey, t.config.dataDir)
    assert.ok(key)
    assert.equal((await verifyJournal(db, key)).ok, true)
    const target = sent[6]
    const position = Number(
      (await db.selectFrom('journal_entries').select('position').where('transaction_id', '=', target).executeTakeFirstOrThrow()).position,
    )
    const changes: [string, () => Promise<unknown>, () => Promise<unknown>][] = [
      [
        'memo',
        () => db.updateTable('transactions').set({ memo: 'rewritten' }).where('id', '=', target).execute(),
        () => db.updateTable('transactions').set({ memo: 'memo 6' }).where('id', '=', target).execute(),
      ],
      [
        'quantity',
        () => db.updateTable('transaction_assets').set({ quantity: 70 }).where('transaction_id', '=', target).execute(),
        () => db.updateTable('transaction_assets').set({ quantity: 7 }).where('transaction_id', '=', target).execute(),
      ],
      [
        'wallet',
        async () =>
          db
            .updateTable('transactions')
            .set({ receiving_wallet_id: (await createUser(t.app)).walletId })
            .where('id', '=', target)
            .execute(),
        () => db.updateTable('transactions').set({ receiving_wallet_id: bob.walletId }).where('id', '=', target).execute(),
      ],
    ]
    for (const [what, change, undo] of changes) {
      await change()
      const report = await verifyJournal(db, key)
      assert.equal(report.ok, false, what)
      assert.equal(report.firstMismatch, position, what)
      if (what === 'memo') {
        const run = await runCoffer(env(), 'verify')
        assert.equal(run.code, 1, run.stdout + run.stderr)
        assert.match(run.stdout, new RegExp(`position ${position} is the first that no longer matches`))
      }
      await undo()
      assert.equal((await verifyJournal(db, key)).ok, true, `${what} put back`)
    }
  })

  it('finds a stored subtree that proofs are read from changed, or missing, in the database', async () => {
    const db = t.database.db
    const key = findSigningKey(t.config.signingKey, t.config.dataDir)
    // The subtree over positions 1 to 16: complete, as at least 20 transactions are positioned.
    const node = await db.selectFrom('journal_nodes').select('hash').where('level', '=', 4).where('idx', '=', 0).executeTakeFirstOrThrow()
    const other = (node.hash[0] === '0' ? '1' : '0') + node.hash.slice(1)
    await db.updateTable('journal_nodes').set({ hash: other }).where('level', '=', 4).where('idx', '=', 0).execute()
    const changed = await verifyJournal(db, key)
    assert.equal(changed.ok, false)
    assert.equal(changed.firstMismatch, undefined, 'every transaction still gives its hash')
    assert.ok(changed.problems.some((problem) => /the stored subtree over positions 1 to 16 is not the tree of their hashes/.test(problem)))
    await db.deleteFrom('journal_nodes').where('level', '=', 4).where('idx', '=', 0).execute()
    const missing = await verifyJournal(db, key)
    assert.ok(missing.problems.some((problem) => /the stored subtree over positions 1 to 16 is missing/.test(problem)))
    await db.insertInto('journal_nodes').values({ level: 4, idx: 0, hash: node.hash }).execute()
    assert.deepEqual((await verifyJournal(db, key)).problems, [])
  })

  it('finds the same on a thread of its own, with its own connection, as in process', async () => {
    const db = t.database.db
    const key = findSigningKey(t.config.signingKey, t.config.dataDir)
    const sound = await verifyJournalInThread(t.config, key)
    assert.deepEqual(sound, await verifyJournal(db, key))
    assert.equal(sound.ok, true)
    const target = sent[5]
    await db.updateTable('transactions').set({ memo: 'rewritten' }).where('id', '=', target).execute()
    try {
      const changed = await verifyJournalInThread(t.config, key)
      assert.equal(changed.ok, false)
      assert.deepEqual(changed, await verifyJournal(db, key))
    } finally {
      await db.updateTable('transactions').set({ memo: 'memo 5' }).where('id', '=', target).execute()
    }
  })

  it('reads the journal in chunks of any size and finds the same', async () => {
    const db = t.database.db
    const key = findSigningKey(t.config.signingKey, t.config.dataDir)
    const whole = await verifyJournal(db, key)
    assert.deepEqual(whole.problems, [])
    for (const chunk of [1, 2, 3, 5]) {
      const report = await verifyJournal(db, key, undefined, chunk)
      assert.deepEqual(report, whole, `chunks of ${chunk}`)
    }
    const node = await db.selectFrom('journal_nodes').select('hash').where('level', '=', 4).where('idx', '=', 0).executeTakeFirstOrThrow()
    await db
      .updateTable('journal_nodes')
      .set({ hash: '0'.repeat(64) })
      .where('level', '=', 4)
      .where('idx', '=', 0)
      .execute()
    try {
      for (const chunk of [1, 3, 5, 20_000])
        assert.ok(
          (await verifyJournal(db, key, undefined, chunk)).problems.some((problem) =>
            /subtree over positions 1 to 16 is not/.test(problem),
          ),
          `chunks of ${chunk}`,
        )
    } finally {
      await db.updateTable('journal_nodes').set({ hash: node.hash }).where('level', '=', 4).where('idx', '=', 0).execute()
    }
  })

  it('finds a checkpoint, the state, a subtree too many or a position missing changed in the database', async () => {
    const db = t.database.db
    const key = findSigningKey(t.config.signingKey, t.config.dataDir)
    const checkpoint = await db
      .selectFrom('journal_checkpoints')
      .selectAll()
      .where('size', '>', 0)
      .orderBy('size')
      .executeTakeFirstOrThrow()
    const state = await db.selectFrom('journal_state').selectAll().executeTakeFirstOrThrow()
    const size = Number(checkpoint.size)
    const flip = (hex: string) => (hex[0] === '0' ? '1' : '0') + hex.slice(1)
    const entry = await db.selectFrom('journal_entries').selectAll().where('position', '=', 3).executeTakeFirstOrThrow()
    const changes: [RegExp, () => Promise<unknown>, () => Promise<unknown>][] = [
      [
        new RegExp(`checkpoint of size ${size}: its root is not the tree of the first ${size} hashes`),
        () =>
          db
            .updateTable('journal_checkpoints')
            .set({ root: flip(checkpoint.root) })
            .where('size', '=', size)
            .execute(),
        () => db.updateTable('journal_checkpoints').set({ root: checkpoint.root }).where('size', '=', size).execute(),
      ],
      [
        new RegExp(`checkpoint of size ${size}: its signature does not verify`),
        () => db.updateTable('journal_checkpoints').set({ signed_at: '2001-01-01T00:00:00.000Z' }).where('size', '=', size).execute(),
        () => db.updateTable('journal_checkpoints').set({ signed_at: checkpoint.signed_at }).where('size', '=', size).execute(),
      ],
      [
        /beyond the journal's \d+ entries/,
        () =>
          db
            .insertInto('journal_checkpoints')
            .values({ ...checkpoint, size: 1_000_000 })
            .execute(),
        () => db.deleteFrom('journal_checkpoints').where('size', '=', 1_000_000).execute(),
      ],
      [
        /the journal's state \(the last hash and the tree's frontier\) is not that of its/,
        () =>
          db
            .updateTable('journal_state')
            .set({ head: flip(state.head) })
            .execute(),
        () => db.updateTable('journal_state').set({ head: state.head }).execute(),
      ],
      [
        /subtrees are stored, the tree of \d+ entries has/,
        () =>
          db
            .insertInto('journal_nodes')
            .values({ level: 30, idx: 0, hash: '0'.repeat(64) })
            .execute(),
        () => db.deleteFrom('journal_nodes').where('level', '=', 30).execute(),
      ],
      [
        /position 3 is missing \(the next entry is 4\)/,
        () => db.deleteFrom('journal_entries').where('position', '=', 3).execute(),
        () => db.insertInto('journal_entries').values(entry).execute(),
      ],
    ]
    for (const [expected, change, undo] of changes) {
      await change()
      try {
        const report = await verifyJournal(db, key)
        assert.ok(
          report.problems.some((problem) => expected.test(problem)),
          `${expected}: ${report.problems.join('; ')}`,
        )
      } finally {
        await undo()
      }
    }
    assert.deepEqual((await verifyJournal(db, key)).problems, [])
  })

  it("exports the journal as one Transaction a line, from a position on, each as JSON.stringify writes the feed's entry", async () => {
    // Every optional part of an entry: metadata, several assets, values the database writes otherwise
    // than JavaScript (exponents, -0), large quantities, escaped characters, a reversal.
    const values = { Silver: 0.5, third: 1 / 3, tiny: 1e-7, huge: 2.5e21, wide: 1234567890123456, zero: -0 }
    for (const [name, value] of Object.entries(values)) {
      const asset = await createAsset(t, { name, value })
      await t.app.inject({
        method: 'POST',
        url: `/wallets/${alice.walletId}/assets`,
        headers: t.admin,
        payload: { id: asset.id, quantity: 2 ** 50 },
      })
    }
    const mixed = await sendTransaction(t, alice, {
      recipient: bob.username,
      assets: { gold: 1, Silver: 2 ** 50 - 3, third: 1, tiny: 2, huge: 3, wide: 4, zero: 5 },
      memo: 'mixed "quoted" ✓\t\u0001\u001f\u2028',
      metadata: { order: 'A-1', note: 'b\\c' },
    })
    const reversal = await t.app.inject({ method: 'POST', url: `/transactions/${mixed.id}/reversal`, headers: t.admin })
    assert.equal(reversal.statusCode, 201, reversal.body)
    await journalCovered(t.database.db)

    const run = await runCoffer(env(), 'export', '--after', '3')
    assert.equal(run.code, 0, run.stderr)
    const lines = run.stdout.trim().split('\n')
    const size = Number((await t.database.db.selectFrom('journal_state').select('size').executeTakeFirstOrThrow()).size)
    const feed = (await t.app.inject({ method: 'GET', url: `/admin/journal?after=3&limit=1000`, headers: t.admin })).json() as {
      entries: unknown[]
    }
    assert.equal(feed.entries.length, size - 3)
    assert.equal(lines.length, size - 3)
    // Written by the database, the same text as JSON.stringify's on both storages.
    const entries = await Promise.all(feed.entries.map((entry) => findTransactionById(t.database.db, (entry as { id: number }).id)))
    assert.deepEqual(
      lines,
      entries.map((entry) => JSON.stringify(entry)),
    )
    assert.deepEqual(
      lines.map((line) => JSON.parse(line) as object),
      feed.entries,
    )
  })

  it('follows the journal with --follow, and ends with 0 on SIGINT or when its reader closes the pipe', async () => {
    for (const ending of ['SIGINT', 'a closed pipe']) {
      const size = Number((await t.database.db.selectFrom('journal_state').select('size').executeTakeFirstOrThrow()).size)
      const child = spawn(process.execPath, ['bin/coffer.js', 'export', '--follow', '--after', String(size)], {
        env: { ...process.env, ...env() },
        stdio: ['ignore', 'pipe', 'pipe'],
      })
      const exited = new Promise<[number | null, string | null]>((resolve) => child.on('exit', (code, signal) => resolve([code, signal])))
      let out = ''
      child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()))
      // Made while it follows: it comes out once positioned.
      const followed = await sendTransaction(t, alice, { recipient: bob.username, assets: { gold: 1 }, memo: `followed until ${ending}` })
      for (let waited = 0; !out.includes(`"memo":"followed until ${ending}"`); waited++) {
        assert.ok(waited < 300, `no line for transaction ${followed.id} after 30 s: ${out}`)
        await new Promise((resolve) => setTimeout(resolve, 100))
      }
      assert.equal((JSON.parse(out.trim().split('\n').at(-1) as string) as { id: number }).id, followed.id)
      if (ending === 'SIGINT') child.kill('SIGINT')
      else {
        child.stdout.destroy()
        // Its next line finds the pipe closed.
        await sendTransaction(t, alice, { recipient: bob.username, assets: { gold: 1 } })
      }
      assert.deepEqual(await exited, [0, null], ending)
    }
  })
})
