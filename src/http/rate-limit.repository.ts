import { sql } from 'kysely'
import type { Executor } from '../db/database.ts'

/** Counts one attempt in the key's window and returns the count; one upsert, exact across instances. */
export async function countHit(db: Executor, key: string, windowStart: number): Promise<number> {
  const row = await db
    .insertInto('rate_limit_hits')
    .values({ key, window_start: windowStart, hits: 1 })
    .onConflict((oc) =>
      oc.column('key').doUpdateSet({
        hits: sql`case when rate_limit_hits.window_start = excluded.window_start then rate_limit_hits.hits + 1 else 1 end`,
        window_start: sql`excluded.window_start`,
      }),
    )
    .returning('hits')
    .executeTakeFirstOrThrow()
  return Number(row.hits)
}

/** The count of the key in the window starting at `windowStart` (0 when it has none there). */
export async function readHits(db: Executor, key: string, windowStart: number): Promise<number> {
  const row = await db
    .selectFrom('rate_limit_hits')
    .select('hits')
    .where('key', '=', key)
    .where('window_start', '=', windowStart)
    .executeTakeFirst()
  return Number(row?.hits ?? 0)
}
