import type { Db } from '../../src/db/database.ts'
import { readEventsAfter, type StreamEvent } from '../../src/events/events.repository.ts'

/** Every event of the store, stored or derived from its transaction, in id order: what the stream's feed reads, its gaps left out. */
export async function allEvents(db: Db): Promise<StreamEvent[]> {
  const events: StreamEvent[] = []
  for (let after = 0; ;) {
    const { rows } = await readEventsAfter(db, after, 1_000)
    if (rows.length === 0) return events
    for (const row of rows) if (!row.gap) events.push(row)
    after = rows[rows.length - 1].id
  }
}

/** The transactions' events among them, as [transaction id, wallet id, type], in id order. */
export async function transactionEvents(db: Db, transactionIds?: number[]): Promise<[number, number, string][]> {
  const wanted = transactionIds && new Set(transactionIds)
  return (await allEvents(db))
    .filter((event) => event.type.startsWith('transaction.'))
    .map((event): [number, number, string] => [JSON.parse(event.payload).data.id, event.wallet_id, event.type])
    .filter(([id]) => !wanted || wanted.has(id))
}
