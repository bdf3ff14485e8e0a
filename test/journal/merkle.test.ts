import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import {
  appendLatin1Leaf,
  appendLeaf,
  consistencyProof,
  EMPTY_ROOT,
  inclusionProof,
  leafHash,
  rootOf,
  treeRoot,
  verifyConsistency,
  verifyInclusion,
  type Frontier,
  type Hash,
  type Latin1Node,
  type NodeReader,
} from '../../src/journal/merkle.ts'

/**
 * The published test vectors of RFC 6962 trees, from Certificate Transparency's reference
 * implementation: google/certificate-transparency, cpp/merkletree/merkle_tree_test.cc (commit
 * c41b090ecc14ddd6b3531dc7e5ce36b21e253fdd; also replicated in Chromium's
 * net/cert/ct_log_verifier_unittest.cc), with the leaf inputs of transparency-dev/merkle
 * testonly/constants.go (LeafInputs). RFC 9162 keeps RFC 6962's tree and proofs.
 */
const LEAF_INPUTS = ['', '00', '10', '2021', '3031', '40414243', '5051525354555657', '606162636465666768696a6b6c6d6e6f']
const LEAF_HASHES = [
  '6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d',
  '96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7',
  '0298d122906dcfc10892cb53a73992fc5b9f493ea4c9badb27b791b4127a7fe7',
  '07506a85fd9dd2f120eb694f86011e5bb4662e5c415a62917033d4a9624487e7',
  'bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b',
  '4271a26be0d8a84f0bd54c8c302e7cb3a3b5d1fa6780a40bcce2873477dab658',
  'b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f',
  '46f6ffadd3d06a09ff3c5860d2755c8b9819db7df44251788c7d8e3180de8eb1',
]
/** Roots of the trees of 1 to 8 leaves. */
const ROOTS = [
  '6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d',
  'fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125',
  'aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77',
  'd37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7',
  '4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4',
  '76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef',
  'ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c',
  '5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328',
]
/** kAuditProofs: leaf, tree size, path. */
const AUDIT_PROOFS: [number, number, string[]][] = [
  [0, 1, []],
  [
    0,
    8,
    [
      '96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7',
      '5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e',
      '6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4',
    ],
  ],
  [
    5,
    8,
    [
      'bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b',
      'ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0',
      'd37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7',
    ],
  ],
  [2, 3, ['fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125']],
  [
    1,
    5,
    [
      '6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d',
      '5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e',
      'bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b',
    ],
  ],
]
/** kConsistencyProofs: old size, new size, proof. */
const CONSISTENCY_PROOFS: [number, number, string[]][] = [
  [1, 1, []],
  [
    1,
    8,
    [
      '96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7',
      '5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e',
      '6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4',
    ],
  ],
  [
    6,
    8,
    [
      '0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a',
      'ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0',
      'd37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7',
    ],
  ],
  [
    2,
    5,
    [
      '5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e',
      'bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b',
    ],
  ],
]

const hex = (hashes: Hash[]) => hashes.map((hash) => hash.toString('hex'))
const bytes = (hexes: string[]) => hexes.map((text) => Buffer.from(text, 'hex'))

/** The tree of `leaves` as the journal keeps it: every complete subtree stored as it is completed. */
function buildTree(leaves: Hash[]): { read: NodeReader; frontiers: Frontier[] } {
  const nodes = new Map<string, Hash>()
  const frontier: Frontier = []
  const frontiers: Frontier[] = [[]]
  leaves.forEach((leaf, index) => {
    nodes.set(`0:${index}`, leaf)
    for (const node of appendLeaf(frontier, index, leaf)) nodes.set(`${node.level}:${node.idx}`, node.hash)
    frontiers.push([...frontier])
  })
  const read: NodeReader = (level, idx) => {
    const hash = nodes.get(`${level}:${idx}`)
    if (!hash) throw new Error(`no node ${level}:${idx}`)
    return hash
  }
  return { read, frontiers }
}

