/**
 * Serialization failure or deadlock on PostgreSQL: the database rolled the transaction back, so it
 * is safe to run the whole transaction again. (On SQLite a transaction that writes takes the write
 * lock first, waiting for another process that holds it, so it has no such race: `database.ts`.)
 * So is a named statement the server could no longer run (`isStaleStatement`), which the
 * connection has dropped: run again, the transaction prepares it anew.
 */
export function isRetryable(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code
  return code === '40001' || code === '40P01' || isStaleStatement(error)
}

/**
 * PostgreSQL cannot run a connection's named statement (`postgres.ts`) any more, and refused it
 * before it ran: "cached plan must not change result type" (a migration, perhaps by another
 * instance, changed the columns the statement answers, as a `select *` after a column is added),
 * or "prepared statement … does not exist" (the server no longer has it, as behind a pooler that
 * changed the server session).
 */
export function isStaleStatement(error: unknown): boolean {
  const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown }
  return (
    code === '26000' || (code === '0A000' && typeof message === 'string' && message.includes('cached plan must not change result type'))
  )
}

/** How many times a transaction is tried before its race is answered as an error. */
const MAX_ATTEMPTS = 8

/** A short random pause that grows with the attempt, so that racing transactions spread out. */
function retryPause(attempt: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.random() * 5 * attempt))
}

/**
 * The one retry loop: runs `attempt` until it succeeds, retrying the races `isRetryable` names up
 * to MAX_ATTEMPTS tries in all. `attempt` must be safe to run again from the start.
 */
export async function withRetries<T>(attempt: () => Promise<T>): Promise<T> {
  for (let tryNumber = 1; ; tryNumber++) {
    try {
      return await attempt()
    } catch (error) {
      if (tryNumber >= MAX_ATTEMPTS || !isRetryable(error)) throw error
      await retryPause(tryNumber)
    }
  }
}
