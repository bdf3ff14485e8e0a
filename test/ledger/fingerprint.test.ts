import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { Fingerprint } from '../../src/ledger/fingerprint.ts'

type Row = [number, number, string, number, number]

/** `row` with `field` set to `value`. */
const withField = (row: Row, field: number, value: number | string) => row.map((old, i) => (i === field ? value : old)) as Row

const rows: Row[] = Array.from({ length: 1_000 }, (_, i) => [
  (i % 17) + 1,
  (i % 3) + 1,
  new Date(1_700_000_000_000 + i * 1_000).toISOString(),
  i + 1,
  i % 2 === 0 ? i * 1_000 : -i,
])

function fingerprintOf(into: Fingerprint, of: Row[]): Fingerprint {
  for (const [wallet, asset, createdAt, transaction, quantity] of of) into.add(wallet, asset, into.time(createdAt), transaction, quantity)
  return into
}

describe('Fingerprint', () => {
  it('is the same for the same rows in any order', () => {
    const first = new Fingerprint()
    fingerprintOf(first, rows)
    assert.ok(first.equals(fingerprintOf(first.sibling(), [...rows].reverse())))
  })

  it('differs when any field of a row changes, a row is missing or doubled, or two rows trade a field', () => {
    const first = fingerprintOf(new Fingerprint(), rows)
    const big = 2 ** 40
    const changes: ((row: Row[]) => Row[])[] = [
      (of) => of.slice(1),
      (of) => [...of, of[0]],
      ...[0, 1, 3, 4].flatMap((field) =>
        [1, -1, big].map((by) => (of: Row[]) => of.map((row, i) => (i === 5 ? withField(row, field, Number(row[field]) + by) : row))),
      ),
      (of) => of.map((row, i) => (i === 5 ? withField(row, 2, '2000-01-01T00:00:00.000Z') : row)),
      (of) => of.map((row, i) => (i === 5 ? withField(row, 4, of[6][4]) : i === 6 ? withField(row, 4, of[5][4]) : row)),
      (of) => of.map((row, i) => (i === 5 ? withField(row, 2, of[6][2]) : i === 6 ? withField(row, 2, of[5][2]) : row)),
    ]
    for (const change of changes) assert.equal(first.equals(fingerprintOf(first.sibling(), change(rows))), false, String(change))
  })

  it('draws its keys for each run: the same rows give other sums', () => {
    const one = fingerprintOf(new Fingerprint(), rows)
    const other = fingerprintOf(new Fingerprint(), rows)
    assert.equal(one.equals(other), false)
  })
})
