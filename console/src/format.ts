/** Numbers and times in the reader's locale. */

const integer = new Intl.NumberFormat(undefined, { maximumFractionDigits: 0 })
const decimal = new Intl.NumberFormat(undefined, { maximumFractionDigits: 6 })
const dateTime = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' })

export function formatQuantity(quantity: number): string {
  return integer.format(quantity)
}

export function formatValue(value: number): string {
  return decimal.format(value)
}

const fullDateTime = new Intl.DateTimeFormat(undefined, { dateStyle: 'long', timeStyle: 'medium' })

/** A moment to the second, for a detail view. */
export function formatFullTime(iso: string): string {
  return fullDateTime.format(new Date(iso))
}

export function formatTime(iso: string | null | undefined): string {
  return iso ? dateTime.format(new Date(iso)) : '—'
}

/** "5 gold, 2 silver" */
export function formatAssets(assets: { quantity: number; asset: { name: string } }[]): string {
  return assets.map((line) => `${formatQuantity(line.quantity)} ${line.asset.name}`).join(', ')
}

/** An `<input type="date">` value as the start (or end) of that day in the reader's time zone, as ISO. */
export function dayBound(value: string, end: boolean): string | undefined {
  if (!value) return undefined
  const [year, month, day] = value.split('-').map(Number)
  const date = end ? new Date(year, month - 1, day, 23, 59, 59, 999) : new Date(year, month - 1, day)
  return Number.isNaN(date.getTime()) ? undefined : date.toISOString()
}

/** The service's own detail of a refusal, its numbers grouped as everywhere else: "holds 975 of gold, 1,000,000 requested" (not the digits in a name like gold2024). */
export function formatDetail(detail: string): string {
  return detail.replace(/\b\d{4,}\b/g, (digits) => (Number.isSafeInteger(Number(digits)) ? formatQuantity(Number(digits)) : digits))
}

const day = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium' })
const dayOfYear = new Intl.DateTimeFormat(undefined, { day: 'numeric', month: 'long' })

/** An instant as the day a person reads: "3 March", with the year when it is not this year's. */
export function formatExpiryDay(iso: string): string {
  const date = new Date(iso)
  return date.getFullYear() === new Date().getFullYear() ? dayOfYear.format(date) : day.format(date)
}

/** An `<input type="date">` value as the reader writes a day. */
export function formatDay(value: string): string {
  const start = dayBound(value, false)
  return start ? day.format(new Date(start)) : value
}
