/**
 * The load generator: a separate process (forked by run.ts) that runs one autocannon job per
 * message and answers with its figures. Keeping it out of the service process means the service's
 * CPU time is its own; keeping it alive across scenarios saves a start-up per scenario.
 */
import autocannon from 'autocannon'

export interface LoadJob {
  url: string
  connections: number
  seconds: number
  /**
   * `transfer`: POST /wallet/transactions; `batch`: POST /wallet/transactions/batch of
   * `batchSize` transfers (atomic); `hold`: POST /wallet/holds of 1 gold, then POST
   * /wallet/holds/{id}/capture of it, by the same sender on the same connection (two requests per
   * hold); `get`: one GET path with one token, one of `tokens`, or none.
   */
  kind: 'transfer' | 'batch' | 'hold' | 'get' | 'mixed'
  /** For `mixed`: each connection sends a transfer (as `transfer`), then this many GETs of `path` by one of the senders' tokens. */
  getsPerTransfer?: number
  /** For batches: transfers per request, each of 1 gold to a recipient picked at random. */
  batchSize?: number
  path?: string
  token?: string
  /** For GETs: each request picks one of these tokens. */
  tokens?: string[]
  /**
   * For transfers: who sends (a bearer token, and the sender's name as `recipients` name it) and who
   * receives; each request picks one of each, never the same.
   */
  senders?: { token: string; name: string }[]
  recipients?: string[]
  /** How `recipients` name wallets: 0 usernames (the default), 2 wallet ids. */
  recipientType?: 0 | 2
  /** For transfers: the quantity of gold sent (1); anything JSON, to measure refused requests. */
  quantity?: unknown
  /** For transfers: the asset sent (`gold`). */
  asset?: string
  /** Latencies are kept for 2xx answers and for this status (a scenario refused on purpose). */
  expectStatus?: number
}

export interface LoadResult {
  requestsPerSecond: number
  /** Only 2xx responses, per second. */
  okPerSecond: number
  /** p50 and p99 of 2xx answers (and of `expectStatus` ones). */
  p50: number
  p99: number
  requests: number
  non2xx: number
  socketErrors: number
  timeouts: number
  statusCodes: Record<string, number>
  seconds: number
}

function percentile(sorted: Float64Array, fraction: number): number {
  if (sorted.length === 0) return NaN
  return sorted[Math.min(sorted.length - 1, Math.floor(fraction * sorted.length))]
}

function randomIndex(length: number): number {
  return Math.floor(Math.random() * length)
}

/** A transfer by one of the job's senders to one of its recipients, picked at random. */
function transferRequest(job: LoadJob): autocannon.Request {
  const senders = job.senders ?? []
  const recipients = job.recipients ?? []
  if (senders.length === 0 || recipients.length === 0) throw new Error('a transfer job needs senders and recipients')
  return {
    method: 'POST',
    path: '/wallet/transactions',
    setupRequest: (request) => {
      const sender = senders[randomIndex(senders.length)]
      let recipient = recipients[randomIndex(recipients.length)]
      while (recipient === sender.name) recipient = recipients[randomIndex(recipients.length)]
      request.headers = { ...request.headers, 'content-type': 'application/json', authorization: `Bearer ${sender.token}` }
      request.body = JSON.stringify({
        recipient,
        ...(job.recipientType ? { type: job.recipientType } : {}),
        assets: { [job.asset ?? 'gold']: job.quantity ?? 1 },
      })
      return request
    },
  }
}

/** The middle value (of an even count, the mean of the two middle ones); NaN for none. */
export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  const middle = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
}

