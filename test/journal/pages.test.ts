import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { positionOfLine, readPages, type PageReader } from '../../src/journal/journal.service.ts'

/** A journal of `sizes[0]` entries when first read, growing to each next size at each later read. */
function growingJournal(sizes: number[]): { read: PageReader; reads: number[] } {
  const reads: number[] = []
  const read: PageReader = async (after, limit) => {
    const size = sizes[Math.min(reads.length, sizes.length - 1)]
    reads.push(after)
    const last = Math.min(size, after + limit)
    if (last <= after) return { text: '', last: null }
    let text = ''
    for (let position = after + 1; position <= last; position++) text += `${position}\n`
    return { text, last }
  }
  return { read, reads }
}

/** Every position `readPages` gives from a `growingJournal(sizes)` in pages of `pageSize`, one asked for ahead, and the reads made. */
async function readAhead(sizes: number[], pageSize: number): Promise<{ positions: number[]; reads: number[] }> {
  const { read, reads } = growingJournal(sizes)
  let text = ''
  for await (const page of readPages(read, 1, { after: 0, follow: false, signal: new AbortController().signal, pageSize })) text += page
  return { positions: text.split('\n').filter(Boolean).map(Number), reads }
}

const ONE_TO_TWENTY = Array.from({ length: 20 }, (_, index) => index + 1)

describe("the journal's pages, read ahead", () => {
  it('asks for the next page before a full one is read, and gives every position once, in order', async () => {
    const { positions, reads } = await readAhead([20], 5)
    assert.deepEqual(positions, ONE_TO_TWENTY)
    assert.deepEqual(reads.slice(0, 3), [0, 5, 10])
  })

  it('drops a page asked for after one that was not full, and reads on from where that one ended', async () => {
    // 3 entries when the first page is read, 20 when the page after it is: that page starts past the first's end.
    const { positions, reads } = await readAhead([3, 20], 7)
    assert.deepEqual(positions, ONE_TO_TWENTY)
    assert.deepEqual(reads.slice(0, 3), [0, 7, 3])
  })

  it("reads an entry's position from its line, past a metadata key of that name", () => {
    const line = JSON.stringify({ id: 4, memo: ',"position":1', metadata: { position: '2' }, position: 31, hash: 'ab' })
    assert.equal(positionOfLine(line), 31)
  })
})