describe('the journal Merkle tree against the RFC 6962 test vectors', () => {
  const leaves = LEAF_INPUTS.map((input) => leafHash(Buffer.from(input, 'hex')))
  const { read, frontiers } = buildTree(leaves)

  it('hashes the leaves, the empty tree and every root as published, incrementally and from stored nodes', () => {
    assert.deepEqual(hex(leaves), LEAF_HASHES)
    assert.equal(EMPTY_ROOT.toString('hex'), 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855')
    assert.equal(rootOf([]).toString('hex'), EMPTY_ROOT.toString('hex'))
    for (let size = 1; size <= 8; size++) {
      assert.equal(rootOf(frontiers[size]).toString('hex'), ROOTS[size - 1], `root of ${size}`)
      assert.equal(treeRoot(read, size).toString('hex'), ROOTS[size - 1], `stored root of ${size}`)
    }
  })

  it('answers the published audit paths, and they verify; a changed index, size, root or path does not', () => {
    for (const [leaf, size, path] of AUDIT_PROOFS) {
      assert.deepEqual(hex(inclusionProof(read, leaf, size)), path, `path of ${leaf} in ${size}`)
      const root = Buffer.from(ROOTS[size - 1], 'hex')
      assert.ok(verifyInclusion(leaf, size, leaves[leaf], bytes(path), root))
      if (size > 1) {
        assert.ok(!verifyInclusion(leaf ^ 1, size, leaves[leaf], bytes(path), root))
        assert.ok(!verifyInclusion(leaf, size * 2, leaves[leaf], bytes(path), root))
        assert.ok(!verifyInclusion(leaf, size, leaves[leaf], bytes(path).slice(1), root))
        assert.ok(!verifyInclusion(leaf, size, leaves[leaf], [...bytes(path), root], root))
      }
      assert.ok(!verifyInclusion(leaf, size, leaves[leaf], bytes(path), EMPTY_ROOT))
    }
  })

  it('answers the published consistency proofs, and they verify; changed sizes or roots do not', () => {
    for (const [from, to, proof] of CONSISTENCY_PROOFS) {
      assert.deepEqual(hex(consistencyProof(read, from, to)), proof, `proof from ${from} to ${to}`)
      const [old, now] = [Buffer.from(ROOTS[from - 1], 'hex'), Buffer.from(ROOTS[to - 1], 'hex')]
      assert.ok(verifyConsistency(from, to, bytes(proof), old, now))
      if (from !== to) {
        assert.ok(!verifyConsistency(from + 1, to, bytes(proof), old, now))
        assert.ok(!verifyConsistency(from, to, bytes(proof), now, old))
        assert.ok(!verifyConsistency(from, to, bytes(proof).slice(1), old, now))
      }
    }
  })

  it('appends a leaf from its entry hash in hex as it does from the leaf hash in bytes, hashes as latin1 strings', () => {
    const entries = Array.from({ length: 70 }, (_, i) => leafHash(Buffer.of(i, 7)).toString('hex'))
    const frontier: Frontier = []
    const latin1: Latin1Node[] = []
    entries.forEach((entry, index) => {
      const completed = appendLeaf(frontier, index, leafHash(Buffer.from(entry, 'hex')))
      const completedLatin1 = appendLatin1Leaf(latin1, index, entry)
      const asBytes = (nodes: Latin1Node[]) => nodes.map((node) => ({ ...node, hash: Buffer.from(node.hash, 'latin1') }))
      assert.deepEqual(asBytes(completedLatin1), completed)
      assert.deepEqual(asBytes(latin1), frontier)
    })
  })

  it('agrees with itself on every leaf and pair of sizes up to 70 leaves', () => {
    const many = Array.from({ length: 70 }, (_, i) => leafHash(Buffer.of(i, i >> 8)))
    const tree = buildTree(many)
    for (let size = 1; size <= 70; size++) {
      const root = treeRoot(tree.read, size)
      assert.deepEqual(root, rootOf(tree.frontiers[size]))
      for (let leaf = 0; leaf < size; leaf++)
        assert.ok(verifyInclusion(leaf, size, many[leaf], inclusionProof(tree.read, leaf, size), root))
      for (let from = 1; from <= size; from++) {
        assert.ok(
          verifyConsistency(from, size, consistencyProof(tree.read, from, size), treeRoot(tree.read, from), root),
          `${from}→${size}`,
        )
      }
    }
  })
})
