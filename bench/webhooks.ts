/**
 * The webhook scenario of the bench (`npm run bench -- webhooks`): receivers on
 * 127.0.0.1 (each port is an origin of its own) that answer after a set delay and note how late
 * each event arrives, and the readings of the service's /metrics the report needs.
 */
import http from 'node:http'
import type { AddressInfo } from 'node:net'

export interface BenchReceiver {
  url: string
  /** Answers every request with 200 after this many milliseconds (changed between phases). */
  delayMs: number
  /** Milliseconds from each event's `created_at` to its arrival here, in arrival order. */
  lags: number[]
  /** Requests received so far. */
  received: number
  /** Requests being answered now (from their arrival until the answer is written), and the most at once. */
  inFlight: number
  maxInFlight: number
  /** With `countEvents`: how many times each event id (the `webhook-id` header) arrived. */
  events?: Map<string, number>
  close(): Promise<void>
}

export interface BenchReceiverOptions {
  /** Count arrivals per event id in `events` (to find duplicates and missing events). */
  countEvents?: boolean
}

export async function startBenchReceiver(delayMs: number, options: BenchReceiverOptions = {}): Promise<BenchReceiver> {
  const receiver: BenchReceiver = {
    url: '',
    delayMs,
    lags: [],
    received: 0,
    inFlight: 0,
    maxInFlight: 0,
    events: options.countEvents ? new Map() : undefined,
    close: async () => {},
  }
  const server = http.createServer((request, response) => {
    receiver.inFlight += 1
    receiver.maxInFlight = Math.max(receiver.maxInFlight, receiver.inFlight)
    let answered = false
    const done = () => {
      if (!answered) receiver.inFlight -= 1
      answered = true
    }
    // Counted out when the answer is written or the connection goes away first.
    response.once('finish', done)
    response.once('close', done)
    const eventId = request.headers['webhook-id']
    if (receiver.events && typeof eventId === 'string') receiver.events.set(eventId, (receiver.events.get(eventId) ?? 0) + 1)
    const chunks: Buffer[] = []
    request.on('data', (chunk: Buffer) => chunks.push(chunk))
    request.on('end', () => {
      const arrived = Date.now()
      receiver.received += 1
      try {
        const createdAt = Date.parse((JSON.parse(Buffer.concat(chunks).toString('utf8')) as { created_at: string }).created_at)
        receiver.lags.push(arrived - createdAt)
      } catch {
        // not an event: not counted
      }
      setTimeout(() => response.writeHead(200).end('ok'), receiver.delayMs)
    })
  })
  server.keepAliveTimeout = 10_000
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  receiver.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  receiver.close = async () => {
    server.closeAllConnections()
    await new Promise<void>((resolve) => server.close(() => resolve()))
  }
  return receiver
}

export function percentile(values: number[], fraction: number): number {
  if (values.length === 0) return NaN
  const sorted = Float64Array.from(values).sort()
  return sorted[Math.min(sorted.length - 1, Math.floor(fraction * sorted.length))]
}

export interface BacklogReading {
  total: number
  /** Age of the oldest pending delivery, in seconds. */
  oldestSeconds: number
  /** Receiving origins with a backlog, and the largest backlog of one of them. */
  origins: number
  largestOrigin: number
  /** This instance's lowest in-flight limit of a busy origin (undefined while none is busy), its attempts in flight, and the worker's rounds so far. */
  lowestLimit: number | undefined
  inFlight: number
  rounds: number
}

export const EMPTY_READING: BacklogReading = {
  total: 0,
  oldestSeconds: 0,
  origins: 0,
  largestOrigin: 0,
  lowestLimit: undefined,
  inFlight: 0,
  rounds: 0,
}

/** The webhook backlog as the service's /metrics shows it (read with the admin key). */
export async function readBacklog(base: string, adminKey: string): Promise<BacklogReading> {
  const text = await (await fetch(`${base}/metrics`, { headers: { authorization: `Bearer ${adminKey}` } })).text()
  const values = new Map<string, number>()
  for (const line of text.split('\n')) {
    const series = /^(\w+) (\S+)$/.exec(line)
    if (series) values.set(series[1], Number(series[2]))
  }
  return {
    total: values.get('coffer_webhook_backlog') ?? 0,
    oldestSeconds: values.get('coffer_webhook_oldest_pending_seconds') ?? 0,
    origins: values.get('coffer_webhook_backlogged_origins') ?? 0,
    largestOrigin: values.get('coffer_webhook_largest_origin_backlog') ?? 0,
    lowestLimit: values.get('coffer_webhook_lowest_origin_limit'),
    inFlight: values.get('coffer_webhook_in_flight') ?? 0,
    rounds: values.get('coffer_webhook_rounds_total') ?? 0,
  }
}

