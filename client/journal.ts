/**
 * The checks a holder runs on the journal without trusting the service: a checkpoint's Ed25519
 * signature, an inclusion proof of a transaction and a consistency proof between two checkpoints,
 * as RFC 9162 defines them (sections 2.1.3.2 and 2.1.4.2). Web Crypto only, so the same code runs
 * in Node 20 and in a browser; `docs/journal.md` describes what the service signs and proves.
 *
 *   const journal = await createJournalVerifier(coffer, { trusted: saved })
 *   const proof = await journal.checkTransaction(id)   // throws JournalCheckError unless it checks out
 *   save(journal.trusted)                               // the checkpoint to start from next time
 */
import { call, type CofferClient, type Transaction } from './index.ts'

export interface Checkpoint {
  size: number
  /** Lowercase hex of the RFC 9162 Merkle tree hash over the first `size` transactions. */
  root: string
  signed_at: string
  /** Base64 Ed25519 signature of `checkpointText(checkpoint)`. */
  signature: string
}

export interface InclusionProof {
  transaction: Transaction
  leaf_index: number
  checkpoint: Checkpoint
  audit_path: string[]
}

/**
 * What does not check out, with the numbers it concerns: a checkpoint's signature, a checkpoint
 * that does not extend the one trusted before, or a transaction not at its place in a checkpoint.
 */
export type JournalFailure =
  | { kind: 'bad-signature'; checkpoint: number }
  | { kind: 'not-extended'; later: number; earlier: number }
  | { kind: 'not-included'; transaction: number; checkpoint: number }

function failureText(failure: JournalFailure): string {
  switch (failure.kind) {
    case 'bad-signature':
      return `checkpoint ${failure.checkpoint} has a bad signature`
    case 'not-extended':
      return `checkpoint ${failure.later} does not extend checkpoint ${failure.earlier}`
    case 'not-included':
      return `transaction ${failure.transaction} is not at its position in checkpoint ${failure.checkpoint}`
  }
}

/**
 * A proof, a checkpoint or a signature that does not check out: `failure` says which (for a
 * program, or words of its own), `reason` says it in English (for a log).
 */
export class JournalCheckError extends Error {
  readonly reason: string
  constructor(readonly failure: JournalFailure) {
    const reason = failureText(failure)
    super(`the journal does not check out: ${reason}`)
    this.reason = reason
    this.name = 'JournalCheckError'
  }
}

/** The text a checkpoint's signature signs. */
function checkpointText(checkpoint: Omit<Checkpoint, 'signature'>): string {
  return `coffer-checkpoint/v1\n${checkpoint.size}\n${checkpoint.root}\n${checkpoint.signed_at}\n`
}

/** The service's public key (`GET /journal/key`'s `public_key`, base64 of the raw 32 bytes) for `verify`. */
export function importJournalKey(publicKeyBase64: string): Promise<CryptoKey> {
  return crypto.subtle.importKey('raw', fromBase64(publicKeyBase64), { name: 'Ed25519' }, false, ['verify'])
}

/** Whether the checkpoint carries a valid signature of the key. */
export async function verifyCheckpoint(key: CryptoKey, checkpoint: Checkpoint): Promise<boolean> {
  let signature: Uint8Array<ArrayBuffer>
  try {
    signature = fromBase64(checkpoint.signature)
  } catch {
    return false
  }
  return crypto.subtle.verify({ name: 'Ed25519' }, key, signature, new TextEncoder().encode(checkpointText(checkpoint)))
}

/**
 * Whether the audit path leads from the transaction's leaf (its `hash`, at `leaf_index` =
 * position − 1) to the root of the proof's checkpoint. The checkpoint's signature is checked apart
 * (`verifyCheckpoint`).
 */
export async function verifyInclusionProof(proof: InclusionProof): Promise<boolean> {
  const { transaction, leaf_index: index, checkpoint } = proof
  if (transaction.hash === null || transaction.position !== index + 1) return false
  if (!isHash(transaction.hash) || !isHash(checkpoint.root) || !proof.audit_path.every(isHash)) return false
  const leaf = await leafHash(fromHex(transaction.hash))
  return verifyInclusion(index, checkpoint.size, leaf, proof.audit_path.map(fromHex), fromHex(checkpoint.root))
}

/** Whether `proof` (`GET /journal/consistency`) shows that the tree of `later` extends the tree of `earlier`. */
async function verifyConsistencyProof(earlier: Checkpoint, later: Checkpoint, proof: string[]): Promise<boolean> {
  if (!isHash(earlier.root) || !isHash(later.root) || !proof.every(isHash)) return false
  return verifyConsistency(earlier.size, later.size, proof.map(fromHex), fromHex(earlier.root), fromHex(later.root))
}

/** RFC 9162 2.1.3.2: whether `path` leads from the leaf hash at `index` to `root`, the tree of `size` leaves'. */
export async function verifyInclusion(
  index: number,
  size: number,
  leaf: Uint8Array,
  path: Uint8Array[],
  root: Uint8Array,
): Promise<boolean> {
  if (!Number.isSafeInteger(index) || !Number.isSafeInteger(size) || index < 0 || index >= size) return false
  let fn = index
  let sn = size - 1
  let r = leaf
  for (const p of path) {
    if (sn === 0) return false
    if (fn % 2 === 1 || fn === sn) {
      r = await nodeHash(p, r)
      while (fn % 2 === 0 && fn !== 0) {
        fn = Math.floor(fn / 2)
        sn = Math.floor(sn / 2)
      }
    } else {
      r = await nodeHash(r, p)
    }
    fn = Math.floor(fn / 2)
    sn = Math.floor(sn / 2)
  }
  return sn === 0 && equal(r, root)
}

