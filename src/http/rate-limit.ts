import { AppError } from './errors.ts'

/**
 * Fixed one-minute windows per key (client address, username). In memory: each instance limits
 * on its own, so N instances behind a balancer allow up to N times the limit.
 */
export class RateLimiter {
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
        const retryAfter = Math.max(1, Math.ceil((window.start + 60_000 - now) / 1000))
        throw new AppError('G005', 'too many attempts, try again later', { headers: { 'retry-after': String(retryAfter) } })
      }
    }
  }

  private sweep(now: number): void {
    for (const [key, window] of this.windows) if (now - window.start >= 60_000) this.windows.delete(key)
  }
}
