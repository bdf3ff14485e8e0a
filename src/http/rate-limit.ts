import type { Database, Executor } from '../db/database.ts'
import { AppError } from './errors.ts'
import { countHit, readHits } from './rate-limit.repository.ts'

/** Counts login, registration and admin-key attempts; throws G005 with Retry-After past the limit. */
export interface AttemptLimiter {
  hit(...keys: string[]): void | Promise<void>
  /** Throws G005 while the key is over its limit, without counting an attempt (a right admin key). */
  check(key: string): void | Promise<void>
}

function tooMany(retryAfterSeconds: number): AppError {
  return new AppError('G005', 'too many attempts, try again later', { headers: { 'retry-after': String(Math.max(1, retryAfterSeconds)) } })
}

/** PostgreSQL counts attempts in the database, so the limit holds across instances; SQLite's one process in memory. */
export function createAttemptLimiter(perMinute: number, database: Database): AttemptLimiter {
  return database.dialect === 'postgres' ? new SharedRateLimiter(perMinute, database.db) : new RateLimiter(perMinute)
}

/** Fixed one-minute windows per key, aligned to the clock, counted in `rate_limit_hits`. */
class SharedRateLimiter implements AttemptLimiter {
  constructor(
    private readonly perMinute: number,
    private readonly db: Executor,
    private readonly now: () => number = () => Date.now(),
  ) {}

  async hit(...keys: string[]): Promise<void> {
    if (this.perMinute === 0) return
    const now = this.now()
    const windowStart = Math.floor(now / 60_000) * 60_000
    // Stops at the first key over its limit, so a refused address does not use up the username's attempts.
    for (const key of keys) {
      if ((await countHit(this.db, key, windowStart)) > this.perMinute) throw tooMany(Math.ceil((windowStart + 60_000 - now) / 1000))
    }
  }

  async check(key: string): Promise<void> {
    if (this.perMinute === 0) return
    const now = this.now()
    const windowStart = Math.floor(now / 60_000) * 60_000
    if ((await readHits(this.db, key, windowStart)) > this.perMinute) throw tooMany(Math.ceil((windowStart + 60_000 - now) / 1000))
  }
}

/** Fixed one-minute windows per key, in memory: for one process only. */
export class RateLimiter implements AttemptLimiter {
  private windows = new Map<string, { start: number; count: number }>()

  constructor(
    private readonly perMinute: number,
    // Read through the global at each call, so a test clock (node:test mock timers) reaches it.
    private readonly now: () => number = () => Date.now(),
  ) {}

  /** Counts one attempt for every key; throws G005 with Retry-After when any key is over. */
  hit(...keys: string[]): void {
    if (this.perMinute === 0) return
    const now = this.now()
    if (this.windows.size > 100_000) this.sweep(now)
    for (const key of keys) {
      let window = this.windows.get(key)
      if (!window || now - window.start >= 60_000) {
        window = { start: now, count: 0 }
        this.windows.set(key, window)
      }
      window.count++
      if (window.count > this.perMinute) {
        throw tooMany(Math.ceil((window.start + 60_000 - now) / 1000))
      }
    }
  }

  check(key: string): void {
    if (this.perMinute === 0) return
    const now = this.now()
    const window = this.windows.get(key)
    if (window && now - window.start < 60_000 && window.count > this.perMinute)
      throw tooMany(Math.ceil((window.start + 60_000 - now) / 1000))
  }

  private sweep(now: number): void {
    for (const [key, window] of this.windows) if (now - window.start >= 60_000) this.windows.delete(key)
  }
}
