import type { FastifyBaseLogger } from 'fastify'
import client from 'prom-client'
import type { Database, Trx } from '../db/database.ts'
import { inTransaction } from '../db/dialect.ts'
import * as repo from './retention.repository.ts'

/**
 * What the retention job keeps. Only operational records are pruned: the journal (transactions,
 * their lines, holdings), users, wallets, keys and assets never are; a transaction loses only the
 * copy of its answer that its events were sent with, once they are gone.
 */
export interface RetentionPolicy {
  /** Ended webhook deliveries (with their attempts) and events older than this are removed. */
  eventRetentionDays: number
  /** Idempotency keys older than this are removed (at least 24 hours). */
  idempotencyRetentionHours: number
  /** The idle limit of user sessions (0 = none), as the session check applies it. */
  sessionIdleDays: number
}

export interface PruneReport {
  webhookAttempts: number
  webhookDeliveries: number
  events: number
  /** Transactions whose stored answer went with their last event. */
  transactionBodies: number
  idempotencyKeys: number
  /** Uses of capped keys that no daily window reads again. */
  keyUses: number
  userSessions: number
  rateLimitWindows: number
}

const BATCH = 5_000
const HOUR = 3_600_000
const DAY = 24 * HOUR

/**
 * Prunes what the policy no longer keeps in short batches, so writers are never held up. On
 * PostgreSQL a run stops when another instance holds the job's lock (undefined if from the first
 * batch). An event goes only once no delivery refers to it.
 */
export async function pruneOnce(database: Database, policy: RetentionPolicy, now = Date.now()): Promise<PruneReport | undefined> {
  const { db } = database
  const report: PruneReport = {
    webhookAttempts: 0,
    webhookDeliveries: 0,
    events: 0,
    transactionBodies: 0,
    idempotencyKeys: 0,
    keyUses: 0,
    userSessions: 0,
    rateLimitWindows: 0,
  }
  const eventsBefore = new Date(now - policy.eventRetentionDays * DAY).toISOString()
  const keysBefore = new Date(now - policy.idempotencyRetentionHours * HOUR).toISOString()
  const idleBefore = policy.sessionIdleDays > 0 ? new Date(now - policy.sessionIdleDays * DAY).toISOString() : undefined
  const nowIso = new Date(now).toISOString()
  // A daily window reads uses of the last 24 hours; one more hour for clocks behind this one.
  const usesBefore = new Date(now - 25 * HOUR).toISOString()

  let tookTurn = false
  let stopped = false
  /** Runs one batch under the job's turn and returns what it did; undefined once another instance has the turn. */
  const inTurn = async <T>(work: (trx: Trx) => Promise<T>): Promise<T | undefined> => {
    if (stopped) return undefined
    const batch = await inTransaction(db, async (trx) => ((await repo.takeRetentionTurn(trx)) ? { done: await work(trx) } : undefined))
    if (batch === undefined) stopped = true
    else tookTurn = true
    return batch?.done
  }

  // Ended deliveries and their attempts first: then the events they referred to can go.
  for (let afterId = 0; ;) {
    const page = await inTurn((trx) => repo.deleteEndedDeliveries(trx, afterId, eventsBefore, BATCH))
    if (!page) break
    report.webhookDeliveries += page.deliveries
    report.webhookAttempts += page.attempts
    afterId = page.lastId
    if (page.reachedNewer) break
  }
  for (let afterId = 0; ;) {
    const page = await inTurn(async (trx) => {
      const old = await repo.findOldEvents(trx, afterId, eventsBefore, BATCH)
      return { ...old, removed: await repo.deleteUnreferencedEvents(trx, old.ids) }
    })
    if (!page) break
    report.events += page.removed
    afterId = page.lastId
    if (page.reachedNewer) break
  }
  // A transaction's body is its events' data: once no event names it, nothing reads it again.
  const below = (await inTurn((trx) => repo.findFirstEventTransaction(trx))) ?? Number.MAX_SAFE_INTEGER
  for (;;) {
    const page = await inTurn((trx) => repo.clearTransactionBodies(trx, eventsBefore, below, BATCH))
    if (!page) break
    report.transactionBodies += page.cleared
    if (page.reachedNewer) break
  }
  for (;;) {
    const removed = await inTurn((trx) => repo.deleteIdempotencyKeys(trx, keysBefore, BATCH))
    if (removed === undefined) break
    report.idempotencyKeys += removed
    if (removed < BATCH) break
  }
  for (let afterId = 0; ;) {
    const page = await inTurn((trx) => repo.deleteSpentKeyUses(trx, afterId, usesBefore, BATCH))
    if (!page) break
    report.keyUses += page.removed
    afterId = page.lastId
    if (page.reachedNewer) break
  }
  for (;;) {
    const removed = await inTurn((trx) => repo.deleteExpiredUserSessions(trx, nowIso, idleBefore, BATCH))
    if (removed === undefined) break
    report.userSessions += removed
    if (removed < BATCH) break
  }
  // A window is over a minute after it starts; one more minute of margin for clocks that differ.
  report.rateLimitWindows += (await inTurn((trx) => repo.deleteEndedRateLimitWindows(trx, now - 2 * 60_000))) ?? 0
  return tookTurn ? report : undefined
}

export interface RetentionJobOptions {
  database: Database
  policy: RetentionPolicy
  log: FastifyBaseLogger
  registry?: client.Registry
  /** Between runs; the first run comes one `firstRunMs` after start. */
  intervalMs?: number
  firstRunMs?: number
}

/** Runs `pruneOnce` in the background, hourly by default; never throws out of its loop. */
export class RetentionJob {
  private timer: NodeJS.Timeout | undefined
  private running: Promise<void> | undefined
  private stopped = false
  private readonly pruned: client.Counter<'what'>

  constructor(private readonly options: RetentionJobOptions) {
    this.pruned = new client.Counter({
      name: 'coffer_retention_pruned_rows_total',
      help: 'Rows removed by the retention job, by kind (the journal is never pruned)',
      labelNames: ['what'],
      registers: options.registry ? [options.registry] : [],
    })
  }

  start(): void {
    this.schedule(this.options.firstRunMs ?? 60_000)
  }

  async stop(): Promise<void> {
    this.stopped = true
    clearTimeout(this.timer)
    await this.running
  }

  private schedule(delayMs: number): void {
    if (this.stopped) return
    this.timer = setTimeout(() => {
      this.running = this.run().finally(() => {
        this.running = undefined
        this.schedule(this.options.intervalMs ?? HOUR)
      })
    }, delayMs)
    this.timer.unref()
  }

  private async run(): Promise<void> {
    try {
      const report = await pruneOnce(this.options.database, this.options.policy)
      if (!report) return
      for (const [what, count] of Object.entries(report)) if (count > 0) this.pruned.inc({ what }, count)
      if (Object.values(report).some((count) => count > 0))
        this.options.log.info({ pruned: report }, 'retention: pruned operational records')
    } catch (error) {
      this.options.log.warn({ err: error }, 'retention: run failed, trying again at the next one')
    }
  }
}
