/**
 * Calendar arithmetic of schedules, in the schedule's IANA time zone, with the platform's `Intl`
 * (the time zone database Node ships with ICU): occurrence n is `start_at`'s wall-clock date and
 * time plus n × `every`, turned back into an instant. A month-end date that a shorter month lacks
 * becomes that month's last day; a wall time a daylight-saving gap skips becomes the first instant
 * after the gap; a wall time a repeat shows twice becomes the earlier instant.
 */

/** A whole number of days or of months (weeks are 7 days, a year 12 months). */
export interface Every {
  unit: 'day' | 'month'
  count: number
}

const EVERY = /^P(?:([1-9]\d{0,2})D|([1-9]\d?)W|([1-9]\d?)M|(1)Y)$/
/** The longest `every`: a year (`P1Y`, `P12M`, `P52W`, `P366D`). */
const MOST = { day: 366, week: 52, month: 12 } as const

/** `every` as a duration of whole days, weeks or months from P1D to P1Y; undefined when it is not one. */
export function parseEvery(text: string): Every | undefined {
  const match = EVERY.exec(text)
  if (!match) return undefined
  const [, days, weeks, months, years] = match
  if (days !== undefined) return Number(days) <= MOST.day ? { unit: 'day', count: Number(days) } : undefined
  if (weeks !== undefined) return Number(weeks) <= MOST.week ? { unit: 'day', count: 7 * Number(weeks) } : undefined
  if (months !== undefined) return Number(months) <= MOST.month ? { unit: 'month', count: Number(months) } : undefined
  return years === '1' ? { unit: 'month', count: 12 } : undefined
}

/** A zone's formatter, made once per zone by the `Calendars` that owns it. */
type FormatterOf = (zone: string) => Intl.DateTimeFormat

function newFormatter(zone: string): Intl.DateTimeFormat {
  return new Intl.DateTimeFormat('en-US', {
    timeZone: zone,
    hourCycle: 'h23',
    year: 'numeric',
    month: 'numeric',
    day: 'numeric',
    hour: 'numeric',
    minute: 'numeric',
    second: 'numeric',
    era: 'short',
  })
}

const ZONE_NAME = /^(?:UTC|[A-Za-z][A-Za-z0-9_+-]*(?:\/[A-Za-z0-9_+-]+)+|[A-Za-z]{2,6})$/

function isTimeZone(formatterOf: FormatterOf, name: string): boolean {
  if (!ZONE_NAME.test(name)) return false
  try {
    formatterOf(name)
    return true
  } catch {
    return false
  }
}

/** A wall-clock date and time: month 1-12. */
export interface WallTime {
  year: number
  month: number
  day: number
  hour: number
  minute: number
  second: number
  millisecond: number
}

/** The wall-clock time of an instant (milliseconds since the epoch) in a zone. */
function wallTimeOf(formatterOf: FormatterOf, instant: number, zone: string): WallTime {
  const parts: Record<string, string> = {}
  for (const part of formatterOf(zone).formatToParts(new Date(instant))) parts[part.type] = part.value
  const year = Number(parts.year)
  return {
    year: parts.era === 'BC' ? 1 - year : year,
    month: Number(parts.month),
    day: Number(parts.day),
    hour: Number(parts.hour),
    minute: Number(parts.minute),
    second: Number(parts.second),
    millisecond: ((instant % 1000) + 1000) % 1000,
  }
}

function asUtc(wall: WallTime): number {
  const date = new Date(0)
  date.setUTCFullYear(wall.year, wall.month - 1, wall.day)
  date.setUTCHours(wall.hour, wall.minute, wall.second, wall.millisecond)
  return date.getTime()
}

/** How far the zone's wall clock is ahead of UTC at an instant, in milliseconds. */
function offsetAt(formatterOf: FormatterOf, instant: number, zone: string): number {
  return asUtc(wallTimeOf(formatterOf, instant, zone)) - instant
}

const DAY = 86_400_000

/**
 * The instant a wall-clock time names in a zone: the earlier of two in a repeated hour, the first
 * instant after the gap for a time a gap skips.
 */
