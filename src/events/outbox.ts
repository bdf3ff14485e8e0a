import crypto from 'node:crypto'
import { sql } from 'kysely'
import type { Executor } from '../db/database.ts'
import { isPostgres, rowsWrite, type Write } from '../db/dialect.ts'
import { MINT_WALLET_ID, type EventWriter, type Hold, type HoldEventType, type Transaction } from '../ledger/ledger.types.ts'

export type EventType = 'transaction.sent' | 'transaction.received' | HoldEventType

/**
 * `evt_` and 32 hex digits: the time in milliseconds (12 digits), then 80 random bits. Ids that
 * grow with time are appended at the end of the unique index instead of landing on a random
 * page of it, so a batch of events dirties (and logs) a few index pages rather than one each.
 */
function newEventId(): string {
  if (randomOffset + RANDOM_BYTES > randomPool.length) {
    crypto.randomFillSync(randomPool)
    randomOffset = 0
  }
  const random = randomPool.toString('hex', randomOffset, (randomOffset += RANDOM_BYTES))
  return `evt_${Date.now().toString(16).padStart(12, '0')}${random}`
}

/**
 * The random part of event ids (80 bits, 20 hex digits), drawn from a pool refilled 4 KB at a time:
 * one call into the random generator per 409 events instead of a UUID formatted and cut per event
 * (1.5-5 % of the write batch's CPU in profiles of it; `docs/performance.md`).
 */
const RANDOM_BYTES = 10
const randomPool = Buffer.alloc(4096)
let randomOffset = randomPool.length

/** The wallets that get an event for a transfer between these two: both sides, never mint. */
function eventWallets(from: number, to: number): { walletId: number; type: EventType }[] {
  const sides: { walletId: number; type: EventType }[] = []
  if (from !== MINT_WALLET_ID) sides.push({ walletId: from, type: 'transaction.sent' })
  if (to !== MINT_WALLET_ID) sides.push({ walletId: to, type: 'transaction.received' })
  return sides
}

/**
 * An event's payload as sent on the stream and to webhooks: `{ type, id, created_at, data }` with
 * the transaction's stored body as `data` (a hold's event: the Hold stored on the event's row), the text `JSON.stringify` gives for that object. Stored
 * events hold only the fields around it (migration 0004): both events of a transfer carry the
 * same transaction, which is stored once, on its row. (Every transaction written by the ledger
 * has a body; only the bench's directly inserted history has none, and no events.)
 */
export function eventPayload(event: { type: string; event_id: string; created_at: string; body: string | null }): string {
  return `{"type":${JSON.stringify(event.type)},"id":${JSON.stringify(event.event_id)},"created_at":${JSON.stringify(event.created_at)},"data":${event.body}}`
}

/**
 * Transactional outbox: the writes of `transaction.sent` for the sender and
 * `transaction.received` for the receiver (never for mint), to run with the transfer, and of a
 * webhook delivery for each event whose wallet has a webhook. A rolled-back transfer therefore
 * emits nothing and a committed one never loses its events. Called by the ledger
 * (`ledger/moves.repository.ts`, through `outbox` below) with the transactions of a batch and one
 * reserved sequence id per event (in the order of `eventWallets`), holding its wallets' turns:
 * the webhooks are read by the delivery insert itself, so a webhook set just before (whose turn
 * the batch waited for) gets its deliveries. The events' data is the transaction's body, which
 * the ledger writes on the transaction's row.
 */
function transactionEventWrites(executor: Executor, transactions: Transaction[], ids: number[]): Write[] {
  const events: unknown[][] = []
  for (const transaction of transactions) {
    for (const { walletId, type } of eventWallets(transaction.sending_wallet_id, transaction.receiving_wallet_id)) {
      events.push([ids[events.length], newEventId(), walletId, type, transaction.id, transaction.created_at])
    }
  }
  return eventRowWrites(executor, EVENT_COLUMNS, events)
}

/**
 * The two writes of a set of events: the event rows (with `columns`, `id`, `wallet_id` and
 * `created_at` among them), and a pending delivery for each whose wallet has a webhook.
 */
