import { hash } from 'node:crypto'

/**
 * The Merkle tree of RFC 9162 2.1 over the journal: leaf hash SHA-256(0x00 ‖ leaf),
 * node hash SHA-256(0x01 ‖ left ‖ right), the empty tree's root SHA-256 of nothing. The tree is
 * kept as the hashes of its complete subtrees of `2^STORED_LEVEL` leaves or more (`journal_nodes`);
 * a smaller one is hashed from its leaves (the entries' hashes) when read. A proof or a root needs a
 * logarithmic number of subtrees and a few leaves, never the whole journal.
 */

export type Hash = Buffer

/** One-shot SHA-256 of the parts joined (cheaper than a hash object per node). */
function sha256(...parts: Uint8Array[]): Hash {
  return hash('sha256', Buffer.concat(parts), 'buffer')
}

export const EMPTY_ROOT: Hash = sha256()

/** A prefix byte and two hashes are written here before hashing: no buffer per node. */
const scratch = Buffer.alloc(65)

export function leafHash(leaf: Uint8Array): Hash {
  if (leaf.length > 64) return sha256(Buffer.of(0), leaf)
  scratch[0] = 0
  scratch.set(leaf, 1)
  return hash('sha256', scratch.subarray(0, 1 + leaf.length), 'buffer')
}

function nodeHash(left: Uint8Array, right: Uint8Array): Hash {
  if (left.length !== 32 || right.length !== 32) return sha256(Buffer.of(1), left, right)
  scratch[0] = 1
  scratch.set(left, 1)
  scratch.set(right, 33)
  return hash('sha256', scratch, 'buffer')
}

/** A complete subtree: leaves [idx·2^level, (idx+1)·2^level). */
export interface Node {
  level: number
  idx: number
  hash: Hash
}

/**
 * The lowest level stored: a subtree of 16 leaves or more. Below it, storing would cost a row per
 * transaction for a proof's saving of reading at most a few dozen entries' hashes.
 */
export const STORED_LEVEL = 4

/** Whether a complete subtree is stored (`journal_nodes`) rather than hashed from its leaves when read. */
export const isStored = (node: { level: number }) => node.level >= STORED_LEVEL

/** The hash of the complete subtree over `leaves` (the entries' hashes, a power of two of them, in order). */
export function subtreeHash(leaves: Uint8Array[]): Hash {
  let level = leaves.map((leaf) => leafHash(leaf))
  while (level.length > 1) level = Array.from({ length: level.length / 2 }, (_, i) => nodeHash(level[2 * i], level[2 * i + 1]))
  return level[0]
}

/** The roots of the complete subtrees of a tree, largest (leftmost) first: one per set bit of its size. */
export type Frontier = Node[]

/**
 * Appends a leaf hash to the tree of `size` leaves whose frontier is given (changed in place);
 * answers the complete subtrees above the leaves that it completes, to be stored.
 */
export function appendLeaf(frontier: Frontier, size: number, leaf: Hash): Node[] {
  return appendWith(frontier, { level: 0, idx: size, hash: leaf }, nodeHash)
}

/** A complete subtree whose hash is a string of 32 latin1 characters, its bytes (`appendLatin1Leaf`). */
export interface Latin1Node {
  level: number
  idx: number
  hash: string
}

/**
 * `appendLeaf` of the leaf whose entry hash is `entryHex`, with hashes as latin1 strings: the
 * sequencer's form, as Node answers a digest as a short string several times faster than as a new Buffer.
 */
export function appendLatin1Leaf(frontier: Latin1Node[], size: number, entryHex: string): Latin1Node[] {
  scratch[0] = 0
  scratch.write(entryHex, 1, 32, 'hex')
  return appendWith(frontier, { level: 0, idx: size, hash: hash('sha256', leafInput, 'binary') }, nodeHashLatin1)
}

/** `rootOf` with hashes as latin1 strings (a tree's subtrees in order, largest first, as `appendLatin1Leaf` keeps them). */
export function latin1RootOf(frontier: { hash: string }[]): string {
  if (frontier.length === 0) return EMPTY_ROOT.toString('latin1')
  let root = frontier[frontier.length - 1].hash
  for (let i = frontier.length - 2; i >= 0; i--) root = nodeHashLatin1(frontier[i].hash, root)
  return root
}

const leafInput = scratch.subarray(0, 33)

/** The node hash of two subtrees' latin1 hashes, latin1. */
export function nodeHashLatin1(left: string, right: string): string {
  scratch[0] = 1
  scratch.write(left, 1, 32, 'latin1')
  scratch.write(right, 33, 32, 'latin1')
  return hash('sha256', scratch, 'binary')
}

function appendWith<H>(
  frontier: { level: number; idx: number; hash: H }[],
  added: { level: number; idx: number; hash: H },
  combine: (left: H, right: H) => H,
): { level: number; idx: number; hash: H }[] {
  const completed: { level: number; idx: number; hash: H }[] = []
  let node = added
  while (frontier.length > 0 && frontier[frontier.length - 1].level === node.level) {
    const left = frontier.pop() as { level: number; idx: number; hash: H }
    node = { level: node.level + 1, idx: Math.floor(left.idx / 2), hash: combine(left.hash, node.hash) }
    completed.push(node)
  }
  frontier.push(node)
  return completed
}

/** The root of the tree whose frontier is given. */
export function rootOf(frontier: Frontier): Hash {
  if (frontier.length === 0) return EMPTY_ROOT
  let root = frontier[frontier.length - 1].hash
  for (let i = frontier.length - 2; i >= 0; i--) root = nodeHash(frontier[i].hash, root)
  return root
}

