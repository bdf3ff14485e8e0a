import { Agent, request, type Dispatcher } from 'undici'
import type { Config } from '../config.ts'
import { webhookHeaders } from './signature.ts'
import { AddressNotAllowedError, guardedLookup, ipLiteral, isLocalName, isPublicAddress } from './ssrf.ts'

/** What one POST came to: the receiver's status (null when it never answered) and the attempt log's error text. */
export interface Outcome {
  statusCode: number | null
  latencyMs: number
  error: string | null
}

/** The attempt log's error for an attempt cut off by the service's shutdown. */
export const INTERRUPTED = 'interrupted: the service was shutting down'

/** The most of a response body that is read (then discarded) so the connection can be reused. */
const MAX_RESPONSE_BYTES = 64 * 1024
/** Shown to receivers; never varies with the deployment. */
const USER_AGENT = 'Coffer-Webhooks/1'

/** 2xx: the event is delivered. */
export function isDelivered(outcome: Outcome): boolean {
  return outcome.statusCode !== null && outcome.statusCode >= 200 && outcome.statusCode < 300
}

/** The receiver is there and coping: it answered, with anything but 5xx or 429. */
export function answered(outcome: Outcome): boolean {
  return outcome.statusCode !== null && outcome.statusCode < 500 && outcome.statusCode !== 429
}

/** Seconds → milliseconds with ±20 % jitter, so retries of many deliveries do not arrive in lockstep. */
export function retryDelayMs(seconds: number, random = Math.random()): number {
  return Math.round(seconds * 1000 * (0.8 + 0.4 * random))
}

/**
 * After `attempts` attempts, the last with `outcome`: delivered (2xx), failed (410, or `schedule`
 * used up), or pending until the next retry.
 */
export function nextState(
  attempts: number,
  outcome: Outcome,
  schedule: readonly number[],
): { status: 'delivered' | 'failed' | 'pending'; nextAttemptAt: string | null } {
  if (isDelivered(outcome)) return { status: 'delivered', nextAttemptAt: null }
  if (outcome.statusCode === 410 || attempts > schedule.length) return { status: 'failed', nextAttemptAt: null }
  return { status: 'pending', nextAttemptAt: new Date(Date.now() + retryDelayMs(schedule[attempts - 1])).toISOString() }
}

/** Signed webhook POSTs over keep-alive pools per origin, every new connection through the guarded lookup. */
export class WebhookSender {
  readonly #agent: Dispatcher
  readonly #timeoutMs: number
  readonly #allowPrivate: boolean
  /** The attempts on the wire, aborted at shutdown. */
  readonly #aborts = new Set<AbortController>()
  #stopping = false

  constructor(config: Pick<Config, 'webhookTimeoutMs' | 'webhookAllowPrivate' | 'webhookOriginConcurrency'>) {
    this.#timeoutMs = config.webhookTimeoutMs
    this.#allowPrivate = config.webhookAllowPrivate
    this.#agent = new Agent({
      connect: { timeout: this.#timeoutMs, ...(this.#allowPrivate ? {} : { lookup: guardedLookup }) },
      headersTimeout: this.#timeoutMs,
      bodyTimeout: this.#timeoutMs,
      connections: config.webhookOriginConcurrency,
      keepAliveTimeout: 4_000,
    })
  }

  /** The shutdown aborted what was on the wire (and aborts anything sent from now on). */
  get stopping(): boolean {
    return this.#stopping
  }

  /** One POST of `body`, signed with `secret`. Never throws: every failure becomes an Outcome with a secret-free error text. */
  async send(url: string, secret: string, eventId: string, body: string): Promise<Outcome> {
    const started = performance.now()
    const elapsed = () => Math.round(performance.now() - started)
    // One controller per attempt, aborted by its timer or by the shutdown: cheaper than a composed `AbortSignal.any`.
    const controller = new AbortController()
    const signal = controller.signal
    const timer = setTimeout(() => controller.abort(), this.#timeoutMs)
    timer.unref()
    if (this.#stopping) controller.abort()
    this.#aborts.add(controller)
    try {
      if (!this.#allowPrivate) checkLiteralHost(new URL(url).hostname)
      const response = await request(url, {
        dispatcher: this.#agent,
        method: 'POST',
        headers: { 'content-type': 'application/json', 'user-agent': USER_AGENT, ...webhookHeaders(secret, eventId, body) },
        body,
        signal,
      })
      const latencyMs = elapsed()
      // The answer is the status; the body is read only so the connection can be reused.
      await response.body.dump({ limit: MAX_RESPONSE_BYTES, signal }).catch(() => {})
      const statusCode = response.statusCode
      let error: string | null = null
      if (statusCode >= 300 && statusCode < 400) error = 'redirects are not followed'
      else if (statusCode === 410) error = 'the receiver answered 410 Gone: webhook removed'
      else if (statusCode < 200 || statusCode >= 300) error = `the receiver answered ${statusCode}`
      return { statusCode, latencyMs, error }
    } catch (error) {
      return { statusCode: null, latencyMs: elapsed(), error: describeFailure(error, this.#timeoutMs, signal) }
    } finally {
      clearTimeout(timer)
      this.#aborts.delete(controller)
    }
  }

  /** Aborts every attempt on the wire, and any sent later. */
  abort(): void {
    this.#stopping = true
    for (const controller of this.#aborts) controller.abort()
  }

  async close(): Promise<void> {
    await this.#agent.destroy().catch(() => {})
  }
}

/** Literal IP hosts never reach the resolver, so they are checked here. */
function checkLiteralHost(hostname: string): void {
  const literal = ipLiteral(hostname)
  if (literal !== undefined && !isPublicAddress(literal)) throw new AddressNotAllowedError(hostname, literal)
  if (literal === undefined && isLocalName(hostname)) throw new AddressNotAllowedError(hostname)
}

function errorCode(error: unknown): string | undefined {
  let current: unknown = error
  for (let depth = 0; depth < 4 && current; depth++) {
    const code = (current as { code?: unknown }).code
    if (typeof code === 'string') return code
    current = (current as { cause?: unknown }).cause
  }
  return undefined
}

/** A short, secret-free text for the attempt log. */
function describeFailure(error: unknown, timeoutMs: number, signal: AbortSignal): string {
  if (error instanceof AddressNotAllowedError) return `refused: ${error.message}`
  const code = errorCode(error)
  if (code === 'ERR_WEBHOOK_ADDRESS_NOT_ALLOWED') return `refused: ${(error as Error).message}`
  if (signal.aborted || code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT' || code === 'UND_ERR_CONNECT_TIMEOUT') {
    return `no answer within ${timeoutMs} ms`
  }
  switch (code) {
    case 'ECONNREFUSED':
      return 'connection refused'
    case 'ECONNRESET':
    case 'UND_ERR_SOCKET':
    case 'EPIPE':
      return 'connection reset by the receiver'
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
    case 'EAI_NONAME':
      return 'host name not found'
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
      return 'host unreachable'
  }
  if (code && /CERT|TLS|SSL/i.test(code)) return `TLS error (${code})`
  const message = error instanceof Error ? error.message : String(error)
  return (code ? `${code}: ${message}` : message).slice(0, 200)
}
