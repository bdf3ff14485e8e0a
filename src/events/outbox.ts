import crypto from 'node:crypto'
import { sql, type RawBuilder } from 'kysely'
import type { Executor } from '../db/database.ts'
import { insertRows, isPostgres, rowsWrite, runWrites, type Write } from '../db/dialect.ts'
import { drawTransactionIds } from '../db/ids.ts'
import {
  MINT_WALLET_ID,
  type EventWriter,
  type Hold,
  type HoldEventType,
  type Transaction,
  type WalletEvent,
} from '../ledger/ledger.types.ts'
import { RECEIVED, SENT, type Side } from './derived-events.ts'

/** The head of every statement that queues deliveries, followed by a select of those columns. */
const INSERT_DELIVERIES = sql`insert into webhook_deliveries
  (event_id, wallet_id, url, status, attempts, next_attempt_at, created_at, updated_at)`

/** The random part of an event id: 80 bits, 20 hex digits. */
const RANDOM_BYTES = 10

/** Random bytes drawn at once, as hex, for the ids' random parts. */
const POOL_BYTES = 4096

/**
 * `evt_`, the time in ms, 80 random bits: ids growing with time dirty few index pages. The pool is
 * turned into hex once and the time's digits once a millisecond, not per id: a batch makes hundreds.
 */
function eventIdMaker(): () => string {
  let pool = ''
  let offset = 0
  let ms = -1
  let head = ''
  return () => {
    if (offset + 2 * RANDOM_BYTES > pool.length) {
      pool = crypto.randomBytes(POOL_BYTES).toString('hex')
      offset = 0
    }
    const now = Date.now()
    if (now !== ms) {
      ms = now
      head = `evt_${now.toString(16).padStart(12, '0')}`
    }
    return head + pool.slice(offset, (offset += 2 * RANDOM_BYTES))
  }
}

/** `{ type, id, created_at, data }` as sent on the stream and to webhooks, the same bytes on every attempt. */
export function eventPayload(event: { type: string; event_id: string; created_at: string; body: string | null }): string {
  const head = `{"type":${JSON.stringify(event.type)},"id":${JSON.stringify(event.event_id)}`
  return `${head},"created_at":${JSON.stringify(event.created_at)},"data":${event.body}}`
}

/**
 * The outbox of transactions: their events are derived from their rows (`derived-events.ts`), so
 * only a delivery is written, for each side whose wallet has a webhook (never mint's), with the
 * transfer, so a rolled-back transfer emits nothing.
 */
function transactionEventWrites(executor: Executor, transactions: Transaction[]): Write[] {
  if (transactions.length === 0) return []
  const deliveries = (sides: RawBuilder<unknown>) => sql`
    ${INSERT_DELIVERIES}
    select 2 * r.id + sides.side, webhooks.wallet_id, webhooks.url, 'pending', 0, r.created_at, r.created_at, r.created_at
    from ${sides} join webhooks on webhooks.wallet_id =
      case sides.side when ${sql.lit(SENT)} then r.sending_wallet_id else r.receiving_wallet_id end
    where webhooks.wallet_id <> ${sql.lit(MINT_WALLET_ID)}`
  const rows = transactions.map((t) => [t.id, t.sending_wallet_id, t.receiving_wallet_id, t.created_at])
  const both = sql`(select ${sql.lit(SENT)} as side union all select ${sql.lit(RECEIVED)}) as sides`
  if (isPostgres(executor)) return [rowsWrite(executor, TRANSACTION_COLUMNS, rows, (r) => deliveries(sql`${r} cross join ${both}`))]
  // SQLite has written the transactions by now; their ids are the batch's own, read back at once.
  const ids = transactions.map((t) => t.id)
  return [
    {
      statement: deliveries(
        sql`(select id, sending_wallet_id, receiving_wallet_id, created_at from transactions
          where id between ${Math.min(...ids)} and ${Math.max(...ids)}) as r cross join ${both}`,
      ),
    },
  ]
}

const TRANSACTION_COLUMNS = [
  ['id', 'bigint'],
  ['sending_wallet_id', 'bigint'],
  ['receiving_wallet_id', 'bigint'],
  ['created_at', 'text'],
] as const

/** The event rows, and a pending delivery for each whose wallet has a webhook. */
function eventRowWrites(executor: Executor, events: unknown[][]): Write[] {
  if (events.length === 0) return []
  const insert = insertRows(executor, 'events', EVENT_COLUMNS, events)
  if (isPostgres(executor)) {
    return [
      insert,
      rowsWrite(
        executor,
        EVENT_COLUMNS,
        events,
        (r) => sql`
        ${INSERT_DELIVERIES}
        select r.id, r.wallet_id, webhooks.url, 'pending', 0, r.created_at, r.created_at, r.created_at
        from ${r} join webhooks on webhooks.wallet_id = r.wallet_id`,
      ),
    ]
  }
  // SQLite has written the events by now; their ids are the batch's own range, read back at once.
  const ids = events.map((event) => event[0] as number)
  return [
    insert,
    {
      statement: sql`
        ${INSERT_DELIVERIES}
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
  ['created_at', 'text'],
  ['body', 'text'],
] as const

/** The sides of a hold with their wallets (never mint, which holds nothing for anyone). */
function holdSides(hold: Pick<Hold, 'sending_wallet_id' | 'receiving_wallet_id'>): [Side, number][] {
  const sides: [Side, number][] = [
    [SENT, hold.sending_wallet_id],
    [RECEIVED, hold.receiving_wallet_id],
  ]
  return sides.filter(([, walletId]) => walletId !== MINT_WALLET_ID)
}

/** A hold's events to both its sides; each carries the Hold as it was after that event. */
function holdEventWrites(
  executor: Executor,
  holdEvents: { type: HoldEventType; hold: Hold }[],
  slots: number[],
  newEventId: () => string,
): Write[] {
  const events: unknown[][] = []
  holdEvents.forEach(({ type, hold }, i) => {
    const body = JSON.stringify(hold)
    const at = type === 'hold.created' ? hold.created_at : (hold.settled_at ?? hold.created_at)
    // Each side as a transaction's would be: 2 × the slot to the sender, + 1 to the receiver.
    for (const [side, walletId] of holdSides(hold)) events.push([2 * slots[i] + side, newEventId(), walletId, type, at, body])
  })
  return eventRowWrites(executor, events)
}

/**
 * Events whose data is their own (a schedule's run, a monitor's crossing), each with a webhook
 * delivery when its wallet has a webhook, in the caller's transaction: each takes a slot of the
 * transactions' ids, and only the first id of its pair (2 × the slot).
 */
async function recordEvents(executor: Executor, events: WalletEvent[], newEventId: () => string): Promise<void> {
  if (events.length === 0) return
  const slots = await drawTransactionIds(executor, events.length)
  const rows = events.map((event, i) => [
    2 * slots[i] + SENT,
    newEventId(),
    event.walletId,
    event.type,
    event.createdAt,
    JSON.stringify(event.data),
  ])
  await runWrites(executor, eventRowWrites(executor, rows))
}

/** The event writer `buildApp` (and the CLI) hand to the ledger (`ledger/ledger.types.ts` EventWriter), with its own id maker. */
export function createOutbox(): EventWriter {
  const newEventId = eventIdMaker()
  return {
    eventWrites: (executor, transactions) => transactionEventWrites(executor, transactions),
    holdEventWrites: (executor, events, slots) => holdEventWrites(executor, events, slots, newEventId),
    recordEvents: (executor, events) => recordEvents(executor, events, newEventId),
  }
}
