/**
 * Storage faults: the database cannot take a request right now (down, read-only, full, locked,
 * timed out). Answered `503 S001` with `Retry-After`; any other database error is a bug (`500 S000`).
 */

/** A storage fault found by the service itself (a read-only server, a COMMIT whose outcome is unknown). */
export class StorageFault extends Error {
  constructor(
    message: string,
    /** Short name of the cause for the log: a SQLSTATE, an SQLite or Node code, or one of ours. */
    readonly code: string,
    options: { cause?: unknown } = {},
  ) {
    super(message, options)
  }
}

/** A COMMIT that may or may not have taken effect: never run again; the client's retry with its Idempotency-Key finds out. */
export function commitOutcomeUnknown(cause: unknown): StorageFault {
  const reason = describeStorageFault(cause)
  return new StorageFault(
    `the outcome of COMMIT is unknown (${reason.code ?? 'no code'}: ${reason.message})`,
    reason.code ?? 'COMMIT_UNKNOWN',
    { cause },
  )
}

const NODE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ETIMEDOUT',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOSPC',
  'EROFS',
  'EIO',
])

/**
 * SQLSTATE classes 08 connection, 53 resources, 57 operator intervention, 58 I/O; read-only (25006),
 * idle/lock timeouts, and serialization failures or deadlocks once our own retries are used up.
 */
const PG_CLASSES = new Set(['08', '53', '57', '58'])
const PG_CODES = new Set(['25006', '25P03', '55P03', '40001', '40P01'])

/** SQLite result codes; extended ones start with these. */
const SQLITE_PREFIXES = [
  'SQLITE_BUSY',
  'SQLITE_LOCKED',
  'SQLITE_FULL',
  'SQLITE_IOERR',
  'SQLITE_READONLY',
  'SQLITE_CANTOPEN',
  'SQLITE_NOMEM',
  'SQLITE_PROTOCOL',
]

/** node-postgres and Kysely say these in words only; each gets a name for the log. */
const UNAVAILABLE_MESSAGES: [RegExp, string][] = [
  [/Connection terminated|not queryable|database connection is not open/i, 'CONNECTION_LOST'],
  [/timeout exceeded when trying to connect|connection timeout/i, 'CONNECT_TIMEOUT'],
  [/Query read timeout/i, 'QUERY_TIMEOUT'],
  [/driver has already been destroyed|Cannot use a pool after calling end/i, 'POOL_CLOSED'],
]

function messageCode(message: unknown): string | undefined {
  if (typeof message !== 'string') return undefined
  return UNAVAILABLE_MESSAGES.find(([pattern]) => pattern.test(message))?.[1]
}

function isFaultCode(code: string): boolean {
  if (NODE_CODES.has(code) || PG_CODES.has(code)) return true
  if (/^[0-9A-Z]{5}$/.test(code) && PG_CLASSES.has(code.slice(0, 2))) return true
  return SQLITE_PREFIXES.some((prefix) => code.startsWith(prefix))
}

/** The error and its causes (`cause`, and the attempts of an AggregateError), outermost first. */
function chain(error: unknown): unknown[] {
  const found: unknown[] = []
  const queue = [error]
  while (queue.length > 0 && found.length < 8) {
    const current = queue.shift()
    if (current === null || current === undefined || found.includes(current)) continue
    found.push(current)
    const { cause, errors } = current as { cause?: unknown; errors?: unknown }
    queue.push(cause)
    if (Array.isArray(errors)) queue.push(...errors)
  }
  return found
}

/** True when the storage, not the query, failed: the request may be retried (S001). */
export function isStorageUnavailable(error: unknown): boolean {
  return chain(error).some((link) => {
    if (link instanceof StorageFault) return true
    const { code, message } = link as { code?: unknown; message?: unknown }
    if (typeof code === 'string' && isFaultCode(code)) return true
    return messageCode(message) !== undefined
  })
}

/** The first fault code in the error's chain and its message, for the one log line that reports it. */
export function describeStorageFault(error: unknown): { code: string | undefined; message: string } {
  const links = chain(error)
  for (const link of links) {
    const { code, message } = link as { code?: unknown; message?: unknown }
    if (typeof code === 'string' && isFaultCode(code)) return { code, message: typeof message === 'string' ? message : String(link) }
  }
  for (const link of links) {
    const { message } = link as { message?: unknown }
    const code = messageCode(message)
    if (code) return { code, message: message as string }
  }
  const first = links[0] as { code?: unknown; message?: unknown } | undefined
  return {
    code: typeof first?.code === 'string' ? first.code : undefined,
    message: typeof first?.message === 'string' ? first.message : String(first),
  }
}

/** Seconds a client is asked to wait before retrying a request answered `503 S001`. */
export const RETRY_AFTER_SECONDS = 1

/** Paces a background loop through a storage outage: doubling pauses, one log line at its start and one at its end. */
export class Backoff {
  #failures = 0
  #resumeAt = 0

  constructor(
    private readonly minMs = 250,
    private readonly maxMs = 5_000,
  ) {}

  /** False while the loop should skip its round. */
  ready(now = Date.now()): boolean {
    return now >= this.#resumeAt
  }

  /** Records a failed round; true for the first failure of an outage (the one to log). */
  failed(now = Date.now()): boolean {
    this.#failures += 1
    this.#resumeAt = now + Math.min(this.maxMs, this.minMs * 2 ** (this.#failures - 1))
    return this.#failures === 1
  }

  /** Records a good round; true when it ends an outage (the one to log). */
  succeeded(): boolean {
    const recovered = this.#failures > 0
    this.#failures = 0
    this.#resumeAt = 0
    return recovered
  }
}