/** Sets (or, with `url` null, removes) the webhook of the wallet whose user session `token` is. */
export async function putWebhook(base: string, token: string, url: string | null): Promise<void> {
  const response = await fetch(`${base}/wallet/webhook`, {
    method: url === null ? 'DELETE' : 'PUT',
    headers: { authorization: `Bearer ${token}`, ...(url === null ? {} : { 'content-type': 'application/json' }) },
    body: url === null ? undefined : JSON.stringify({ webhook: url }),
  })
  if (response.status >= 300)
    throw new Error(`${url === null ? 'DELETE' : 'PUT'} /wallet/webhook answered ${response.status}: ${await response.text()}`)
}

/** Samples the backlog every `everyMs` until `stop()` is called; returns the readings. */
export function sampleBacklog(base: string, adminKey: string, everyMs = 1_000): { stop(): Promise<BacklogReading[]> } {
  const readings: BacklogReading[] = []
  let running = true
  const loop = (async () => {
    while (running) {
      readings.push(await readBacklog(base, adminKey).catch(() => ({ ...EMPTY_READING, total: NaN, oldestSeconds: NaN, rounds: NaN })))
      await new Promise((resolve) => setTimeout(resolve, everyMs))
    }
  })()
  return {
    async stop() {
      running = false
      await loop
      return readings
    },
  }
}

export interface StatementReading {
  /** Statements the server ran (every client, `BEGIN`/`COMMIT` included). */
  calls: number
  /** The delivery worker's statements (`BEGIN` and `COMMIT` not included): on the webhook tables, or taking the claims' lock. */
  webhookCalls: number
  /** The most frequent statements, for the log: calls, then the start of the text. */
  top: { calls: number; ms: number; query: string }[]
  /** Updates of `webhook_deliveries` rows, and how many of them were heap-only (wrote no index entry), as the server's statistics had them. */
  deliveryUpdates: { all: number; heapOnly: number }
}

/**
 * Statements counted by `pg_stat_statements` on the bench's PostgreSQL, when the server was started
 * with it preloaded (`shared_preload_libraries`); undefined otherwise. `reset()` before a phase,
 * `read()` after it.
 */
export async function statementCounter(
  databaseUrl: string,
): Promise<{ reset(): Promise<void>; read(): Promise<StatementReading>; close(): Promise<void> } | undefined> {
  const { default: pg } = await import('pg')
  const client = new pg.Client({ connectionString: databaseUrl })
  await client.connect()
  client.on('error', () => {})
  try {
    await client.query('create extension if not exists pg_stat_statements')
    await client.query('select 1 from pg_stat_statements limit 1')
  } catch {
    await client.end()
    return undefined
  }
  // The server's table statistics are cumulative (and reach it within a second or so): read before and after.
  const updates = async () => {
    const { rows } = await client.query<{ all: string; hot: string }>(
      `select n_tup_upd as all, n_tup_hot_upd as hot from pg_stat_user_tables where relname = 'webhook_deliveries'`,
    )
    return { all: Number(rows[0]?.all ?? 0), heapOnly: Number(rows[0]?.hot ?? 0) }
  }
  let updatesBefore = { all: 0, heapOnly: 0 }
  return {
    async reset() {
      await client.query('select pg_stat_statements_reset()')
      updatesBefore = await updates()
    },
    async read() {
      const { rows } = await client.query<{ calls: string; ms: number; query: string }>(
        `select calls, total_exec_time as ms, query from pg_stat_statements
          where dbid = (select oid from pg_database where datname = current_database()) and query not like '%pg_stat_statements%'
          order by calls desc`,
      )
      let calls = 0
      let webhookCalls = 0
      for (const row of rows) {
        calls += Number(row.calls)
        // The worker's statements: on the webhook tables or taking the claims' lock, but not the
        // transfers' own (their write mentions `holdings` and inserts the deliveries).
        if (/webhook_|pg_advisory_xact_lock\(\$1\)/.test(row.query) && !/holdings/.test(row.query)) webhookCalls += Number(row.calls)
      }
      const updatesAfter = await updates()
      const deliveryUpdates = { all: updatesAfter.all - updatesBefore.all, heapOnly: updatesAfter.heapOnly - updatesBefore.heapOnly }
      return {
        calls,
        webhookCalls,
        deliveryUpdates,
        top: rows
          .slice(0, 25)
          .map((row) => ({ calls: Number(row.calls), ms: Number(row.ms), query: row.query.replace(/\s+/g, ' ').slice(0, 140) })),
      }
    },
    async close() {
      await client.end()
    },
  }
}
