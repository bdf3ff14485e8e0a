import http, { type IncomingHttpHeaders } from 'node:http'
import type { AddressInfo } from 'node:net'

/** A webhook receiver on 127.0.0.1 for the events tests: records every request, answers as told. */

export interface Received {
  path: string
  headers: IncomingHttpHeaders
  body: string
  at: number
}

export type Answer =
  | { status: number; body?: string; headers?: Record<string, string>; delayMs?: number }
  | { hang: true }
  | { reset: true }
  | { hugeBody: number }

export type Behaviour = (request: Received, index: number) => Answer

export interface Receiver {
  url: string
  requests: Received[]
  /** Requests received and not answered yet (a hanging one stays open until the sender gives up). */
  open(): number
  /** The most requests that were ever open at once. */
  maxOpen(): number
  behave(behaviour: Behaviour): void
  /** Resolves with the requests once at least `count` arrived; rejects after `timeoutMs`. */
  waitFor(count: number, timeoutMs?: number): Promise<Received[]>
  /**
   * Resolves once `count` distinct events (by `webhook-id`) arrived, with the first request of
   * each: delivery is at least once, so an attempt retried after a slow first one may arrive twice.
   */
  waitForEvents(count: number, timeoutMs?: number): Promise<Received[]>
  close(): Promise<void>
}

/** The first request of each event, by its `webhook-id`, in arrival order. */
function firstOfEach(requests: Received[]): Received[] {
  const seen = new Set<unknown>()
  return requests.filter((request) => {
    const id = request.headers['webhook-id']
    if (seen.has(id)) return false
    seen.add(id)
    return true
  })
}

const ok: Behaviour = () => ({ status: 200, body: 'ok' })

export async function startReceiver(behaviour: Behaviour = ok): Promise<Receiver> {
  const requests: Received[] = []
  let current = behaviour
  let open = 0
  let maxOpen = 0
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    req.on('end', () => {
      const received: Received = {
        path: req.url ?? '/',
        headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8'),
        at: Date.now(),
      }
      requests.push(received)
      open += 1
      maxOpen = Math.max(maxOpen, open)
      res.once('close', () => (open -= 1))
      const answer = current(received, requests.length - 1)
      if ('hang' in answer) return
      if ('reset' in answer) return req.socket.destroy()
      if ('hugeBody' in answer) {
        res.writeHead(200, { 'content-type': 'application/octet-stream' })
        const block = Buffer.alloc(64 * 1024, 120)
        let left = answer.hugeBody
        const pump = () => {
          while (left > 0) {
            left -= block.length
            if (!res.write(block)) return void res.once('drain', pump)
          }
          res.end()
        }
        res.on('error', () => {})
        return pump()
      }
      const send = () => res.writeHead(answer.status, answer.headers ?? {}).end(answer.body ?? '')
      if (answer.delayMs) setTimeout(send, answer.delayMs)
      else send()
    })
  })
  server.on('clientError', () => {})
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    open: () => open,
    maxOpen: () => maxOpen,
    behave(next) {
      current = next
    },
    async waitFor(count, timeoutMs = 5_000) {
      await waitUntil(() => requests.length >= count, timeoutMs, `${count} webhook requests (got ${requests.length})`)
      return requests
    },
    async waitForEvents(count, timeoutMs = 5_000) {
      await waitUntil(
        () => firstOfEach(requests).length >= count,
        timeoutMs,
        `${count} webhook events (got ${firstOfEach(requests).length})`,
      )
      return firstOfEach(requests)
    },
    async close() {
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}

/** Polls `check` until it returns something truthy; throws naming `what` (a text, or a function giving it then) after `timeoutMs`. */
type Falsy = undefined | null | false | 0 | ''

export async function waitUntil<T>(
  check: () => T | Falsy | Promise<T | Falsy>,
  timeoutMs = 5_000,
  what: string | (() => string) = 'condition',
): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await check()
    if (value) return value as T
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${typeof what === 'function' ? what() : what}`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}
