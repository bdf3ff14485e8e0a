import crypto from 'node:crypto'
import type { Executor } from '../db/database.ts'
import { MINT_WALLET_ID } from '../db/migrations/0001_initial.ts'
import type { Transaction } from '../ledger/transactions.repository.ts'

export type EventType = 'transaction.sent' | 'transaction.received'

export interface EventPayload {
  type: EventType
  id: string
  created_at: string
  data: Transaction
}

export function newEventId(): string {
  // randomUUID draws from a cached entropy pool: 122 random bits without a syscall per event.
  return `evt_${crypto.randomUUID().replaceAll('-', '')}`
}

/**
 * Transactional outbox (contract §8): writes `transaction.sent` for the sender and
 * `transaction.received` for the receiver (never for mint) in the caller's database transaction,
 * and queues a webhook delivery for each wallet that has a webhook. A rolled-back transfer
 * therefore emits nothing and a committed one never loses its events.
 */
export async function appendTransactionEvents(trx: Executor, transaction: Transaction): Promise<void> {
  const events: { walletId: number; payload: EventPayload }[] = []
  const add = (walletId: number, type: EventType) => {
    if (walletId !== MINT_WALLET_ID) events.push({ walletId, payload: { type, id: newEventId(), created_at: transaction.created_at, data: transaction } })
  }
  add(transaction.sending_wallet_id, 'transaction.sent')
  add(transaction.receiving_wallet_id, 'transaction.received')
  if (events.length === 0) return
  const rows = await trx
    .insertInto('events')
    .values(
      events.map(({ walletId, payload }) => ({
        event_id: payload.id,
        wallet_id: walletId,
        type: payload.type,
        transaction_id: transaction.id,
        payload: JSON.stringify(payload),
        created_at: payload.created_at,
      })),
    )
    .returning(['id', 'wallet_id'])
    .execute()
  const hooks = await trx
    .selectFrom('webhooks')
    .select(['wallet_id', 'url'])
    .where(
      'wallet_id',
      'in',
      rows.map((row) => row.wallet_id),
    )
    .execute()
  if (hooks.length === 0) return
  const urls = new Map(hooks.map((hook) => [hook.wallet_id, hook.url]))
  const deliveries = rows.filter((row) => urls.has(row.wallet_id))
  await trx
    .insertInto('webhook_deliveries')
    .values(
      deliveries.map((row) => ({
        event_id: row.id,
        wallet_id: row.wallet_id,
        url: urls.get(row.wallet_id) as string,
        status: 'pending',
        attempts: 0,
        next_attempt_at: transaction.created_at,
        lease_until: null,
        last_status_code: null,
        last_error: null,
        created_at: transaction.created_at,
        updated_at: transaction.created_at,
      })),
    )
    .execute()
}
