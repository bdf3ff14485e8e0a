import type { Executor } from '../db/database.ts'

/** The webhook backlog: deliveries still pending, and when the oldest of them was queued (null when none). */
export async function findWebhookBacklog(db: Executor): Promise<{ pending: number; oldest: string | null }> {
  const row = await db
    .selectFrom('webhook_deliveries')
    .select((eb) => [eb.fn.countAll<number | string>().as('pending'), eb.fn.min('created_at').as('oldest')])
    .where('status', '=', 'pending')
    .executeTakeFirstOrThrow()
  return { pending: Number(row.pending), oldest: (row.oldest as string | null) ?? null }
}