function instantOf(formatterOf: FormatterOf, wall: WallTime, zone: string): number {
  const offset = (instant: number) => offsetAt(formatterOf, instant, zone)
  const local = asUtc(wall)
  // Offsets in force around the time: a change of offset is never closer than a day to another.
  const offsets = [...new Set([offset(local - DAY), offset(local), offset(local + DAY)])]
  const valid = offsets.map((ahead) => local - ahead).filter((instant) => offset(instant) === local - instant)
  if (valid.length > 0) return Math.min(...valid)
  // In a gap: the change of offset lies between the two readings; find its instant.
  let low = local - Math.max(...offsets)
  let high = local - Math.min(...offsets)
  const before = offset(low)
  while (high - low > 1) {
    const middle = Math.floor((low + high) / 2)
    if (offset(middle) === before) low = middle
    else high = middle
  }
  return high
}

function daysInMonth(year: number, month: number): number {
  return new Date(Date.UTC(year, month, 0)).getUTCDate()
}

/** The wall-clock time `n` steps of `every` after `start`, a month-end falling back to a shorter month's last day. */
function addSteps(start: WallTime, every: Every, n: number): WallTime {
  if (every.unit === 'day') {
    const exact = new Date(0)
    exact.setUTCFullYear(start.year, start.month - 1, start.day + every.count * n)
    return { ...start, year: exact.getUTCFullYear(), month: exact.getUTCMonth() + 1, day: exact.getUTCDate() }
  }
  const months = start.month - 1 + every.count * n
  const year = start.year + Math.floor(months / 12)
  const month = (months % 12) + 1
  return { ...start, year, month, day: Math.min(start.day, daysInMonth(year, month)) }
}

/** The calendar of a schedule, as stored. */
export interface Calendar {
  startAt: string
  every: string | null
  count: number | null
  endAt: string | null
  timeZone: string
}

function occurrenceAt(formatterOf: FormatterOf, calendar: Calendar, n: number): number | undefined {
  if (calendar.count !== null && n >= calendar.count) return undefined
  const start = Date.parse(calendar.startAt)
  let instant: number
  if (n === 0) instant = start
  else {
    const every = calendar.every === null ? undefined : parseEvery(calendar.every)
    if (!every) return undefined
    const wall = addSteps(wallTimeOf(formatterOf, start, calendar.timeZone), every, n)
    instant = instantOf(formatterOf, wall, calendar.timeZone)
  }
  if (calendar.endAt !== null && instant > Date.parse(calendar.endAt)) return undefined
  return instant
}

/** Calendar arithmetic in the schedules' time zones, with a formatter per zone made once and kept. */
export interface Calendars {
  /** True for a time zone name the time zone database knows (`Europe/Paris`, `UTC`); never a bare offset. */
  isTimeZone(name: string): boolean
  /**
   * The instant of occurrence `n` (from 0), or undefined when the schedule has no such occurrence
   * (a one-off after the first, past `count`, or after `end_at`).
   */
  occurrenceAt(calendar: Calendar, n: number): number | undefined
  /**
   * The first occurrence at or after `from` (milliseconds), beginning the search at occurrence
   * `n`: its index and instant, or undefined when none is left.
   */
  firstOccurrenceFrom(calendar: Calendar, n: number, from: number): { n: number; at: number } | undefined
}

/** Making a zone's formatter costs far more than using it, so each `Calendars` keeps those it made. */
export function createCalendars(): Calendars {
  const formatters = new Map<string, Intl.DateTimeFormat>()
  const formatterOf: FormatterOf = (zone) => {
    let formatter = formatters.get(zone)
    if (!formatter) formatters.set(zone, (formatter = newFormatter(zone)))
    return formatter
  }
  return {
    isTimeZone: (name) => isTimeZone(formatterOf, name),
    occurrenceAt: (calendar, n) => occurrenceAt(formatterOf, calendar, n),
    firstOccurrenceFrom(calendar, n, from) {
      for (let k = n; ; k++) {
        const at = occurrenceAt(formatterOf, calendar, k)
        if (at === undefined) return undefined
        if (at >= from) return { n: k, at }
      }
    },
  }
}
