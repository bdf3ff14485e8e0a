import fs from 'node:fs'
import type { Executor } from '../db/database.ts'
import { chainHash, GENESIS_HASH } from './encoding.ts'
import * as journal from './journal.repository.ts'
import { appendLeaf, EMPTY_ROOT, leafHash, rootOf, type Frontier, type Node } from './merkle.ts'
import { parseSigningKey, signingKeyFile, verifyCheckpointSignature, type SigningKey } from '../secrets/signing-key.ts'

export interface JournalReport {
  ok: boolean
  /** Entries read (positions 1 to `entries`). */
  entries: number
  checkpoints: number
  /** False when no signing key was found (SIGNING_KEY or the data directory's key file): signatures were not checked. */
  signaturesChecked: boolean
  /** Committed transactions the sequencer has not positioned yet (not a fault: it runs after commit). */
  unpositioned: number
  /** The first position whose transaction no longer gives its hash; undefined when every one does. */
  firstMismatch: number | undefined
  problems: string[]
}

const BATCH = 5_000

/**
 * The journal recomputed from the transactions (`coffer verify`): every hash from its
 * transaction's stored fields and the hash before it, the Merkle root of every checkpoint from
 * those hashes, every stored subtree (`journal_nodes`, which proofs are read from) and every
 * checkpoint's signature with the public key. A row changed in the database after it was
 * positioned shows as the first position whose hash no longer matches.
 */
export async function verifyJournal(
  db: Executor,
  key: SigningKey | undefined,
  progress?: (done: number, total: number) => void,
): Promise<JournalReport> {
  const problems: string[] = []
  const checkpoints = await journal.listCheckpoints(db)
  const state = await journal.readState(db, false)
  const total = state?.size ?? 0
  let firstMismatch: number | undefined
  let previous = GENESIS_HASH
  let size = 0
  const frontier: Frontier = []
  let next = 0
  let nodes = 0
  const checkAt = (checkpoint: journal.Checkpoint) => {
    const root = (checkpoint.size === 0 ? EMPTY_ROOT : rootOf(frontier)).toString('hex')
    if (root !== checkpoint.root)
      problems.push(`checkpoint of size ${checkpoint.size}: its root is not the tree of the first ${checkpoint.size} hashes`)
    if (key && !verifyCheckpointSignature(key.publicKey, checkpoint))
      problems.push(`checkpoint of size ${checkpoint.size}: its signature does not verify with the signing key`)
  }
  while (next < checkpoints.length && checkpoints[next].size === 0) checkAt(checkpoints[next++])
  for (;;) {
    const entries = await journal.readEntriesWithFields(db, size, BATCH)
    if (entries.length === 0) break
    const from = size
    const completed: Node[] = []
    for (const entry of entries) {
      if (entry.position !== size + 1) {
        problems.push(`position ${size + 1} is missing (the next entry is ${entry.position})`)
        firstMismatch ??= size + 1
      }
      const expected = entry.fields ? chainHash(previous, entry.position, entry.fields) : undefined
      if (expected !== entry.hash) {
        firstMismatch ??= entry.position
        if (problems.length < 1_000)
          problems.push(
            entry.fields
              ? `position ${entry.position} (transaction ${entry.transaction_id}): the transaction no longer gives its hash`
              : `position ${entry.position}: transaction ${entry.transaction_id} is missing`,
          )
      }
      const hash = expected ?? entry.hash
      completed.push(...appendLeaf(frontier, entry.position - 1, leafHash(Buffer.from(hash, 'hex'))))
      previous = hash
      size = entry.position
      while (next < checkpoints.length && checkpoints[next].size === size) checkAt(checkpoints[next++])
    }
    // The stored subtrees that proofs are read from must be the tree of these hashes.
    const stored = await journal.readNodesCompleted(db, from, size)
    for (const node of completed) {
      const hex = stored.get(`${node.level}:${node.idx}`)
      if (hex !== node.hash.toString('hex') && problems.length < 1_000) {
        const leaves = `positions ${node.idx * 2 ** node.level + 1} to ${(node.idx + 1) * 2 ** node.level}`
        problems.push(
          hex === undefined
            ? `the stored subtree over ${leaves} is missing`
            : `the stored subtree over ${leaves} is not the tree of their hashes: proofs through it do not check out`,
        )
      }
    }
    nodes += completed.length
    progress?.(size, total)
  }
  if (state && state.size !== size) problems.push(`the journal's state says ${state.size} entries, ${size} were read`)
  else if (state && (state.head !== previous || rootOf(state.frontier).toString('hex') !== rootOf(frontier).toString('hex')))
    problems.push(`the journal's state (the last hash and the tree's frontier) is not that of its ${size} entries`)
  const storedNodes = await journal.countNodes(db)
  if (storedNodes !== nodes) problems.push(`${storedNodes} subtrees are stored, the tree of ${size} entries has ${nodes}`)
  for (const checkpoint of checkpoints.slice(next))
    problems.push(`checkpoint of size ${checkpoint.size}: beyond the journal's ${size} entries`)
  return {
    ok: problems.length === 0,
    entries: size,
    checkpoints: checkpoints.length,
    signaturesChecked: key !== undefined,
    unpositioned: await journal.countUnpositioned(db),
    firstMismatch,
    problems,
  }
}

/** The signing key as configured, or from the data directory's key file; undefined when there is none (nothing is generated). */
export function findSigningKey(configured: SigningKey | undefined, dataDir: string): SigningKey | undefined {
  if (configured) return configured
  try {
    return parseSigningKey(fs.readFileSync(signingKeyFile(dataDir), 'utf8'))
  } catch {
    return undefined
  }
}