/** Reads the hash of a complete subtree (level 0: a leaf hash). */
export type NodeReader = (level: number, idx: number) => Hash

function largestPowerOfTwoBelow(n: number): number {
  let k = 1
  while (k * 2 < n) k *= 2
  return k
}

/** MTH(D[a:b]) from complete subtrees: one read when the range is one, else split as RFC 9162 does. */
function rangeHash(read: NodeReader, a: number, b: number): Hash {
  const n = b - a
  if ((n & (n - 1)) === 0 && a % n === 0) return read(Math.log2(n), a / n)
  const k = largestPowerOfTwoBelow(n)
  return nodeHash(rangeHash(read, a, a + k), rangeHash(read, a + k, b))
}

/** RFC 9162 2.1.3.1 PATH(m, D[a:b]), leaf first. */
function path(read: NodeReader, m: number, a: number, b: number): Hash[] {
  const n = b - a
  if (n <= 1) return []
  const k = largestPowerOfTwoBelow(n)
  if (m < k) return [...path(read, m, a, a + k), rangeHash(read, a + k, b)]
  return [...path(read, m - k, a + k, b), rangeHash(read, a, a + k)]
}

/** RFC 9162 2.1.4.1 SUBPROOF(m, D[a:b], complete). */
function subproof(read: NodeReader, m: number, a: number, b: number, complete: boolean): Hash[] {
  const n = b - a
  if (m === n) return complete ? [] : [rangeHash(read, a, b)]
  const k = largestPowerOfTwoBelow(n)
  if (m <= k) return [...subproof(read, m, a, a + k, complete), rangeHash(read, a + k, b)]
  return [...subproof(read, m - k, a + k, b, false), rangeHash(read, a, a + k)]
}

/**
 * What `work` reads, found by running it once on placeholder hashes: the control flow of these
 * algorithms depends on the sizes only, so the caller can fetch exactly these nodes in one query.
 */
export function nodesRead(work: (read: NodeReader) => unknown): { level: number; idx: number }[] {
  const seen = new Map<string, { level: number; idx: number }>()
  const placeholder = Buffer.alloc(32)
  work((level, idx) => {
    seen.set(`${level}:${idx}`, { level, idx })
    return placeholder
  })
  return [...seen.values()]
}

/** The root of the first `size` leaves. */
export function treeRoot(read: NodeReader, size: number): Hash {
  return size === 0 ? EMPTY_ROOT : rangeHash(read, 0, size)
}

/** The inclusion proof (audit path) of leaf `index` in the tree of the first `size` leaves. */
export function inclusionProof(read: NodeReader, index: number, size: number): Hash[] {
  if (index < 0 || index >= size) throw new RangeError(`leaf ${index} is not in a tree of ${size}`)
  return path(read, index, 0, size)
}

/** The consistency proof between the trees of the first `from` and `to` leaves (1 ≤ from ≤ to). */
export function consistencyProof(read: NodeReader, from: number, to: number): Hash[] {
  if (from < 1 || from > to) throw new RangeError(`no consistency proof from ${from} to ${to}`)
  return from === to ? [] : subproof(read, from, 0, to, true)
}

/** RFC 9162 2.1.3.2: does `proof` show the leaf hash at `index` in the tree of `size` with `root`? */
export function verifyInclusion(index: number, size: number, leaf: Uint8Array, proof: Uint8Array[], root: Uint8Array): boolean {
  if (index >= size) return false
  let fn = index
  let sn = size - 1
  let r: Uint8Array = leaf
  for (const p of proof) {
    if (sn === 0) return false
    if (fn % 2 === 1 || fn === sn) {
      r = nodeHash(p, r)
      if (fn % 2 === 0) {
        while (fn % 2 === 0 && fn !== 0) {
          fn = Math.floor(fn / 2)
          sn = Math.floor(sn / 2)
        }
      }
    } else {
      r = nodeHash(r, p)
    }
    fn = Math.floor(fn / 2)
    sn = Math.floor(sn / 2)
  }
  return sn === 0 && Buffer.from(r).equals(Buffer.from(root))
}

/** RFC 9162 2.1.4.2: does `proof` show the tree of `size2` with `root2` extends the one of `size1` with `root1`? */
export function verifyConsistency(size1: number, size2: number, proof: Uint8Array[], root1: Uint8Array, root2: Uint8Array): boolean {
  if (size1 < 1 || size1 > size2) return false
  if (size1 === size2) return proof.length === 0 && Buffer.from(root1).equals(Buffer.from(root2))
  const path = (size1 & (size1 - 1)) === 0 ? [root1, ...proof] : proof
  if (path.length === 0) return false
  let fn = size1 - 1
  let sn = size2 - 1
  while (fn % 2 === 1) {
    fn = Math.floor(fn / 2)
    sn = Math.floor(sn / 2)
  }
  let fr: Uint8Array = path[0]
  let sr: Uint8Array = path[0]
  for (const c of path.slice(1)) {
    if (sn === 0) return false
    if (fn % 2 === 1 || fn === sn) {
      fr = nodeHash(c, fr)
      sr = nodeHash(c, sr)
      if (fn % 2 === 0) {
        while (fn % 2 === 0 && fn !== 0) {
          fn = Math.floor(fn / 2)
          sn = Math.floor(sn / 2)
        }
      }
    } else {
      sr = nodeHash(sr, c)
    }
    fn = Math.floor(fn / 2)
    sn = Math.floor(sn / 2)
  }
  return sn === 0 && Buffer.from(fr).equals(Buffer.from(root1)) && Buffer.from(sr).equals(Buffer.from(root2))
}
