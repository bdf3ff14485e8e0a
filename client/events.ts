import type { Holding, Monitor, Transaction } from './index.ts'

/** What every event of `GET /wallet/events` carries, as webhooks receive it, with its stream sequence number. */
interface EventFrame {
  id: string
  created_at: string
  /** The stream's `id:`, sent back as `Last-Event-ID` to resume after it. */
  sequence: string
}

/** A transfer sent or received by the wallet. */
export interface WalletEvent extends EventFrame {
  type: 'transaction.sent' | 'transaction.received'
  data: Transaction
}

/** A monitor of the wallet crossed its threshold or came back: the monitor, and the holding as the move left it. */
export interface BalanceEvent extends EventFrame {
  type: 'balance.crossed' | 'balance.restored'
  data: { monitor: Monitor; holding: Pick<Holding, 'asset' | 'quantity' | 'held' | 'credit_limit'> }
}

/** A hold's or a schedule's event; its data as `docs/webhooks.md` describes. */
export interface OtherEvent extends EventFrame {
  type:
    | 'hold.created'
    | 'hold.captured'
    | 'hold.voided'
    | 'hold.expired'
    | 'schedule.ran'
    | 'schedule.failed'
    | 'schedule.paused'
    | 'schedule.finished'
  data: unknown
}

/** Any event of the wallet's stream. */
export type StreamEvent = WalletEvent | BalanceEvent | OtherEvent

export interface FollowOptions {
  baseUrl: string
  /** A user session token or a wallet key; without one a browser sends its cookies. */
  token?: string
  /** Resume after this event (a `sequence`). */
  lastEventId?: string
  signal?: AbortSignal
  /** Called when the stream (re)connects and when it drops; for a "live" indicator. */
  onStatus?: (status: 'live' | 'reconnecting') => void
  /** Called when the service refuses the stream (an ended session, a revoked key); following stops. */
  onRefused?: (status: number, body: unknown) => void
}

/**
 * Follows the wallet's event stream until `signal` aborts or the service refuses it, calling
 * `onEvent` for each event in order. Reconnects after a drop (waiting 1 s, up to 30 s), resuming
 * after the last event seen, so no event is missed; delivery is at least once, so a consumer that
 * must act once keys on `event.id`. Works in browsers and Node (fetch with streaming, which,
 * unlike EventSource, can send an Authorization header).
 */
export async function followEvents(options: FollowOptions, onEvent: (event: StreamEvent) => void | Promise<void>): Promise<void> {
  let lastEventId = options.lastEventId
  let wait = 1000
  while (!options.signal?.aborted) {
    try {
      const headers: Record<string, string> = { accept: 'text/event-stream' }
      if (options.token) headers.authorization = `Bearer ${options.token}`
      if (lastEventId) headers['last-event-id'] = lastEventId
      const response = await fetch(new URL('/wallet/events', options.baseUrl), {
        headers,
        signal: options.signal,
        credentials: 'same-origin',
      })
      if (response.status >= 400 && response.status < 500) {
        options.onRefused?.(response.status, await response.json().catch(() => undefined))
        return
      }
      if (!response.ok || !response.body) throw new Error(`status ${response.status}`)
      options.onStatus?.('live')
      wait = 1000
      for await (const frame of frames(response.body)) {
        if (frame.data === undefined) continue
        const event = { ...(JSON.parse(frame.data) as Omit<StreamEvent, 'sequence'>), sequence: frame.id ?? '' } as StreamEvent
        await onEvent(event)
        if (frame.id) lastEventId = frame.id
      }
    } catch (error) {
      if (options.signal?.aborted) return
      if (error instanceof SyntaxError) throw error
    }
    options.onStatus?.('reconnecting')
    await new Promise((resolve) => setTimeout(resolve, wait))
    wait = Math.min(wait * 2, 30_000)
  }
}

/** The Server-Sent Events frames of a stream: `id` and the joined `data` lines of each. */
async function* frames(body: ReadableStream<Uint8Array>): AsyncGenerator<{ id?: string; data?: string }> {
  const reader = body.getReader()
  const decoder = new TextDecoder()
  let buffer = ''
  let frame: { id?: string; data?: string } = {}
  for (;;) {
    const { value, done } = await reader.read()
    if (done) return
    buffer += decoder.decode(value, { stream: true })
    let newline: number
    while ((newline = buffer.search(/\r\n|\r|\n/)) >= 0) {
      const line = buffer.slice(0, newline)
      buffer = buffer.slice(newline + (buffer.startsWith('\r\n', newline) ? 2 : 1))
      if (line === '') {
        if (frame.data !== undefined || frame.id !== undefined) yield frame
        frame = {}
        continue
      }
      if (line.startsWith(':')) continue
      const colon = line.indexOf(':')
      const field = colon < 0 ? line : line.slice(0, colon)
      const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '')
      if (field === 'data') frame.data = frame.data === undefined ? value : `${frame.data}\n${value}`
      else if (field === 'id') frame.id = value
    }
  }
}
