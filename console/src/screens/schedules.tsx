import { useEffect, useState } from 'preact/hooks'
import { call, callPage, coffer } from '../api.ts'
import { formatRun } from '../calendar.ts'
import { formatTime } from '../format.ts'
import { useAnyWalletEvents } from '../live.ts'
import { CursorPager, type Cursors } from '../transactions.tsx'
import { describeCalendar, runRefusal, scheduleRecipient, SCHEDULE_STATUS_TEXT as STATUS, SCHEDULE_TEXT as T, LIVE_TEXT } from '../text.ts'
import { Done, Empty, ErrorNotice, FilterBar, Loading, Page, Select, useAction, useConfirm, useLoad, useWide } from '../ui.tsx'
import { Refusal, scheduleAssets, scheduleWhat, StatusBadge, type Schedule } from '../schedule-parts.tsx'
import { ScheduleForm } from './schedule-form.tsx'
import type { ScreenProps } from './user-app.tsx'

/** The wallet's scheduled payments: the form that makes one, the list, filtered by status. */
function ScheduleList({ session, refresh }: ScreenProps) {
  const [status, setStatus] = useState('')
  const [cursors, setCursors] = useState<Cursors>([undefined])
  const before = cursors[cursors.length - 1]
  const wide = useWide()
  useEffect(() => setCursors([undefined]), [status, session.wallet_id])
  const page = useLoad(
    () =>
      callPage(
        coffer.GET('/wallet/schedules', {
          params: {
            query: {
              limit: 20,
              ...(before !== undefined ? { before } : {}),
              ...(status ? { status: status as Schedule['status'] } : {}),
            },
          },
        }),
      ),
    [status, before, session.wallet_id],
  )
  // A run, a refusal or a pause elsewhere shows at once.
  const live = useAnyWalletEvents(session.wallet_id, (event) => {
    if (event.type.startsWith('schedule.')) void page.reload()
  })
  const schedules = page.data?.data ?? []
  return (
    <Page title={T.title}>
      <p>
        {T.intro(session.wallet_address)} <span class="live">{LIVE_TEXT[live]}</span>
      </p>
      <section aria-labelledby="schedule-list">
        <h2 id="schedule-list">{T.listTitle}</h2>
        <FilterBar
          label={T.filters}
          chips={status ? [{ label: T.statusChip(STATUS[status as Schedule['status']]), clear: () => setStatus('') }] : []}
        >
          <Select
            label={T.statusFilter}
            value={status}
            onValue={setStatus}
            options={[['', T.everyStatus], ...(Object.entries(STATUS) as [string, string][])]}
          />
        </FilterBar>
        <ErrorNotice error={page.error} />
        {page.loading && <Loading what={T.loading} />}
        {page.data && schedules.length === 0 && <Empty>{status ? T.noneMatch : T.none}</Empty>}
        {schedules.length > 0 && wide && (
          <table class="schedules-table">
            <caption class="visually-hidden">{T.caption}</caption>
            <thead>
              <tr>
                <th scope="col">{T.column.payment}</th>
                <th scope="col">{T.column.calendar}</th>
                <th scope="col">{T.column.next}</th>
                <th scope="col">{T.column.runs}</th>
                <th scope="col">{T.column.status}</th>
              </tr>
            </thead>
            <tbody>
              {schedules.map((schedule) => (
                <tr key={schedule.id}>
                  <td>
                    <a href={`#/schedules/${schedule.id}`}>{T.open(schedule.id)}</a>
                    <span class="what">{scheduleWhat(schedule)}</span>
                    {schedule.memo && <span class="meta">“{schedule.memo}”</span>}
                  </td>
                  <td>{describeCalendar(schedule)}</td>
                  <td class="when">{schedule.next_run_at ? formatRun(schedule.next_run_at, schedule.time_zone) : T.noNext}</td>
                  <td>{T.runs(schedule.runs, schedule.failures)}</td>
                  <td>
                    <StatusBadge status={schedule.status} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
        {schedules.length > 0 && !wide && (
          <ul class="cards schedules">
            {schedules.map((schedule) => (
              <li key={schedule.id}>
                <p class="what">
                  <a href={`#/schedules/${schedule.id}`}>{T.open(schedule.id)}</a>: {scheduleWhat(schedule)}
                </p>
                <p>{describeCalendar(schedule)}.</p>
                <p class="meta">
                  <StatusBadge status={schedule.status} />
                  <span>{schedule.next_run_at ? T.next(formatRun(schedule.next_run_at, schedule.time_zone)) : T.noNext}</span>
                  <span> · {T.runs(schedule.runs, schedule.failures)}</span>
                </p>
              </li>
            ))}
          </ul>
        )}
        <CursorPager cursors={cursors} setCursors={setCursors} next={page.data?.next} />
      </section>
      <ScheduleForm session={session} refresh={refresh} created={page.reload} />
    </Page>
  )
}

/** One scheduled payment: what and when, its next runs, what its runs did; pause, resume, cancel. */
function ScheduleDetail({ session, id }: ScreenProps & { id: string }) {
  // The schedule and, while it is active, when its next runs fall due: read together, so they agree.
  const schedule = useLoad(async () => {
    const found = await call(coffer.GET('/wallet/schedules/{id}', { params: { path: { id } } }))
    const upcoming =
      found.status === 'active'
        ? (await call(coffer.GET('/wallet/schedules/{id}/upcoming', { params: { path: { id }, query: { count: 5 } } }))).runs
        : []
    return { ...found, upcoming }
  }, [id, session.wallet_id])
  const [cursors, setCursors] = useState<Cursors>([undefined])
  const before = cursors[cursors.length - 1]
  const runs = useLoad(
    () =>
      callPage(
        coffer.GET('/wallet/schedules/{id}/runs', {
          params: { path: { id }, query: { limit: 20, ...(before !== undefined ? { before } : {}) } },
        }),
      ),
    [id, before, schedule.data?.runs],
  )
  const live = useAnyWalletEvents(session.wallet_id, (event) => {
    if (event.type.startsWith('schedule.')) void schedule.reload()
  })
  const { run, pending, error, done, setDone } = useAction()
  const confirm = useConfirm()
  const data = schedule.data

  const act = (action: 'pause' | 'resume') =>
    run(async () => {
      setDone('')
      const path = action === 'pause' ? '/wallet/schedules/{id}/pause' : '/wallet/schedules/{id}/resume'
      const changed = await call(coffer.POST(path, { params: { path: { id } } }))
      await schedule.reload()
      setDone(
        action === 'pause'
          ? T.paused(changed.id)
          : T.resumed(changed.id, changed.next_run_at ? formatRun(changed.next_run_at, changed.time_zone) : T.noNext),
      )
    })

  const cancel = async () => {
    if (!data) return
    const yes = await confirm({ title: T.cancelTitle(data.id), body: <p>{T.cancelBody}</p>, action: T.cancel, tone: 'danger' })
    if (!yes) return
    await run(async () => {
      setDone('')
      await call(coffer.DELETE('/wallet/schedules/{id}', { params: { path: { id } } }))
      await schedule.reload()
      setDone(T.cancelled(data.id))
    })
  }

  return (
    <Page title={T.open(Number(id))}>
      <p>
        <a href="#/schedules">{T.back}</a> <span class="live">{LIVE_TEXT[live]}</span>
      </p>
      <ErrorNotice error={schedule.error} />
      {schedule.loading && <Loading what={T.loadingOne} />}
      {done && <Done>{done}</Done>}
      <ErrorNotice error={error} />
      {data && (
        <>
          <dl class="facts">
            <div>
              <dt>{T.fact.to}</dt>
              <dd>{scheduleRecipient(data.recipient, data.type)}</dd>
            </div>
            <div>
              <dt>{T.fact.amount}</dt>
              <dd>{scheduleAssets(data.assets)}</dd>
            </div>
            <div>
              <dt>{T.fact.memo}</dt>
              <dd>{data.memo ? `“${data.memo}”` : T.noMemo}</dd>
            </div>
            <div>
              <dt>{T.fact.status}</dt>
              <dd>
                <StatusBadge status={data.status} />
              </dd>
            </div>
            <div class="wide-fact">
              <dt>{T.fact.calendar}</dt>
              <dd>{describeCalendar(data)}</dd>
            </div>
            <div>
              <dt>{T.fact.runs}</dt>
              <dd>{T.runs(data.runs, data.failures)}</dd>
            </div>
            <div>
              <dt>{T.fact.created}</dt>
              <dd>{formatTime(data.created_at)}</dd>
            </div>
          </dl>
          {(data.status === 'active' || data.status === 'paused') && (
            <div class="row-actions">
              {data.status === 'active' ? (
                <button type="button" disabled={pending} onClick={() => void act('pause')}>
                  {T.pause}
                </button>
              ) : (
                <button type="button" class="primary" disabled={pending} onClick={() => void act('resume')}>
                  {T.resume}
                </button>
              )}
              <button type="button" class="danger" disabled={pending} onClick={() => void cancel()}>
                {T.cancel}
              </button>
            </div>
          )}
          {data.status === 'paused' && data.last_run?.error && <p>{T.pausedAfterRefusals}</p>}

          <section aria-labelledby="upcoming-runs">
            <h2 id="upcoming-runs">{T.upcoming}</h2>
            {data.upcoming.length === 0 && <Empty>{T.noUpcoming}</Empty>}
            {data.upcoming.length > 0 && (
              <>
                <p class="meta">{T.upcomingCaption(data.time_zone)}</p>
                <ol class="upcoming">
                  {data.upcoming.map((at) => (
                    <li key={at}>
                      <time dateTime={at}>{formatRun(at, data.time_zone)}</time>
                    </li>
                  ))}
                </ol>
              </>
            )}
          </section>

          <section aria-labelledby="run-history">
            <h2 id="run-history">{T.history}</h2>
            <p class="meta">{T.historyIntro}</p>
            {data.failures > 0 && <p>{T.refusedCount(data.failures)}</p>}
            <ErrorNotice error={runs.error} />
            {runs.loading && <Loading what={T.history.toLowerCase()} />}
            {runs.data && runs.data.data.length === 0 && <Empty>{T.noRuns}</Empty>}
            {runs.data && runs.data.data.length > 0 && (
              <ul class="cards runs">
                {runs.data.data.map((run) => (
                  <li key={run.occurrence} class={run.error ? 'refused' : undefined}>
                    {run.error ? (
                      <Refusal when={T.refusedRun(runTime(run))} error={runRefusal(run.error)} />
                    ) : (
                      <p>
                        <time dateTime={run.due_at}>{runTime(run)}</time>
                        {': '}
                        {T.paidRun(scheduleWhat(data), run.transaction_id ?? 0)}
                      </p>
                    )}
                  </li>
                ))}
              </ul>
            )}
            <CursorPager cursors={cursors} setCursors={setCursors} next={runs.data?.next} />
          </section>
        </>
      )}
    </Page>
  )
}

/** When a run fell due, and when it ran if that was later (caught up after the service was down). */
function runTime(run: { due_at: string; ran_at: string }): string {
  const late = Date.parse(run.ran_at) - Date.parse(run.due_at) > 60_000
  return late ? T.ranLate(formatTime(run.due_at), formatTime(run.ran_at)) : formatTime(run.due_at)
}

/** `#/schedules` lists and makes them; `#/schedules/<id>` is one of them. */
export function Schedules(props: ScreenProps & { id?: string }) {
  return props.id ? <ScheduleDetail {...props} id={props.id} /> : <ScheduleList {...props} />
}
