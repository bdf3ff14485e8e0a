import { Type } from '@sinclair/typebox'
import { Id, Timestamp } from '../http/schemas.ts'

/** Shapes of the webhook routes and the event stream. */

export const WebhookBody = Type.Object({
  webhook: Type.String({
    description: 'absolute http or https URL, at most 512 characters, reaching a public address (else W010)',
    examples: ['https://example.com/coffer/events'],
  }),
})

export const WebhookCreated = Type.Object({
  webhook: Type.String(),
  secret: Type.String({ description: 'Standard Webhooks signing secret (`whsec_` + base64); shown only here' }),
})

const Backlog = Type.Object(
  {
    pending: Type.Integer({ minimum: 0, description: 'deliveries waiting for their first attempt or a retry' }),
    oldest_pending_at: Type.Union([Timestamp, Type.Null()], {
      description: 'when the oldest pending delivery was queued; null when none is',
    }),
    oldest_pending_age_seconds: Type.Number({ minimum: 0, description: 'how long ago that was; 0 when nothing is pending' }),
  },
  { description: "the webhook's backlog, as the service sees it now" },
)

export const WebhookInfo = Type.Object({
  webhook: Type.Union([Type.String(), Type.Null()], { description: 'null when no webhook is set' }),
  created_at: Type.Optional(Timestamp),
  backlog: Type.Optional(Backlog),
})

const DeliveryStatus = Type.Union([Type.Literal('pending'), Type.Literal('delivered'), Type.Literal('failed'), Type.Literal('cancelled')])

const Attempt = Type.Object({
  attempted_at: Timestamp,
  status_code: Type.Union([Type.Integer(), Type.Null()], { description: 'HTTP status of the answer; null when none came' }),
  latency_ms: Type.Integer({ description: 'time until the answer (or the failure)' }),
  error: Type.Union([Type.String(), Type.Null()], { description: 'why the attempt failed; null when delivered' }),
})

export const Delivery = Type.Object(
  {
    id: Id,
    event_id: Type.String({ description: 'the event id (`evt_…`), sent as `webhook-id` on every attempt' }),
    type: Type.String({ examples: ['transaction.received'] }),
    url: Type.String({ description: 'the webhook the last attempt went to (or the next one will)' }),
    status: DeliveryStatus,
    attempts: Type.Integer({ minimum: 0 }),
    next_attempt_at: Type.Union([Timestamp, Type.Null()], { description: 'when the next attempt is due, while pending' }),
    last_status_code: Type.Union([Type.Integer(), Type.Null()]),
    last_error: Type.Union([Type.String(), Type.Null()]),
    created_at: Timestamp,
    updated_at: Timestamp,
    attempt_log: Type.Array(Attempt, { description: 'attempts, oldest first (the latest 50)' }),
  },
  { description: 'one event queued for the wallet webhook, with every attempt to deliver it' },
)

export const DeliveryQuery = Type.Object({
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 20 })),
  offset: Type.Optional(Type.Integer({ minimum: 0, maximum: 10_000, default: 0 })),
  status: Type.Optional(DeliveryStatus),
})

export const StreamHeaders = Type.Object({
  'last-event-id': Type.Optional(Type.String({ pattern: '^(0|[1-9][0-9]{0,15})$', description: 'resume after this event id' })),
})

export const StreamQuery = Type.Object({
  last_event_id: Type.Optional(
    Type.Integer({
      minimum: 0,
      maximum: Number.MAX_SAFE_INTEGER,
      description: 'same as the Last-Event-ID header, for clients that cannot set it',
    }),
  ),
})
