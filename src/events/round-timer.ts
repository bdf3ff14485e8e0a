/**
 * When the delivery worker's rounds run: one at a time, at least `gapMs` apart (so that attempts
 * ending close together share a commit), at each poll, and whenever woken. A wake during a round
 * runs another once it ends. The next poll comes `pollMs` after the start of the last round,
 * however that one was started, so polls and wakes do not add up.
 */
export class RoundTimer {
  readonly #round: () => Promise<void>
  readonly #gapMs: number
  readonly #pollMs: number
  #running = false
  #polling = false
  #ticking: Promise<void> | undefined
  #again = false
  #lastRound = 0
  #pollTimer: NodeJS.Timeout | undefined
  #gapTimer: NodeJS.Timeout | undefined

  constructor(round: () => Promise<void>, options: { gapMs: number; pollMs: number }) {
    this.#round = round
    this.#gapMs = options.gapMs
    this.#pollMs = options.pollMs
  }

  get running(): boolean {
    return this.#running
  }

  start(): void {
    this.#running = true
    this.#polling = true
    this.#armPoll()
  }

  /** Runs a round soon: now, after the gap, or once the one running ends. */
  wake(): void {
    if (!this.#running) return
    if (this.#ticking) {
      this.#again = true
      return
    }
    if (this.#gapTimer) return
    const wait = this.#lastRound + this.#gapMs - Date.now()
    if (wait > 0) {
      this.#gapTimer = setTimeout(() => {
        this.#gapTimer = undefined
        this.wake()
      }, wait)
      this.#gapTimer.unref()
      return
    }
    this.#lastRound = Date.now()
    if (this.#polling) this.#armPoll()
    this.#ticking = this.#round().finally(() => {
      this.#ticking = undefined
      if (this.#again) {
        this.#again = false
        this.wake()
      }
    })
  }

  /** From within a round: another runs once this one ends. */
  again(): void {
    this.#again = true
  }

  /** Wakes once `pollMs` from now (a round that could not run, with work waiting), polling or not. */
  retryLater(): void {
    setTimeout(() => this.wake(), this.#pollMs).unref()
  }

  /** No more polls; rounds still run when woken. */
  stopPolling(): void {
    this.#polling = false
    clearTimeout(this.#pollTimer)
  }

  /** No more rounds; resolves once the one running has ended. */
  async stop(): Promise<void> {
    this.#running = false
    clearTimeout(this.#gapTimer)
    await this.#ticking
  }

  #armPoll(): void {
    clearTimeout(this.#pollTimer)
    this.#pollTimer = setTimeout(() => this.wake(), this.#pollMs)
    this.#pollTimer.unref()
  }
}
