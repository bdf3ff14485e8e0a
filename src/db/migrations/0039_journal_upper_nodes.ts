import { createHash } from 'node:crypto'
import { sql, type Kysely } from 'kysely'

/**
 * The journal's Merkle tree stores only its complete subtrees of 16 leaves or more (levels 4 and
 * up, `journal/merkle.ts`): a proof hashes the smaller ones from the entries they cover. The rows
 * of levels 1 to 3 go; down computes them again from the entries' hashes (RFC 9162 2.1).
 */
const LOWEST_STORED = 4

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function up(db: Kysely<any>): Promise<void> {
  await sql`delete from journal_nodes where level < ${LOWEST_STORED}`.execute(db)
}

/** Entries read at a time by down: a multiple of 2^LOWEST_STORED, so the subtrees below it lie within one chunk. */
const CHUNK = 16_384

const sha256 = (prefix: number, ...parts: Buffer[]) => createHash('sha256').update(Buffer.of(prefix)).update(Buffer.concat(parts)).digest()

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function down(db: Kysely<any>): Promise<void> {
  for (let after = 0; ; after += CHUNK) {
    const { rows } = await sql<{ hash: string }>`select hash from journal_entries
      where position > ${after} and position <= ${after + CHUNK} order by position`.execute(db)
    if (rows.length === 0) return
    let hashes = rows.map((row) => sha256(0, Buffer.from(row.hash, 'hex')))
    const nodes: { level: number; idx: number; hash: string }[] = []
    for (let level = 1; level < LOWEST_STORED; level++) {
      hashes = Array.from({ length: Math.floor(hashes.length / 2) }, (_, i) => sha256(1, hashes[2 * i], hashes[2 * i + 1]))
      hashes.forEach((hash, i) => nodes.push({ level, idx: after / 2 ** level + i, hash: hash.toString('hex') }))
    }
    for (let at = 0; at < nodes.length; at += 1000)
      await db
        .insertInto('journal_nodes')
        .values(nodes.slice(at, at + 1000))
        .execute()
  }
}