export async function runLoad(job: LoadJob): Promise<LoadResult> {
  let requests: autocannon.Request[]
  if (job.kind === 'transfer') {
    requests = [transferRequest(job)]
  } else if (job.kind === 'mixed') {
    const tokens = (job.senders ?? []).map((sender) => sender.token)
    const get: autocannon.Request = {
      method: 'GET',
      path: job.path ?? '/healthz',
      setupRequest: (request) => {
        request.headers = { ...request.headers, authorization: `Bearer ${tokens[randomIndex(tokens.length)]}` }
        return request
      },
    }
    requests = [transferRequest(job), ...Array.from({ length: job.getsPerTransfer ?? 1 }, () => get)]
  } else if (job.kind === 'batch') {
    const senders = job.senders ?? []
    const recipients = job.recipients ?? []
    const size = job.batchSize ?? 100
    if (senders.length === 0 || recipients.length < 2) throw new Error('a batch job needs senders and two recipients or more')
    requests = [
      {
        method: 'POST',
        path: '/wallet/transactions/batch',
        setupRequest: (request) => {
          const sender = senders[randomIndex(senders.length)]
          const transfers = Array.from({ length: size }, () => {
            let recipient = recipients[randomIndex(recipients.length)]
            while (recipient === sender.name) recipient = recipients[randomIndex(recipients.length)]
            return { recipient, ...(job.recipientType ? { type: job.recipientType } : {}), assets: { gold: 1 } }
          })
          request.headers = { ...request.headers, 'content-type': 'application/json', authorization: `Bearer ${sender.token}` }
          request.body = JSON.stringify({ transfers, atomic: true })
          return request
        },
      },
    ]
  } else if (job.kind === 'hold') {
    const senders = job.senders ?? []
    const recipients = job.recipients ?? []
    if (senders.length === 0 || recipients.length < 2) throw new Error('a hold job needs senders and two recipients or more')
    type HoldContext = { sender?: { token: string; name: string }; holdId?: number }
    requests = [
      {
        method: 'POST',
        path: '/wallet/holds',
        setupRequest: (request, context: HoldContext) => {
          const sender = senders[randomIndex(senders.length)]
          let recipient = recipients[randomIndex(recipients.length)]
          while (recipient === sender.name) recipient = recipients[randomIndex(recipients.length)]
          context.sender = sender
          request.headers = { ...request.headers, 'content-type': 'application/json', authorization: `Bearer ${sender.token}` }
          request.body = JSON.stringify({ recipient, assets: { gold: 1 } })
          return request
        },
        onResponse: (status, body, context: HoldContext) => {
          context.holdId = status === 201 ? (JSON.parse(body) as { id: number }).id : undefined
        },
      },
      {
        method: 'POST',
        // A hold refused (none to capture) starts the pair again.
        setupRequest: (request, context: HoldContext) => {
          if (context.holdId === undefined || !context.sender) return undefined as unknown as autocannon.Request
          request.path = `/wallet/holds/${context.holdId}/capture`
          request.headers = { ...request.headers, authorization: `Bearer ${context.sender.token}` }
          return request
        },
      },
    ]
  } else if (job.tokens && job.tokens.length > 0) {
    const tokens = job.tokens
    requests = [
      {
        method: 'GET',
        path: job.path ?? '/healthz',
        setupRequest: (request) => {
          request.headers = { ...request.headers, authorization: `Bearer ${tokens[randomIndex(tokens.length)]}` }
          return request
        },
      },
    ]
  } else {
    requests = [{ method: 'GET', path: job.path ?? '/healthz', headers: job.token ? { authorization: `Bearer ${job.token}` } : {} }]
  }

  // Latencies are kept here at full resolution: autocannon's own histogram rounds to whole milliseconds.
  const latencies: number[] = []
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    const instance = autocannon(
      { url: job.url, connections: job.connections, duration: job.seconds, requests, timeout: 10 },
      (error, done) => (error ? reject(error) : resolve(done)),
    )
    instance.on('response', (_client, statusCode, _bytes, responseTime) => {
      if ((statusCode >= 200 && statusCode < 300) || statusCode === job.expectStatus) latencies.push(responseTime)
    })
  })
  const sorted = Float64Array.from(latencies).sort()
  const statusCodes: Record<string, number> = {}
  for (const [code, { count }] of Object.entries(result.statusCodeStats ?? {})) statusCodes[code] = count ?? 0
  const seconds = result.duration
  return {
    requestsPerSecond: result.requests.total / seconds,
    okPerSecond: result['2xx'] / seconds,
    p50: percentile(sorted, 0.5),
    p99: percentile(sorted, 0.99),
    requests: result.requests.total,
    non2xx: result.non2xx,
    socketErrors: result.errors,
    timeouts: result.timeouts,
    statusCodes,
    seconds,
  }
}

// As a forked child: one job per message, until the parent disconnects.
if (process.send) {
  process.on('message', (message: { id: number; job: LoadJob }) => {
    runLoad(message.job).then(
      (result) => process.send?.({ id: message.id, result }),
      (error: unknown) => process.send?.({ id: message.id, error: error instanceof Error ? error.message : String(error) }),
    )
  })
  process.on('disconnect', () => process.exit(0))
}
