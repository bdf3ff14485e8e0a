import type { FastifyBaseLogger } from 'fastify'
import client from 'prom-client'
import type { Db } from '../db/database.ts'
import { Backoff } from '../db/faults.ts'
import { readEventsAfter, readHead, readSnapshot, readWalletEvents, type Snapshot, type StreamEvent } from './events.repository.ts'

/** Where a stream's frames go: the SSE route wraps an HTTP response in one. */
export interface EventSink {
  write(frame: string): void
  /** Bytes written but not yet taken by the client. */
  buffered(): number
  /** Resolves once the client has taken what was written (or the sink closed). */
  drained(): Promise<void>
  close(): void
}

export interface EventHubOptions {
  db: Db
  log: FastifyBaseLogger
  /** Where `coffer_event_streams` is registered (the app's /metrics). */
  registry?: client.Registry
  pollMs?: number
}

interface Subscriber {
  walletId: number
  /** Highest event id written to this subscriber. */
  sent: number
  /** False while the backlog after Last-Event-ID is still being sent from the database. */
  live: boolean
  closed: boolean
  sink: EventSink
}

const BATCH = 500
/** A live stream whose client takes nothing while this much piles up is closed; it can resume. */
const MAX_BUFFERED_BYTES = 4 * 1024 * 1024
/** While a backlog is sent, writing pauses whenever this much waits for the client. */
const BACKLOG_BUFFER_BYTES = 256 * 1024
/** Safety net: an id gap still unexplained after this long is treated as a rolled-back insert. */
const MAX_HOLD_MS = 30_000

/** One SSE frame: `id` is the event's sequence number, `data` its payload (one JSON line). */
export function formatEvent(event: StreamEvent): string {
  return `id: ${event.id}\nevent: ${event.type}\ndata: ${event.payload}\n\n`
}

/**
 * One poller fans the outbox out to this instance's SSE streams. Its watermark passes an id only
 * once no smaller one can still commit, so resuming after `Last-Event-ID: N` loses nothing.
 */
export class EventHub {
  private readonly db: Db
  private readonly log: FastifyBaseLogger
  private readonly pollMs: number
  private readonly subscribers = new Map<number, Set<Subscriber>>()
  private count = 0
  private readonly streams: client.Gauge
  private watermark = 0
  private resolvedUpto = 0
  private hold: { upto: number; xmax: bigint; since: number } | undefined
  private generation = 0
  private starting: Promise<void> | undefined
  private timer: NodeJS.Timeout | undefined
  private ticks = 0
  private polling = false
  private closed = false
  /** Through a storage outage, polling pauses for longer and longer, and logs only its start and end. */
  private readonly backoff = new Backoff()

  constructor(options: EventHubOptions) {
    this.db = options.db
    this.log = options.log
    this.pollMs = options.pollMs ?? 250
    this.streams = new client.Gauge({
      name: 'coffer_event_streams',
      help: 'Open GET /wallet/events streams in this instance',
      registers: options.registry ? [options.registry] : [],
    })
  }

  /**
   * Streams the wallet's events to `sink`: first those after `lastEventId` (when given), then
   * live ones as they commit. Returns the function that ends the subscription.
   */
  async subscribe(walletId: number, lastEventId: number | undefined, sink: EventSink): Promise<() => void> {
    if (this.closed) throw new Error('the event hub is closed')
    await this.start()
    // The app may have closed while the head was being found: this stream would then never end.
    if (this.closed) throw new Error('the event hub is closed')
    const subscriber: Subscriber = { walletId, sent: lastEventId ?? this.watermark, live: lastEventId === undefined, closed: false, sink }
    let set = this.subscribers.get(walletId)
    if (!set) this.subscribers.set(walletId, (set = new Set()))
    set.add(subscriber)
    this.count += 1
    this.streams.set(this.count)
    const unsubscribe = () => this.remove(subscriber)
    if (!subscriber.live) {
      try {
        await this.catchUp(subscriber)
      } catch (error) {
        unsubscribe()
        throw error
      }
    }
    return unsubscribe
  }

  /** Ends every stream and stops polling (app shutdown). */
  close(): void {
    this.closed = true
    for (const set of this.subscribers.values()) for (const subscriber of set) this.remove(subscriber)
    this.stop()
  }

