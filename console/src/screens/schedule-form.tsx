import { useEffect, useMemo, useState } from 'preact/hooks'
import { call, coffer, type paths } from '../api.ts'
import { holdingChoice } from '../credit.tsx'
import { endOfDayIn, everyOf, instantIn, localZone, MOST_EVERY, wallClockIn, zoneNames, type Every } from '../calendar.ts'
import { describeCalendar, SCHEDULE_TEXT as T } from '../text.ts'
import { Done, Empty, ErrorNotice, Field, Select, useAction, useLoad } from '../ui.tsx'
import { check, checkAddress, checkUsername, parseId, parseQuantity } from '../validate.ts'
import type { ScreenProps } from './user-app.tsx'
import { scheduleWhat, type Schedule } from '../schedule-parts.tsx'

type ScheduleBody = paths['/wallet/schedules']['post']['requestBody']['content']['application/json']

/** How far ahead the first payment may be: the service's ten years. */
const MAX_YEARS = 10
/** How far in the past a first payment may be and still mean "now" (the service allows a minute). */
const NOW_TOLERANCE_MS = 55_000

/** The next whole hour, in a zone, as a `datetime-local` value: a sensible first payment to start from. */
function nextHour(zone: string): string {
  const hour = 3_600_000
  return wallClockIn(Math.ceil((Date.now() + 60_000) / hour) * hour, zone)
}

/** The calendar the fields describe, or the reason it is none; `now` is when it is checked. */
function calendarOf(
  fields: { first: string; zone: string; repeats: string; interval: string; ends: string; count: string; endDate: string },
  now: number,
): Pick<ScheduleBody, 'start_at' | 'every' | 'count' | 'end_at' | 'time_zone'> {
  check(fields.first !== '', T.needFirst)
  const start = instantIn(fields.first, fields.zone)
  check(start !== undefined, T.needFirst)
  check(start! >= now - NOW_TOLERANCE_MS, T.firstPast)
  const latest = new Date(now)
  latest.setFullYear(latest.getFullYear() + MAX_YEARS)
  check(start! <= latest.getTime(), T.firstTooFar)
  const body: Pick<ScheduleBody, 'start_at' | 'every' | 'count' | 'end_at' | 'time_zone'> = {
    start_at: new Date(Math.max(start!, now)).toISOString(),
    time_zone: fields.zone,
  }
  if (fields.repeats === 'once') return body
  const unit = fields.repeats as Every['unit']
  const most = MOST_EVERY[unit]
  const interval = unit === 'year' ? 1 : Number(fields.interval.trim())
  check(Number.isInteger(interval) && interval >= 1 && interval <= most, T.badInterval(most))
  body.every = everyOf(unit, interval)
  if (fields.ends === 'count') {
    const count = Number(fields.count.replace(/\s/g, ''))
    check(/^\d+$/.test(fields.count.replace(/\s/g, '')) && count >= 1 && count <= 10_000, T.badCount)
    body.count = count
  } else if (fields.ends === 'date') {
    check(fields.endDate !== '', T.needEndDate)
    const end = endOfDayIn(fields.endDate, fields.zone)
    check(end !== undefined, T.needEndDate)
    check(end! >= start!, T.endBeforeFirst)
    body.end_at = new Date(end!).toISOString()
  }
  return body
}

/** The sentence of a calendar for the preview; empty while the fields describe none. */
function previewOf(calendar: () => Pick<ScheduleBody, 'start_at' | 'every' | 'count' | 'end_at' | 'time_zone'>): string {
  try {
    const body = calendar()
    return describeCalendar({
      start_at: body.start_at,
      every: body.every ?? null,
      count: body.count ?? null,
      end_at: body.end_at ?? null,
      time_zone: body.time_zone ?? 'UTC',
    })
  } catch {
    return ''
  }
}

