import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { describe, it } from 'node:test'
import fc from 'fast-check'
import { chainHashHex, chainHashOfTail, encodedTail, encodeMetadata, type EncodedTransaction } from '../../src/journal/encoding.ts'

/** The encoding as `docs/journal.md` defines it: JSON.stringify of the array, lines sorted by asset id, metadata by key. */
function definition(position: number, t: EncodedTransaction): string {
  const assets = [...t.assets].sort((a, b) => a[0] - b[0] || a[1] - b[1])
  const metadata = Object.entries(t.metadata).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
  const fields = [t.id, t.kind, t.created_at, t.sending_wallet_id, t.receiving_wallet_id, t.memo]
  return JSON.stringify(['coffer-transaction/v1', position, ...fields, assets, t.reverses, t.hold_id, metadata])
}

const chained = (previous: Buffer, text: string) => createHash('sha256').update(previous).update(text, 'utf8').digest()

// Every kind of character JSON may escape: quotes, backslashes, controls, lone and paired surrogates.
const text = fc.string({
  unit: fc.constantFrom('a', 'é', '"', '\\', '\n', '\u0001', '\u001f', '\u007f', '\ud800', '\udfff', '😀', ':', '{'),
})
const id = fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER })
const transaction = fc.record({
  id,
  kind: fc.constantFrom('transfer', 'issuance', 'reversal'),
  created_at: fc.constantFrom('2026-11-29T19:00:00.123Z', '2001-01-01T00:00:00.000Z'),
  sending_wallet_id: id,
  receiving_wallet_id: id,
  memo: text,
  assets: fc.array(fc.tuple(id, id), { maxLength: 4 }),
  reverses: fc.option(id),
  hold_id: fc.option(id),
  metadata: fc.dictionary(text, text, { maxKeys: 3 }),
}) as fc.Arbitrary<EncodedTransaction>

describe("the journal's canonical encoding", () => {
  it('writes what JSON.stringify of the defining array writes, from fields or from stored metadata text', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 2 ** 40 }), transaction, (position, t) => {
        const expected = definition(position, t)
        // Verify encodes the stored metadata text: the same as from the object.
        assert.equal(encodeMetadata(JSON.stringify(t.metadata)), encodeMetadata(t.metadata))
        const previous = createHash('sha256').update(String(position)).digest()
        assert.equal(chainHashOfTail(previous.toString('hex'), position, encodedTail(t)), chained(previous, expected).toString('hex'))
        assert.equal(chainHashHex(previous.toString('hex'), expected), chained(previous, expected).toString('hex'))
      }),
      { numRuns: 2000 },
    )
  })

  it('reads stored metadata of no key, of one key and of several keys in any order', () => {
    assert.equal(encodeMetadata(null), '[]')
    assert.equal(encodeMetadata('{}'), '[]')
    assert.equal(encodeMetadata('{"order":"o1"}'), '[["order","o1"]]')
    assert.equal(encodeMetadata('{ "order" : "o1" }'), '[["order","o1"]]')
    assert.equal(encodeMetadata('{"b":"2","a":"1"}'), '[["a","1"],["b","2"]]')
    assert.equal(encodeMetadata('{"k":"\\u00e9\\n"}'), '[["k","é\\n"]]')
  })
})