  private remove(subscriber: Subscriber): void {
    if (subscriber.closed) return
    subscriber.closed = true
    subscriber.sink.close()
    const set = this.subscribers.get(subscriber.walletId)
    if (set?.delete(subscriber)) {
      this.count -= 1
      this.streams.set(this.count)
      if (set.size === 0) this.subscribers.delete(subscriber.walletId)
    }
  }

  private deliver(subscriber: Subscriber, event: StreamEvent, capped = true): void {
    if (subscriber.closed || event.id <= subscriber.sent) return
    subscriber.sent = event.id
    subscriber.sink.write(formatEvent(event))
    if (capped && subscriber.sink.buffered() > MAX_BUFFERED_BYTES) this.remove(subscriber)
  }

  /** Sends the backlog page by page up to the watermark, then switches to live without a gap. */
  private async catchUp(subscriber: Subscriber): Promise<void> {
    for (;;) {
      const upto = this.watermark
      const rows = await readWalletEvents(this.db, subscriber.walletId, subscriber.sent, upto, BATCH)
      if (subscriber.closed) return
      for (const row of rows) {
        this.deliver(subscriber, row, false)
        if (subscriber.sink.buffered() > BACKLOG_BUFFER_BYTES) await subscriber.sink.drained()
        if (subscriber.closed) return
      }
      if (rows.length === BATCH) continue
      // No await between this check and going live: the poller cannot slip an event in between.
      if (this.watermark === upto) {
        subscriber.live = true
        return
      }
    }
  }

  /** Polls from the first subscriber until the app closes. */
  private start(): Promise<void> {
    if (this.timer) return Promise.resolve()
    if (!this.starting) {
      const generation = ++this.generation
      this.starting = this.findHead()
        .then((head) => {
          if (generation !== this.generation) return
          this.watermark = head
          this.resolvedUpto = head
          this.hold = undefined
          this.timer = setInterval(() => {
            // Without streams the watermark is still kept current, at a quarter of the pace.
            if (this.count > 0 || ++this.ticks % 4 === 0) void this.poll(generation)
          }, this.pollMs)
          this.timer.unref()
        })
        .finally(() => {
          this.starting = undefined
        })
    }
    return this.starting
  }

  private stop(): void {
    clearInterval(this.timer)
    this.timer = undefined
    this.generation += 1
  }

  /** The highest id below which nothing can still appear. */
  private async findHead(): Promise<number> {
    const { maxId, snapshot } = await readHead(this.db)
    if (snapshot) {
      const deadline = Date.now() + 5_000
      for (;;) {
        const now = (await readSnapshot(this.db)) as Snapshot
        if (now.xmin >= snapshot.xmax || Date.now() > deadline || this.closed) break
        await new Promise((resolve) => setTimeout(resolve, 10))
      }
    }
    return maxId
  }

  private async poll(generation: number): Promise<void> {
    if (this.polling || !this.backoff.ready()) return
    this.polling = true
    try {
      for (;;) {
        const { rows, snapshot } = await readEventsAfter(this.db, this.watermark, BATCH)
        if (generation !== this.generation) return
        if (this.hold && ((snapshot && snapshot.xmin >= this.hold.xmax) || Date.now() - this.hold.since > MAX_HOLD_MS)) {
          this.resolvedUpto = Math.max(this.resolvedUpto, this.hold.upto)
          this.hold = undefined
        }
        let blocked = false
        for (const row of rows) {
          if (snapshot && row.id !== this.watermark + 1 && row.id - 1 > this.resolvedUpto) {
            // Ids between the watermark and this row are not visible (yet): wait for them.
            this.hold ??= { upto: rows[rows.length - 1].id, xmax: snapshot.xmax, since: Date.now() }
            blocked = true
            break
          }
          this.watermark = row.id
          // An id that names no event (mint's side, a pair's unused id) is passed, not sent.
          const set = row.gap ? undefined : this.subscribers.get(row.wallet_id)
          if (set) for (const subscriber of set) if (subscriber.live) this.deliver(subscriber, row)
        }
        if (this.backoff.succeeded()) this.log.info('event stream: reading events again')
        if (blocked || rows.length < BATCH) return
      }
    } catch (error) {
      if (this.backoff.failed()) this.log.warn({ err: error }, 'event stream: reading events failed; retrying with backoff')
    } finally {
      this.polling = false
    }
  }
}
