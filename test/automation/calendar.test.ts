import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { createCalendars, parseEvery, type Calendar } from '../../src/schedules/calendar.ts'

const { firstOccurrenceFrom, isTimeZone, occurrenceAt } = createCalendars()

const calendar = (startAt: string, every: string | null, timeZone: string, more: Partial<Calendar> = {}): Calendar => ({
  startAt,
  every,
  count: null,
  endAt: null,
  timeZone,
  ...more,
})
const at = (c: Calendar, n: number) => {
  const instant = occurrenceAt(c, n)
  return instant === undefined ? undefined : new Date(instant).toISOString()
}

/** Occurrence n is start_at's wall-clock time in the zone plus n × every, turned back into an instant. */
describe('schedule calendar', () => {
  const cases: { name: string; c: Calendar; expected: string[] }[] = [
    {
      name: 'monthly on the 31st, 09:00 Paris: the last day of shorter months, winter and summer time',
      c: calendar('2027-01-31T08:00:00.000Z', 'P1M', 'Europe/Paris'),
      expected: ['2027-01-31T08:00:00.000Z', '2027-02-28T08:00:00.000Z', '2027-03-31T07:00:00.000Z', '2027-04-30T07:00:00.000Z'],
    },
    {
      name: 'monthly on the 31st in a leap year: 29 February, then back to the 31st',
      c: calendar('2028-01-31T12:00:00.000Z', 'P1M', 'UTC'),
      expected: ['2028-01-31T12:00:00.000Z', '2028-02-29T12:00:00.000Z', '2028-03-31T12:00:00.000Z'],
    },
    {
      name: 'yearly on a leap day: 28 February in common years, 29 February in the next leap year',
      c: calendar('2028-02-29T10:00:00.000Z', 'P1Y', 'UTC'),
      expected: [
        '2028-02-29T10:00:00.000Z',
        '2029-02-28T10:00:00.000Z',
        '2030-02-28T10:00:00.000Z',
        '2031-02-28T10:00:00.000Z',
        '2032-02-29T10:00:00.000Z',
      ],
    },
    {
      name: 'daily at 02:30 Paris over the spring gap (02:00 → 03:00 on 28 March 2027): 03:00 that night',
      c: calendar('2027-03-27T01:30:00.000Z', 'P1D', 'Europe/Paris'),
      expected: ['2027-03-27T01:30:00.000Z', '2027-03-28T01:00:00.000Z', '2027-03-29T00:30:00.000Z'],
    },
    {
      name: 'daily at 02:30 Paris over the autumn repeat (03:00 → 02:00 on 31 October 2027): once, the earlier instant',
      c: calendar('2027-10-30T00:30:00.000Z', 'P1D', 'Europe/Paris'),
      expected: ['2027-10-30T00:30:00.000Z', '2027-10-31T00:30:00.000Z', '2027-11-01T01:30:00.000Z'],
    },
    {
      name: 'daily at 02:30 New York over the spring gap (14 March 2027): 03:00 EDT',
      c: calendar('2027-03-13T07:30:00.000Z', 'P1D', 'America/New_York'),
      expected: ['2027-03-13T07:30:00.000Z', '2027-03-14T07:00:00.000Z', '2027-03-15T06:30:00.000Z'],
    },
    {
      name: 'daily at 01:30 New York over the autumn repeat (7 November 2027): the first 01:30, in EDT',
      c: calendar('2027-11-06T05:30:00.000Z', 'P1D', 'America/New_York'),
      expected: ['2027-11-06T05:30:00.000Z', '2027-11-07T05:30:00.000Z', '2027-11-08T06:30:00.000Z'],
    },
    {
      name: 'weekly on Monday 09:00 Paris keeps 09:00 across the change to summer time',
      c: calendar('2027-03-22T08:00:00.000Z', 'P1W', 'Europe/Paris'),
      expected: ['2027-03-22T08:00:00.000Z', '2027-03-29T07:00:00.000Z'],
    },
    {
      name: 'every 2 days in UTC over the end of February in a leap year',
      c: calendar('2028-02-27T00:00:00.000Z', 'P2D', 'UTC'),
      expected: ['2028-02-27T00:00:00.000Z', '2028-02-29T00:00:00.000Z', '2028-03-02T00:00:00.000Z'],
    },
  ]
  for (const { name, c, expected } of cases) {
    it(name, () => {
      assert.deepEqual(
        expected.map((_, n) => at(c, n)),
        expected,
      )
    })
  }

  it('ends after count occurrences, or after end_at; a one-off has one occurrence', () => {
    assert.equal(at(calendar('2027-01-01T00:00:00.000Z', 'P1D', 'UTC', { count: 2 }), 1), '2027-01-02T00:00:00.000Z')
    assert.equal(at(calendar('2027-01-01T00:00:00.000Z', 'P1D', 'UTC', { count: 2 }), 2), undefined)
    const ending = calendar('2027-01-01T00:00:00.000Z', 'P1D', 'UTC', { endAt: '2027-01-03T00:00:00.000Z' })
    assert.equal(at(ending, 2), '2027-01-03T00:00:00.000Z')
    assert.equal(at(ending, 3), undefined)
    assert.equal(at(calendar('2027-01-01T00:00:00.000Z', null, 'UTC'), 0), '2027-01-01T00:00:00.000Z')
    assert.equal(at(calendar('2027-01-01T00:00:00.000Z', null, 'UTC'), 1), undefined)
  })

  it('finds the first occurrence from an instant on (a schedule resumed)', () => {
    const c = calendar('2027-01-01T09:00:00.000Z', 'P1D', 'UTC')
    assert.deepEqual(firstOccurrenceFrom(c, 0, Date.parse('2027-01-05T10:00:00.000Z')), {
      n: 5,
      at: Date.parse('2027-01-06T09:00:00.000Z'),
    })
    assert.equal(firstOccurrenceFrom({ ...c, count: 3 }, 0, Date.parse('2027-01-05T10:00:00.000Z')), undefined)
  })

  it('takes whole days, weeks or months from P1D to P1Y, and nothing else', () => {
    assert.deepEqual(parseEvery('P1D'), { unit: 'day', count: 1 })
    assert.deepEqual(parseEvery('P2W'), { unit: 'day', count: 14 })
    assert.deepEqual(parseEvery('P3M'), { unit: 'month', count: 3 })
    assert.deepEqual(parseEvery('P1Y'), { unit: 'month', count: 12 })
    for (const bad of ['P0D', 'P2Y', 'P13M', 'P53W', 'P367D', 'PT1H', 'P1M2D', 'P1.5D', '1D', 'P', ''])
      assert.equal(parseEvery(bad), undefined, bad)
  })

  it('knows IANA time zones and refuses anything else', () => {
    for (const zone of ['UTC', 'Europe/Paris', 'America/New_York', 'America/Argentina/Buenos_Aires']) assert.ok(isTimeZone(zone), zone)
    for (const zone of ['Mars/Olympus', '+01:00', 'Europe/', '', 'Europe/Paris/../x']) assert.ok(!isTimeZone(zone), zone)
  })
})
