/**
 * Wall-clock dates and times in a schedule's time zone, with the browser's `Intl`: what a person
 * types ("1 December at 09:00, Europe/Paris") as the instant the service takes, and an instant as
 * that zone's wall clock for the words that describe a schedule. The service's calendar follows
 * the same rules (an hour a daylight-saving gap skips means the first instant after it; a repeated
 * hour, its earlier instant).
 */

/** How often a schedule runs: `every` split into a unit and a count (`P2W` is 2 weeks). */
export interface Every {
  unit: 'day' | 'week' | 'month' | 'year'
  count: number
}

const EVERY = /^P([1-9]\d*)([DWMY])$/
const UNITS = { D: 'day', W: 'week', M: 'month', Y: 'year' } as const
const LETTERS = { day: 'D', week: 'W', month: 'M', year: 'Y' } as const

/** The most of each unit the service takes (a year: `P366D`, `P52W`, `P12M`, `P1Y`). */
export const MOST_EVERY: Record<Every['unit'], number> = { day: 366, week: 52, month: 12, year: 1 }

export function parseEvery(every: string | null): Every | undefined {
  const match = every === null ? null : EVERY.exec(every)
  return match ? { unit: UNITS[match[2] as keyof typeof UNITS], count: Number(match[1]) } : undefined
}

export function everyOf(unit: Every['unit'], count: number): string {
  return `P${count}${LETTERS[unit]}`
}

/** The browser's own time zone, the one a person most likely means. */
export function localZone(): string {
  return Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC'
}

/** Every time zone the browser knows, UTC first. */
export function zoneNames(): string[] {
  const names = typeof Intl.supportedValuesOf === 'function' ? Intl.supportedValuesOf('timeZone') : [localZone()]
  return ['UTC', ...names.filter((name) => name !== 'UTC')]
}

const formatters = new Map<string, Intl.DateTimeFormat>()

function partsFormatter(zone: string): Intl.DateTimeFormat {
  let formatter = formatters.get(zone)
  if (!formatter) {
    formatter = new Intl.DateTimeFormat('en-US', {
      timeZone: zone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    })
    formatters.set(zone, formatter)
  }
  return formatter
}

/** An instant's wall clock in a zone, as if it were UTC (milliseconds). */
function wallOf(instant: number, zone: string): number {
  const parts: Record<string, number> = {}
  for (const part of partsFormatter(zone).formatToParts(new Date(instant))) parts[part.type] = Number(part.value)
  return Date.UTC(parts.year, parts.month - 1, parts.day, parts.hour, parts.minute, parts.second)
}

function offsetAt(instant: number, zone: string): number {
  return wallOf(instant - (instant % 1000), zone) - (instant - (instant % 1000))
}

const DAY = 86_400_000

/**
 * The instant of a wall-clock time (`YYYY-MM-DDTHH:MM`, as a `datetime-local` input gives it) in
 * a zone; undefined when it is no time.
 */
export function instantIn(wallClock: string, zone: string): number | undefined {
  const match = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})$/.exec(wallClock)
  if (!match) return undefined
  const [year, month, day, hour, minute] = match.slice(1).map(Number)
  const local = Date.UTC(year, month - 1, day, hour, minute)
  if (Number.isNaN(local)) return undefined
  const offsets = [...new Set([offsetAt(local - DAY, zone), offsetAt(local, zone), offsetAt(local + DAY, zone)])]
  const valid = offsets.map((offset) => local - offset).filter((instant) => offsetAt(instant, zone) === local - instant)
  if (valid.length > 0) return Math.min(...valid)
  // A time the gap skips: the instant the clocks jump (the first after the gap), found by halving.
  let low = local - Math.max(...offsets)
  let high = local - Math.min(...offsets)
  const before = offsetAt(low, zone)
  while (high - low > 1000) {
    const middle = low + Math.floor((high - low) / 2000) * 1000
    if (offsetAt(middle, zone) === before) low = middle
    else high = middle
  }
  return high
}

/** A day (`YYYY-MM-DD`) from a `date` input: the last instant of it in a zone. */
export function endOfDayIn(day: string, zone: string): number | undefined {
  const start = instantIn(`${day}T23:59`, zone)
  return start === undefined ? undefined : start + 59_999
}

/** An instant as a `datetime-local` value in a zone. */
export function wallClockIn(instant: number, zone: string): string {
  return new Date(wallOf(instant, zone)).toISOString().slice(0, 16)
}

/** What a person reads of an instant in a zone: its day of the month, weekday, date and time. */
export interface WallWords {
  /** Day of the month, 1-31. */
  day: number
  weekday: string
  /** "December 1, 2026", in the reader's locale. */
  date: string
  /** "December 1", in the reader's locale. */
  dayOfYear: string
  /** "09:00 AM", in the reader's locale. */
  time: string
}

export function wallWords(iso: string, zone: string): WallWords {
  const date = new Date(iso)
  const part = (options: Intl.DateTimeFormatOptions) => new Intl.DateTimeFormat(undefined, { timeZone: zone, ...options }).format(date)
  return {
    day: Number(new Intl.DateTimeFormat('en-US', { timeZone: zone, day: 'numeric' }).format(date)),
    weekday: part({ weekday: 'long' }),
    date: part({ dateStyle: 'long' }),
    dayOfYear: part({ month: 'long', day: 'numeric' }),
    time: part({ hour: '2-digit', minute: '2-digit' }),
  }
}

/** A run's moment in the schedule's zone, with the day of the week: "Tue, Dec 1, 2026, 09:00 AM". */
export function formatRun(iso: string, zone: string): string {
  return new Intl.DateTimeFormat(undefined, {
    timeZone: zone,
    weekday: 'short',
    year: 'numeric',
    month: 'short',
    day: 'numeric',
    hour: '2-digit',
    minute: '2-digit',
  }).format(new Date(iso))
}