/** RFC 9162 2.1.4.2: whether `proof` shows that the tree of `size2` leaves with `root2` extends the one of `size1` with `root1`. */
export async function verifyConsistency(
  size1: number,
  size2: number,
  proof: Uint8Array[],
  root1: Uint8Array,
  root2: Uint8Array,
): Promise<boolean> {
  if (!Number.isSafeInteger(size1) || !Number.isSafeInteger(size2) || size1 < 1 || size1 > size2) return false
  if (size1 === size2) return proof.length === 0 && equal(root1, root2)
  const path = (size1 & (size1 - 1)) === 0 ? [root1, ...proof] : proof
  if (path.length === 0) return false
  let fn = size1 - 1
  let sn = size2 - 1
  while (fn % 2 === 1) {
    fn = Math.floor(fn / 2)
    sn = Math.floor(sn / 2)
  }
  let fr = path[0]
  let sr = path[0]
  for (const c of path.slice(1)) {
    if (sn === 0) return false
    if (fn % 2 === 1 || fn === sn) {
      fr = await nodeHash(c, fr)
      sr = await nodeHash(c, sr)
      while (fn % 2 === 0 && fn !== 0) {
        fn = Math.floor(fn / 2)
        sn = Math.floor(sn / 2)
      }
    } else {
      sr = await nodeHash(sr, c)
    }
    fn = Math.floor(fn / 2)
    sn = Math.floor(sn / 2)
  }
  return sn === 0 && equal(fr, root1) && equal(sr, root2)
}

/**
 * The checks against one service, keeping the last checkpoint trusted: a checkpoint is trusted
 * once its signature checks out and a consistency proof shows that it extends the one trusted
 * before (or is extended by it), so a journal rewritten since is caught.
 */
export interface JournalVerifier {
  /** The latest checkpoint trusted so far: keep it, and pass it as `trusted` next time. */
  readonly trusted: Checkpoint | undefined
  /** Trusts `checkpoint` after checking its signature and its consistency with the trusted one. */
  trust(checkpoint: Checkpoint): Promise<void>
  /** Fetches the latest checkpoint and trusts it (`trust`). */
  refresh(): Promise<Checkpoint>
  /** Fetches and checks the proof of one of the wallet's transactions: signature, audit path, consistency. */
  checkTransaction(id: number): Promise<InclusionProof>
}

export interface VerifierOptions {
  /** A checkpoint trusted before (kept from an earlier run); none at first. */
  trusted?: Checkpoint
  /** The public key the holder trusts (base64); fetched from `GET /journal/key` when not given. */
  publicKey?: string
}

export async function createJournalVerifier(coffer: CofferClient, options: VerifierOptions = {}): Promise<JournalVerifier> {
  const key = await importJournalKey(options.publicKey ?? (await call(coffer.GET('/journal/key'))).public_key)
  let trusted = options.trusted

  async function consistency(from: number, to: number): Promise<string[]> {
    return (await call(coffer.GET('/journal/consistency', { params: { query: { from, to } } }))).proof
  }

  async function trust(checkpoint: Checkpoint): Promise<void> {
    if (!(await verifyCheckpoint(key, checkpoint))) throw new JournalCheckError({ kind: 'bad-signature', checkpoint: checkpoint.size })
    if (trusted && trusted.size > 0 && checkpoint.size > 0) {
      const [earlier, later] = trusted.size <= checkpoint.size ? [trusted, checkpoint] : [checkpoint, trusted]
      if (!(await verifyConsistencyProof(earlier, later, await consistency(earlier.size, later.size)))) {
        throw new JournalCheckError({ kind: 'not-extended', later: later.size, earlier: earlier.size })
      }
    }
    if (!trusted || checkpoint.size > trusted.size) trusted = checkpoint
  }

  return {
    get trusted() {
      return trusted
    },
    trust,
    async refresh() {
      const checkpoint = await call(coffer.GET('/journal/checkpoint'))
      await trust(checkpoint)
      return checkpoint
    },
    async checkTransaction(id) {
      const proof = (await call(coffer.GET('/wallet/transactions/{id}/proof', { params: { path: { id: String(id) } } }))) as InclusionProof
      await trust(proof.checkpoint)
      if (!(await verifyInclusionProof(proof))) {
        throw new JournalCheckError({ kind: 'not-included', transaction: id, checkpoint: proof.checkpoint.size })
      }
      return proof
    },
  }
}

async function sha256(...parts: Uint8Array[]): Promise<Uint8Array<ArrayBuffer>> {
  const all = new Uint8Array(parts.reduce((sum, part) => sum + part.length, 0))
  let at = 0
  for (const part of parts) {
    all.set(part, at)
    at += part.length
  }
  return new Uint8Array(await crypto.subtle.digest('SHA-256', all))
}

/** RFC 9162's leaf hash: SHA-256(0x00 ‖ leaf). */
export function leafHash(leaf: Uint8Array): Promise<Uint8Array<ArrayBuffer>> {
  return sha256(Uint8Array.of(0), leaf)
}

function nodeHash(left: Uint8Array, right: Uint8Array): Promise<Uint8Array<ArrayBuffer>> {
  return sha256(Uint8Array.of(1), left, right)
}

function isHash(hex: string): boolean {
  return /^[0-9a-f]{64}$/.test(hex)
}

function fromHex(hex: string): Uint8Array<ArrayBuffer> {
  const bytes = new Uint8Array(hex.length / 2)
  for (let i = 0; i < bytes.length; i++) bytes[i] = parseInt(hex.slice(i * 2, i * 2 + 2), 16)
  return bytes
}

function fromBase64(text: string): Uint8Array<ArrayBuffer> {
  return Uint8Array.from(atob(text), (char) => char.charCodeAt(0))
}

function equal(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((byte, i) => byte === b[i])
}
