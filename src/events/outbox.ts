import crypto from 'node:crypto'
import { sql } from 'kysely'
import type { Executor } from '../db/database.ts'
import { insertRows, isPostgres, rowsWrite, type Write } from '../db/dialect.ts'
import {
  MINT_WALLET_ID,
  type EventWriter,
  type Hold,
  type HoldEventType,
  type Transaction,
  type WalletEvent,
} from '../ledger/ledger.types.ts'

export type EventType = 'transaction.sent' | 'transaction.received' | HoldEventType

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

/** The wallets that get an event for a transfer between these two: both sides, never mint. */
function eventWallets(from: number, to: number): { walletId: number; type: EventType }[] {
  const sides: { walletId: number; type: EventType }[] = []
  if (from !== MINT_WALLET_ID) sides.push({ walletId: from, type: 'transaction.sent' })
  if (to !== MINT_WALLET_ID) sides.push({ walletId: to, type: 'transaction.received' })
  return sides
}

/** `{ type, id, created_at, data }` as sent on the stream and to webhooks, the same bytes on every attempt. */
export function eventPayload(event: { type: string; event_id: string; created_at: string; body: string | null }): string {
  const head = `{"type":${JSON.stringify(event.type)},"id":${JSON.stringify(event.event_id)}`
  return `${head},"created_at":${JSON.stringify(event.created_at)},"data":${event.body}}`
}

/**
 * The outbox: `transaction.sent` and `.received` (never for mint), and a delivery for each wallet
 * with a webhook, written with the transfer, so a rolled-back transfer emits nothing.
 */
function transactionEventWrites(executor: Executor, transactions: Transaction[], ids: number[], newEventId: () => string): Write[] {
  const events: unknown[][] = []
  for (const transaction of transactions) {
    for (const { walletId, type } of eventWallets(transaction.sending_wallet_id, transaction.receiving_wallet_id)) {
      events.push([ids[events.length], newEventId(), walletId, type, transaction.id, transaction.created_at])
    }
  }
  return eventRowWrites(executor, EVENT_COLUMNS, events)
}

/** The event rows, and a pending delivery for each whose wallet has a webhook. */
function eventRowWrites(executor: Executor, columns: typeof EVENT_COLUMNS | typeof HOLD_EVENT_COLUMNS, events: unknown[][]): Write[] {
  if (events.length === 0) return []
  const insert = insertRows(executor, 'events', columns, events)
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
  // SQLite has written the events by now; their ids are the batch's own range, read back at once.
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

/** A hold's events to both its sides; each carries the Hold as it was after that event. */
function holdEventWrites(
  executor: Executor,
  holdEvents: { type: HoldEventType; hold: Hold }[],
  ids: number[],
  newEventId: () => string,
): Write[] {
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

/**
 * Events whose data is their own (a schedule's run, a monitor's crossing), each with a webhook
 * delivery when its wallet has a webhook, in the caller's transaction. Few and rare beside
 * transfers: their ids come from the sequence as they are inserted, one statement per event.
 */
async function recordEvents(executor: Executor, events: WalletEvent[], newEventId: () => string): Promise<void> {
  for (const event of events) {
    const row = await executor
      .insertInto('events')
      .values({
        event_id: newEventId(),
        wallet_id: event.walletId,
        type: event.type,
        transaction_id: null,
        created_at: event.createdAt,
        body: JSON.stringify(event.data),
      })
      .returning('id')
      .executeTakeFirstOrThrow()
    await executor
      .insertInto('webhook_deliveries')
      .columns(['event_id', 'wallet_id', 'url', 'status', 'attempts', 'next_attempt_at', 'created_at', 'updated_at'])
      .expression((eb) =>
        eb
          .selectFrom('webhooks')
          .select([
            sql.lit(Number(row.id)).as('event_id'),
            'webhooks.wallet_id',
            'webhooks.url',
            sql.lit('pending').as('status'),
            sql.lit(0).as('attempts'),
            sql.val(event.createdAt).as('next_attempt_at'),
            sql.val(event.createdAt).as('created_at'),
            sql.val(event.createdAt).as('updated_at'),
          ])
          .where('webhooks.wallet_id', '=', event.walletId),
      )
      .execute()
  }
}

/** The event writer `buildApp` (and the CLI) hand to the ledger (`ledger/ledger.types.ts` EventWriter), with its own id maker. */
export function createOutbox(): EventWriter {
  const newEventId = eventIdMaker()
  return {
    countEvents: (from, to) => eventWallets(from, to).length,
    eventWrites: (executor, transactions, ids) => transactionEventWrites(executor, transactions, ids, newEventId),
    countHoldEvents: (hold) => holdWallets(hold).length,
    holdEventWrites: (executor, events, ids) => holdEventWrites(executor, events, ids, newEventId),
    recordEvents: (executor, events) => recordEvents(executor, events, newEventId),
  }
}
