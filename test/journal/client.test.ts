import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { after, before, describe, it } from 'node:test'
import { createCofferClient } from '../../client/index.ts'
import {
  createJournalVerifier,
  importJournalKey,
  JournalCheckError,
  leafHash,
  verifyCheckpoint,
  verifyConsistency,
  verifyInclusion,
  verifyInclusionProof,
  type Checkpoint,
  type InclusionProof,
} from '../../client/journal.ts'
import { consistencyProof, inclusionProof, treeRoot, type NodeReader } from '../../src/journal/merkle.ts'
import { buildTestApp, journalCovered, STORAGE, type TestApp } from '../helpers/app.ts'
import { createAsset, createUser, fundedUser, sendTransaction, type TestUser } from '../helpers/factories.ts'

/** One byte of a hex hash changed. */
function altered(hash: string): string {
  return (hash[0] === '0' ? '1' : '0') + hash.slice(1)
}

/**
 * The typed client's checks (client/journal.ts, Web Crypto) against the service's own proofs, and
 * against the server's Merkle code on every leaf and pair of sizes of small trees: two
 * implementations that must agree, one of them checked against RFC 6962's published vectors
 * (merkle.test.ts).
 */
describe(`the typed client's checks of the journal (${STORAGE})`, () => {
  let t: TestApp
  let baseUrl: string
  let alice: TestUser
  let bob: TestUser
  let sent: number[]

  before(async () => {
    t = await buildTestApp({ CHECKPOINT_INTERVAL_MS: '100' })
    baseUrl = await t.app.listen({ port: 0, host: '127.0.0.1' })
    const gold = await createAsset(t, { name: 'gold' })
    alice = await fundedUser(t, [[gold, 1000]])
    bob = await createUser(t.app)
    sent = []
    for (let i = 0; i < 6; i++) sent.push((await sendTransaction(t, alice, { recipient: bob.username, assets: { gold: i + 1 } })).id)
    await journalCovered(t.database.db)
  })
  after(() => t.close())

  const client = (user: TestUser) => createCofferClient({ baseUrl, token: user.token })

  it('checks the proof of each transaction of the wallet and keeps the checkpoint it trusted', async () => {
    const journal = await createJournalVerifier(client(bob))
    assert.equal(journal.trusted?.size, undefined)
    for (const id of sent) {
      const proof = await journal.checkTransaction(id)
      assert.equal(proof.transaction.id, id)
      assert.equal(proof.leaf_index, (proof.transaction.position as number) - 1)
    }
    const trusted = journal.trusted as Checkpoint
    assert.ok(trusted.size >= sent.length)

    // More transactions, a later checkpoint: a verifier started from the kept one checks that it extends it.
    for (let i = 0; i < 5; i++) sent.push((await sendTransaction(t, alice, { recipient: bob.username, assets: { gold: 1 } })).id)
    await journalCovered(t.database.db)
    const later = await createJournalVerifier(client(alice), { trusted })
    await later.checkTransaction(sent.at(-1) as number)
    assert.ok((later.trusted as Checkpoint).size > trusted.size)
    // And the earlier transactions against the later checkpoint.
    await later.checkTransaction(sent[0])
  })

  it('refuses a changed transaction hash, audit path, leaf index or checkpoint, and a checkpoint of another key', async () => {
    const key = await importJournalKey(((await (await fetch(`${baseUrl}/journal/key`)).json()) as { public_key: string }).public_key)
    const response = await fetch(`${baseUrl}/wallet/transactions/${sent[2]}/proof`, { headers: bob.auth })
    assert.equal(response.status, 200)
    const proof = (await response.json()) as InclusionProof
    assert.equal(await verifyInclusionProof(proof), true)
    assert.equal(await verifyCheckpoint(key, proof.checkpoint), true)

    const hash = proof.transaction.hash as string
    assert.equal(await verifyInclusionProof({ ...proof, transaction: { ...proof.transaction, hash: altered(hash) } }), false)
    assert.equal(await verifyInclusionProof({ ...proof, leaf_index: proof.leaf_index + 1 }), false)
    if (proof.audit_path.length > 0) {
      const path = [altered(proof.audit_path[0]), ...proof.audit_path.slice(1)]
      assert.equal(await verifyInclusionProof({ ...proof, audit_path: path }), false)
    }
    assert.equal(await verifyInclusionProof({ ...proof, audit_path: [...proof.audit_path, hash] }), false)
    const checkpoint = proof.checkpoint
    for (const changed of [
      { ...checkpoint, root: altered(checkpoint.root) },
      { ...checkpoint, size: checkpoint.size + 1 },
      { ...checkpoint, signed_at: new Date(Date.parse(checkpoint.signed_at) + 1).toISOString() },
      { ...checkpoint, signature: 'not base64 at all!' },
    ])
      assert.equal(await verifyCheckpoint(key, changed), false)

    // A verifier given another public key refuses the service's checkpoints.
    const other = await crypto.subtle.generateKey({ name: 'Ed25519' }, true, ['sign', 'verify'])
    const otherKey = Buffer.from(await crypto.subtle.exportKey('raw', (other as CryptoKeyPair).publicKey)).toString('base64')
    const fooled = await createJournalVerifier(client(bob), { publicKey: otherKey })
    await assert.rejects(
      fooled.checkTransaction(sent[2]),
      (error: unknown) => error instanceof JournalCheckError && error.failure.kind === 'bad-signature',
    )
    assert.equal(fooled.trusted?.size, undefined)

    // A trusted checkpoint the service's journal does not extend (another root at its size) is caught.
    const forged = await createJournalVerifier(client(bob), { trusted: { ...checkpoint, size: 1, root: altered(checkpoint.root) } })
    await assert.rejects(
      forged.refresh(),
      (error: unknown) =>
        error instanceof JournalCheckError &&
        error.failure.kind === 'not-extended' &&
        error.failure.earlier === 1 &&
        /does not extend/.test(error.reason),
    )
  })
})

