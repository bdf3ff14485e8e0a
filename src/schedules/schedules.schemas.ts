import { Type, type Static } from '@sinclair/typebox'
import { ErrorSchema, Id, Timestamp } from '../http/schemas.ts'
import { CursorId, Metadata, SendBody } from '../ledger/ledger.schemas.ts'

const ScheduleStatus = Type.Union([Type.Literal('active'), Type.Literal('paused'), Type.Literal('finished'), Type.Literal('cancelled')])

/** A transfer's body, and when it runs. */
export const ScheduleBody = Type.Object(
  {
    ...SendBody.properties,
    start_at: Type.String({ format: 'date-time', description: 'the first run: now or later, at most 10 years ahead' }),
    every: Type.Optional(
      Type.String({
        maxLength: 16,
        description: 'ISO 8601 duration of whole days, weeks or months, `P1D` to `P1Y` (`P1D`, `P2W`, `P1M`, `P1Y`); absent: it runs once',
      }),
    ),
    count: Type.Optional(Type.Integer({ minimum: 1, maximum: 10_000, description: 'how many runs; not with `end_at`' })),
    end_at: Type.Optional(Type.String({ format: 'date-time', description: 'no run after this time; not with `count`' })),
    time_zone: Type.Optional(
      Type.String({ minLength: 1, maxLength: 64, default: 'UTC', description: 'IANA time zone of the calendar, e.g. `Europe/Paris`' }),
    ),
  },
  { if: SendBody.if, else: SendBody.else },
)
export type ScheduleRequest = Static<typeof ScheduleBody>

const LastRun = Type.Object({
  at: Timestamp,
  transaction_id: Type.Union([Id, Type.Null()]),
  error: Type.Union([ErrorSchema, Type.Null()]),
})

export const Schedule = Type.Object({
  id: Id,
  status: ScheduleStatus,
  wallet_id: Id,
  recipient: Type.Union([Type.String(), Type.Integer()]),
  type: Type.Integer(),
  assets: Type.Record(Type.String(), Type.Integer()),
  memo: Type.Union([Type.String(), Type.Null()]),
  metadata: Type.Union([Metadata, Type.Null()]),
  start_at: Timestamp,
  every: Type.Union([Type.String(), Type.Null()]),
  count: Type.Union([Type.Integer(), Type.Null()]),
  end_at: Type.Union([Timestamp, Type.Null()]),
  time_zone: Type.String(),
  next_run_at: Type.Union([Timestamp, Type.Null()], { description: 'null when paused, finished or cancelled' }),
  runs: Type.Integer({ description: 'occurrences done, whether they moved or were refused' }),
  failures: Type.Integer({ description: 'occurrences refused' }),
  last_run: Type.Union([LastRun, Type.Null()]),
  created_at: Timestamp,
})

export const ScheduleListQuery = Type.Object({
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 10 })),
  before: Type.Optional(CursorId),
  after: Type.Optional(CursorId),
  status: Type.Optional(ScheduleStatus),
})

export const ScheduleRun = Type.Object({
  occurrence: Type.Integer({ minimum: 0, description: 'which occurrence, counted from 0 at `start_at`' }),
  due_at: Timestamp,
  ran_at: Timestamp,
  transaction_id: Type.Union([Id, Type.Null()], { description: 'the transfer it made; null when it was refused' }),
  error: Type.Union([ErrorSchema, Type.Null()], { description: 'why it was refused; null when it moved' }),
})

export const RunsQuery = Type.Object({
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 20 })),
  before: Type.Optional(Type.Integer({ minimum: 0, description: 'runs of occurrences before this one (the next page)' })),
})

export const NextRunsQuery = Type.Object({
  count: Type.Optional(Type.Integer({ minimum: 1, maximum: 50, default: 5 })),
})
