import crypto from 'node:crypto'
import { sql } from 'kysely'
import type { Executor } from '../db/database.ts'
import { rowsOf } from '../db/dialect.ts'
import { MINT_WALLET_ID } from '../db/migrations/0001_initial.ts'
import type { Transaction } from '../ledger/transactions.repository.ts'

export type EventType = 'transaction.sent' | 'transaction.received'

export interface EventPayload {
  type: EventType
  id: string
  created_at: string
  data: Transaction
}

/**
 * `evt_` and 32 hex digits: the time in milliseconds (12 digits), then 74 random bits. Ids that
 * grow with time are appended at the end of the unique index instead of landing on a random
 * page of it, so a batch of events dirties (and logs) a few index pages rather than one each.
 */
export function newEventId(): string {
  // randomUUID draws from a cached entropy pool: random bits without a syscall per event.
  return `evt_${Date.now().toString(16).padStart(12, '0')}${crypto.randomUUID().replaceAll('-', '').slice(0, 20)}`
}

/**
 * Transactional outbox (contract §8): `transaction.sent` for the sender and `transaction.received`
 * for the receiver (never for mint), written with the transfer, and a webhook delivery queued for
 * each event whose wallet has a webhook. A rolled-back transfer therefore emits nothing and a
 * committed one never loses its events. Called by the ledger (`ledger/moves.ts`) with the
 * transactions of a batch, and each wallet's webhook URL as read under the batch's locks.
 */
export async function appendTransactionEvents(trx: Executor, transactions: Transaction[], webhookUrl: (walletId: number) => string | undefined): Promise<void> {
  const events: { walletId: number; payload: EventPayload }[] = []
  for (const transaction of transactions) {
    const add = (walletId: number, type: EventType) => {
      if (walletId !== MINT_WALLET_ID) events.push({ walletId, payload: { type, id: newEventId(), created_at: transaction.created_at, data: transaction } })
    }
    add(transaction.sending_wallet_id, 'transaction.sent')
    add(transaction.receiving_wallet_id, 'transaction.received')
  }
  if (events.length === 0) return
  const rows = events.map(({ walletId, payload }) => [payload.id, walletId, payload.type, payload.data.id, JSON.stringify(payload), payload.created_at])
  const hooked = events.filter((event) => webhookUrl(event.walletId) !== undefined)
  const insert = sql<{ id: number; event_id: string }>`
    insert into events (event_id, wallet_id, type, transaction_id, payload, created_at)
    select event_id, wallet_id, type, transaction_id, payload, created_at from ${rowsOf(trx, EVENT_COLUMNS, rows)}`
  if (hooked.length === 0) {
    await insert.execute(trx)
    return
  }
  const inserted = await sql<{ id: number; event_id: string }>`${insert} returning id, event_id`.execute(trx)
  const sequence = new Map(inserted.rows.map((row) => [row.event_id, Number(row.id)]))
  const deliveries = hooked.map(({ walletId, payload }) => [sequence.get(payload.id) as number, walletId, webhookUrl(walletId) as string, payload.created_at])
  await sql`
    insert into webhook_deliveries (event_id, wallet_id, url, status, attempts, next_attempt_at, created_at, updated_at)
    select event_id, wallet_id, url, 'pending', 0, created_at, created_at, created_at from ${rowsOf(trx, DELIVERY_COLUMNS, deliveries)}`.execute(trx)
}

const EVENT_COLUMNS = [
  ['event_id', 'text'],
  ['wallet_id', 'bigint'],
  ['type', 'text'],
  ['transaction_id', 'bigint'],
  ['payload', 'text'],
  ['created_at', 'text'],
] as const
const DELIVERY_COLUMNS = [
  ['event_id', 'bigint'],
  ['wallet_id', 'bigint'],
  ['url', 'text'],
  ['created_at', 'text'],
] as const