describe("the typed client's RFC 9162 checks agree with the server's proofs on every small tree", () => {
  it('verifies every inclusion and consistency proof up to 33 leaves, and refuses them on another root', async () => {
    const leaves: Uint8Array[] = []
    for (let i = 0; i < 33; i++) leaves.push(await leafHash(Uint8Array.of(i, i * 7)))
    // The server's algorithms read the hashes of complete subtrees (level 0: the leaf hashes); here from the leaves.
    const subtree = (list: Buffer[]): Buffer => {
      if (list.length === 1) return list[0]
      const half = list.length / 2
      return createHash('sha256')
        .update(Buffer.of(1))
        .update(subtree(list.slice(0, half)))
        .update(subtree(list.slice(half)))
        .digest()
    }
    const read: NodeReader = (level, idx) =>
      subtree(leaves.slice(idx * 2 ** level, (idx + 1) * 2 ** level).map((leaf) => Buffer.from(leaf)))
    const roots: Uint8Array[] = [new Uint8Array()]
    for (let size = 1; size <= leaves.length; size++) roots.push(treeRoot(read, size))
    for (let size = 1; size <= leaves.length; size++) {
      for (let index = 0; index < size; index++) {
        const path = inclusionProof(read, index, size)
        assert.equal(await verifyInclusion(index, size, leaves[index], path, roots[size]), true, `leaf ${index} of ${size}`)
        assert.equal(await verifyInclusion(index, size, leaves[(index + 1) % size], path, roots[size]), size === 1)
      }
      for (let from = 1; from <= size; from++) {
        const proof = consistencyProof(read, from, size)
        assert.equal(await verifyConsistency(from, size, proof, roots[from], roots[size]), true, `${from} to ${size}`)
        if (from < size) assert.equal(await verifyConsistency(from, size, proof, roots[from + 1], roots[size]), false)
      }
    }
  })
})
