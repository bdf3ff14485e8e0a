import type { FastifyBaseLogger } from 'fastify'
import { liveUserSessionWallets } from '../accounts/accounts.service.ts'
import type { Config } from '../config.ts'
import type { Db } from '../db/database.ts'
import { Backoff } from '../db/faults.ts'
import { findLiveWalletKeyIds } from '../wallets/wallets.service.ts'

/** The credential a stream was opened with: a user session on its wallet, or a wallet key. */
export type StreamCredential = { kind: 'user'; sessionId: number; walletId: number } | { kind: 'wallet'; keyId: number }

interface Watched {
  credential: StreamCredential
  end: () => void
}

/** How often the credentials of this instance's open streams are checked against the database. */
const CHECK_MS = 1_000
/** Ids per lookup, well under every storage's limit of bound parameters. */
const IDS_PER_QUERY = 1_000

function chunks(ids: number[]): number[][] {
  const out: number[][] = []
  for (let start = 0; start < ids.length; start += IDS_PER_QUERY) out.push(ids.slice(start, start + IDS_PER_QUERY))
  return out
}

/**
 * Ends this instance's streams whose credential no longer stands: a session ended, expired, idle
 * too long or moved to another wallet, a key revoked or its wallet deleted. The database is the
 * one place every instance sees, so a session ended through another instance ends its streams
 * here within a second: one lookup of every open stream's sessions and one of its keys, whatever
 * the number of streams.
 */
export class StreamAccess {
  private readonly db: Db
  private readonly config: Config
  private readonly log: FastifyBaseLogger
  private readonly checkMs: number
  private readonly watched = new Set<Watched>()
  private timer: NodeJS.Timeout | undefined
  private checking = false
  private readonly backoff = new Backoff()

  constructor(options: { db: Db; config: Config; log: FastifyBaseLogger; checkMs?: number }) {
    this.db = options.db
    this.config = options.config
    this.log = options.log
    this.checkMs = options.checkMs ?? CHECK_MS
  }

  /** Calls `end` once the credential no longer stands; returns what stops watching. */
  watch(credential: StreamCredential, end: () => void): () => void {
    const entry: Watched = { credential, end }
    this.watched.add(entry)
    if (!this.timer) {
      this.timer = setInterval(() => void this.check(), this.checkMs)
      this.timer.unref()
    }
    return () => {
      this.watched.delete(entry)
      if (this.watched.size === 0) this.stop()
    }
  }

  /** Stops checking (app shutdown; the streams end with the hub). */
  stop(): void {
    clearInterval(this.timer)
    this.timer = undefined
  }

  private async check(): Promise<void> {
    if (this.checking || !this.backoff.ready()) return
    this.checking = true
    try {
      const entries = [...this.watched]
      const sessionIds = new Set<number>()
      const keyIds = new Set<number>()
      for (const { credential } of entries) {
        if (credential.kind === 'user') sessionIds.add(credential.sessionId)
        else keyIds.add(credential.keyId)
      }
      const sessions = new Map<number, number>()
      for (const ids of chunks([...sessionIds]))
        for (const [id, wallet] of await liveUserSessionWallets(this.db, this.config, ids)) sessions.set(id, wallet)
      const keys = new Set<number>()
      for (const ids of chunks([...keyIds])) for (const id of await findLiveWalletKeyIds(this.db, ids)) keys.add(id)
      for (const entry of entries) {
        const { credential } = entry
        const stands = credential.kind === 'user' ? sessions.get(credential.sessionId) === credential.walletId : keys.has(credential.keyId)
        if (!stands && this.watched.delete(entry)) entry.end()
      }
      if (this.watched.size === 0) this.stop()
      if (this.backoff.succeeded()) this.log.info('event stream: checking credentials again')
    } catch (error) {
      if (this.backoff.failed()) this.log.warn({ err: error }, 'event stream: checking credentials failed; retrying with backoff')
    } finally {
      this.checking = false
    }
  }
}
