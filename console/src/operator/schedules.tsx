import { call, coffer } from '../api.ts'
import { formatTime } from '../format.ts'
import { describeCalendar, OPERATOR_SCHEDULE_TEXT as T, runRefusal, SCHEDULE_TEXT } from '../text.ts'
import { Empty, ErrorNotice, Loading, Page, useLoad } from '../ui.tsx'
import { Refusal, scheduleWhat, StatusBadge } from '../schedule-parts.tsx'

/** Every schedule that is paused or had a run refused, of any wallet: what it pays, why it stopped. */
export function TroubledSchedules() {
  const list = useLoad(() => call(coffer.GET('/admin/schedules', { params: { query: { limit: 100 } } })), [], ['A003'])
  return (
    <Page title={T.title}>
      <p>{T.intro}</p>
      <ErrorNotice error={list.error} />
      {list.loading && <Loading what={T.loading} />}
      {list.data && list.data.length === 0 && <Empty>{T.none}</Empty>}
      {list.data && list.data.length > 0 && (
        <ul class="cards schedules">
          {list.data.map((schedule) => (
            <li key={schedule.id}>
              <h2 class="card-title">
                <a href={`#/operator/wallets/${schedule.wallet_id}`}>{T.wallet(schedule.wallet_id)}</a>: {scheduleWhat(schedule)}
              </h2>
              <p>{describeCalendar(schedule)}.</p>
              <p class="meta">
                <StatusBadge status={schedule.status} />
                {T.schedule(schedule.id)} · {SCHEDULE_TEXT.runs(schedule.runs, schedule.failures)}
                {schedule.memo && ` · “${schedule.memo}”`}
              </p>
              {schedule.last_run?.error && (
                <Refusal when={T.lastRefused(formatTime(schedule.last_run.at))} error={runRefusal(schedule.last_run.error)} />
              )}
            </li>
          ))}
        </ul>
      )}
    </Page>
  )
}
