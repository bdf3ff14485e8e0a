import type { Db, Executor } from './database.types.ts'
/** A serialization failure, deadlock or stale named statement: rolled back, so safe to run again. */
export function isRetryable(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code
  return code === '40001' || code === '40P01' || isStaleStatement(error)
}

/** A named statement refused before it ran: its columns changed under it, or the server session lost it. */
export function isStaleStatement(error: unknown): boolean {
  const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown }
  return (
    code === '26000' || (code === '0A000' && typeof message === 'string' && message.includes('cached plan must not change result type'))
  )
}

const MAX_ATTEMPTS = 8

/** A short random pause that grows with the attempt, so that racing transactions spread out. */
function retryPause(attempt: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.random() * 5 * attempt))
}

/** The one retry loop, for the races `isRetryable` names; `attempt` must be safe to run again. */
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

/** `work` in one read-only repeatable-read snapshot, started over on a retryable failure (it only reads). */
export function inReadOnlySnapshot<T>(db: Db, work: (trx: Executor) => Promise<T>): Promise<T> {
  return withRetries(() => db.transaction().setIsolationLevel('repeatable read').setAccessMode('read only').execute(work))
}
