/** User sessions that just ended: every session of a user but `except` (when given), or one session. */
export type SessionEnding = { userId: number; except?: number } | { sessionId: number }

/**
 * Tells this instance's open event streams, once the database has ended sessions, that theirs may
 * be among them, so a signed-out device stops receiving at once rather than at its stream's next
 * keep-alive check (which still catches sessions ended through another instance, expiry and
 * idleness). One per app (`app.ts`).
 */
export class SessionEndings {
  private readonly listeners = new Set<(ending: SessionEnding) => void>()

  /** Calls `listener` for every ending from now on; returns what stops it. */
  listen(listener: (ending: SessionEnding) => void): () => void {
    this.listeners.add(listener)
    return () => this.listeners.delete(listener)
  }

  /** Called after the commit that ended the sessions. */
  announce(ending: SessionEnding): void {
    for (const listener of this.listeners) listener(ending)
  }
}

/** Whether a user session (its user and id) is among those an ending names. */
export function isEnded(ending: SessionEnding, session: { userId: number; sessionId: number }): boolean {
  if ('sessionId' in ending) return ending.sessionId === session.sessionId
  return ending.userId === session.userId && ending.except !== session.sessionId
}