function eventRowWrites(executor: Executor, columns: typeof EVENT_COLUMNS | typeof HOLD_EVENT_COLUMNS, events: unknown[][]): Write[] {
  if (events.length === 0) return []
  const names = sql.raw(columns.map(([name]) => name).join(', '))
  const insert = rowsWrite(
    executor,
    columns,
    events,
    (r) => sql`
      insert into events (${names})
      select ${names} from ${r}`,
  )
  if (isPostgres(executor)) {
    return [
      insert,
      rowsWrite(
        executor,
        columns,
        events,
        (r) => sql`
        insert into webhook_deliveries (event_id, wallet_id, url, status, attempts, next_attempt_at, created_at, updated_at)
        select r.id, r.wallet_id, webhooks.url, 'pending', 0, r.created_at, r.created_at, r.created_at
        from ${r} join webhooks on webhooks.wallet_id = r.wallet_id`,
      ),
    ]
  }
  // SQLite runs a batch's writes one after the other (`runWrites`), so the events are in their
  // table by now: one statement reads them back by id, instead of one run per event, each probing
  // `webhooks` for its wallet (two runs per transfer). Their ids are consecutive and the batch's own
  // (after the largest ever used: `moves.repository.ts` reserveIds), so the range holds only them.
  // Measured in process, batches of 20 transfers alternating with the run per event: 3.5-4 µs
  // less statement time per transfer (docs/performance.md#the-write-path).
  const ids = events.map((event) => event[0] as number)
  return [
    insert,
    {
      statement: sql`
        insert into webhook_deliveries (event_id, wallet_id, url, status, attempts, next_attempt_at, created_at, updated_at)
        select events.id, events.wallet_id, webhooks.url, 'pending', 0, events.created_at, events.created_at, events.created_at
        from events join webhooks on webhooks.wallet_id = events.wallet_id
        where events.id between ${Math.min(...ids)} and ${Math.max(...ids)}`,
    },
  ]
}

const EVENT_COLUMNS = [
  ['id', 'bigint'],
  ['event_id', 'text'],
  ['wallet_id', 'bigint'],
  ['type', 'text'],
  ['transaction_id', 'bigint'],
  ['created_at', 'text'],
] as const

/** Both sides of a hold (never mint, which holds nothing for anyone). */
function holdWallets(hold: Pick<Hold, 'sending_wallet_id' | 'receiving_wallet_id'>): number[] {
  return [hold.sending_wallet_id, hold.receiving_wallet_id].filter((walletId) => walletId !== MINT_WALLET_ID)
}

/**
 * The writes of `hold.created`, `hold.captured`, `hold.voided` or `hold.expired` to both sides of
 * each hold, with webhook deliveries as for transactions. The data of a hold's event is the Hold
 * as it is after that event, stored on the event's row (a hold changes; its events do not). The
 * event's time is when it happened: the hold's creation, or its settlement (for an expiry, the
 * expiry time, whenever the expiry was written).
 */
function holdEventWrites(executor: Executor, holdEvents: { type: HoldEventType; hold: Hold }[], ids: number[]): Write[] {
  const events: unknown[][] = []
  for (const { type, hold } of holdEvents) {
    const body = JSON.stringify(hold)
    const at = type === 'hold.created' ? hold.created_at : (hold.settled_at ?? hold.created_at)
    for (const walletId of holdWallets(hold)) events.push([ids[events.length], newEventId(), walletId, type, at, body])
  }
  return eventRowWrites(executor, HOLD_EVENT_COLUMNS, events)
}

const HOLD_EVENT_COLUMNS = [
  ['id', 'bigint'],
  ['event_id', 'text'],
  ['wallet_id', 'bigint'],
  ['type', 'text'],
  ['created_at', 'text'],
  ['body', 'text'],
] as const

/** The event writer `buildApp` (and the CLI) hand to the ledger (`ledger/ledger.types.ts` EventWriter). */
export const outbox: EventWriter = {
  countEvents: (from, to) => eventWallets(from, to).length,
  eventWrites: transactionEventWrites,
  countHoldEvents: (hold) => holdWallets(hold).length,
  holdEventWrites,
}
