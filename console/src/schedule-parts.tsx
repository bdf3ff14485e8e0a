import type { paths } from './api.ts'
import { formatDetail, formatQuantity } from './format.ts'
import { scheduleRecipient, SCHEDULE_STATUS_TEXT, SCHEDULE_TEXT, type ShownError } from './text.ts'
import './automation.css'

/** What the holder's and the operator's schedule screens both show of a schedule. */

export type Schedule = paths['/wallet/schedules/{id}']['get']['responses']['200']['content']['application/json']

/** "10 gold, 2 silver" of a schedule's `assets` (names to quantities). */
export function scheduleAssets(assets: Record<string, number>): string {
  return Object.entries(assets)
    .map(([name, quantity]) => `${formatQuantity(quantity)} ${name}`)
    .join(', ')
}

/** "10 gold to bob" */
export function scheduleWhat(schedule: Pick<Schedule, 'assets' | 'recipient' | 'type'>): string {
  return SCHEDULE_TEXT.what(scheduleAssets(schedule.assets), scheduleRecipient(schedule.recipient, schedule.type))
}

export function StatusBadge({ status }: { status: Schedule['status'] }) {
  return <span class={`badge schedule-${status}`}>{SCHEDULE_STATUS_TEXT[status]}</span>
}

/** A refused run as the console says every refusal: when, the sentence, then the service's detail. */
export function Refusal({ when, error }: { when: string; error: ShownError }) {
  return (
    <div class="refusal">
      <p>
        {when} <strong>{error.text}</strong>
      </p>
      {error.detail && <p class="meta">{formatDetail(error.detail)}</p>}
    </div>
  )
}