/** Schedules a payment: who, what, and a calendar a person reads back in a sentence before saving it. */
export function ScheduleForm({ session, created }: ScreenProps & { created: () => Promise<unknown> }) {
  const holdings = useLoad(() => call(coffer.GET('/wallet/assets')), [session.wallet_id])
  const zones = useMemo(zoneNames, [])
  const [kind, setKind] = useState('0')
  const [recipient, setRecipient] = useState('')
  const [asset, setAsset] = useState('')
  const [quantity, setQuantity] = useState('')
  const [memo, setMemo] = useState('')
  const [repeats, setRepeats] = useState('month')
  const [interval, setEveryCount] = useState('1')
  const [zone, setZone] = useState(localZone)
  const [first, setFirst] = useState(() => nextHour(localZone()))
  const [ends, setEnds] = useState('never')
  const [count, setCount] = useState('12')
  const [endDate, setEndDate] = useState('')
  const [made, setMade] = useState<Schedule | undefined>()
  const { run, pending, error } = useAction()
  const fields = { first, zone, repeats, interval, ends, count, endDate }
  const preview = previewOf(() => calendarOf(fields, Date.now() - NOW_TOLERANCE_MS))
  const options: [string, string][] = (holdings.data ?? []).map((holding) => [holding.asset.name, holdingChoice(holding)])
  useEffect(() => {
    if (!asset && options[0]) setAsset(options[0][0])
  }, [holdings.data])

  const submit = (event: Event) => {
    event.preventDefault()
    void run(async () => {
      setMade(undefined)
      const to = recipient.trim()
      check(to !== '', T.needRecipient)
      const target = kind === '0' ? checkUsername(to) : kind === '1' ? checkAddress(to) : String(parseId(to))
      check(asset !== '', T.needAsset)
      const amount = parseQuantity(quantity, T.quantityOf(asset))
      check(memo.length <= 64, T.memoTooLong)
      const calendar = calendarOf(fields, Date.now())
      const schedule = await call(
        coffer.POST('/wallet/schedules', {
          body: {
            recipient: kind === '2' ? Number(target) : target,
            type: Number(kind) as 0 | 1 | 2,
            assets: { [asset]: amount },
            ...(memo ? { memo } : {}),
            ...calendar,
          },
        }),
      )
      setMade(schedule)
      setRecipient('')
      setQuantity('')
      setMemo('')
      await created()
    })
  }

  const unitWord = repeats as Every['unit']
  return (
    <section aria-labelledby="new-schedule">
      <h2 id="new-schedule">{T.newTitle}</h2>
      {made && (
        <Done>
          {T.created(made.id, scheduleWhat(made), describeCalendar(made))} <a href={`#/schedules/${made.id}`}>{T.open(made.id)}</a>
        </Done>
      )}
      <ErrorNotice error={holdings.error} />
      {holdings.data && holdings.data.length === 0 && <Empty>{T.nothingToPay}</Empty>}
      {holdings.data && holdings.data.length > 0 && (
        <form class="schedule-form" onSubmit={submit} noValidate>
          <fieldset>
            <legend>{T.recipient}</legend>
            <Select label={T.payTo} value={kind} onValue={setKind} options={T.kinds} />
            <Field
              label={T.kinds.find(([key]) => key === kind)?.[1] ?? T.recipient}
              value={recipient}
              onValue={setRecipient}
              autoComplete="off"
              hint={T.recipientHint(kind)}
              inputMode={kind === '2' ? 'numeric' : undefined}
            />
          </fieldset>
          <fieldset>
            <legend>{T.whatToPay}</legend>
            <div class="line">
              <Select label={T.asset} value={asset} onValue={setAsset} options={options} />
              <Field
                label={T.quantity}
                value={quantity}
                onValue={setQuantity}
                inputMode="numeric"
                autoComplete="off"
                hint={T.quantityHint}
              />
            </div>
            <Field label={T.memo} value={memo} onValue={setMemo} maxLength={64} autoComplete="off" hint={T.memoHint} />
          </fieldset>
          <fieldset>
            <legend>{T.when}</legend>
            <div class="line">
              <Select label={T.repeats} value={repeats} onValue={setRepeats} options={T.repeatOptions} />
              {repeats !== 'once' && repeats !== 'year' && (
                <Field
                  label={T.interval(repeats)}
                  value={interval}
                  onValue={setEveryCount}
                  inputMode="numeric"
                  autoComplete="off"
                  hint={T.intervalHint(repeats, MOST_EVERY[unitWord])}
                />
              )}
            </div>
            <Field label={T.first} type="datetime-local" value={first} onValue={setFirst} hint={T.firstHint} />
            <Select label={T.timeZone} value={zone} onValue={setZone} options={zones.map((name) => [name, name])} hint={T.timeZoneHint} />
            {repeats !== 'once' && (
              <>
                <Select label={T.ends} value={ends} onValue={setEnds} options={T.endOptions} />
                {ends === 'count' && (
                  <Field label={T.count} value={count} onValue={setCount} inputMode="numeric" autoComplete="off" hint={T.countHint} />
                )}
                {ends === 'date' && <Field label={T.endDate} type="date" value={endDate} onValue={setEndDate} hint={T.endDateHint} />}
              </>
            )}
            <p class="preview" aria-live="polite">
              {preview && (
                <>
                  <strong>{T.preview}:</strong> {preview}.
                </>
              )}
            </p>
          </fieldset>
          <ErrorNotice error={error} />
          <button type="submit" class="primary" disabled={pending}>
            {pending ? T.creating : T.create}
          </button>
        </form>
      )}
    </section>
  )
}
