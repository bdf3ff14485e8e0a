/**
 * What the out-of-process suites share (`crash.ts`, `faults.ts`, `patroni.ts`): the real service as
 * a child process, HTTP calls to it, the `coffer` command, seeding users with funds, a load of
 * retried transfers, and the check that every acknowledged transfer is stored exactly once, with
 * the id it was acknowledged with.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import type { Database } from '../../src/db/database.ts'

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

/** The service (`src/main.ts`) as a child process; its log lines are kept when `keepLog` is set. */
export class Service {
  private child: ChildProcess | undefined
  private exited: Promise<void> = Promise.resolve()
  /** Set when the process ended without being told to (`kill`). */
  diedWith: string | undefined
  readonly log: string[] = []
  readonly url: string

  constructor(
    private readonly env: NodeJS.ProcessEnv,
    readonly port: number,
    private readonly keepLog = false,
  ) {
    this.url = `http://127.0.0.1:${port}`
  }

  async start(): Promise<void> {
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
      env: this.env,
      stdio: ['ignore', this.keepLog ? 'pipe' : 'ignore', 'pipe'],
    })
    let stderr = ''
    child.stderr?.on('data', (chunk: Buffer) => {
      stderr = (stderr + chunk.toString()).slice(-4000)
    })
    let partial = ''
    child.stdout?.on('data', (chunk: Buffer) => {
      const lines = (partial + chunk.toString()).split('\n')
      partial = lines.pop() ?? ''
      this.log.push(...lines)
    })
    this.child = child
    let expected = false
    this.kill = async (signal: NodeJS.Signals = 'SIGKILL') => {
      if (child.exitCode !== null || child.signalCode !== null) return
      expected = true
      child.kill(signal)
      await this.exited
    }
    this.exited = new Promise((resolve) =>
      child.once('exit', (code, signal) => {
        if (!expected) this.diedWith = `exit ${code ?? signal}: ${stderr.slice(-1500)}`
        resolve()
      }),
    )
    const deadline = Date.now() + 60_000
    for (;;) {
      if (child.exitCode !== null) throw new Error(`the service exited at start (${child.exitCode}):\n${stderr}`)
      try {
        const response = await fetch(`${this.url}/readyz`, { signal: AbortSignal.timeout(1000) })
        if (response.ok) return
      } catch {
        // not listening yet
      }
      if (Date.now() > deadline) throw new Error(`the service did not become ready:\n${stderr}`)
      await sleep(50)
    }
  }

  /** Ends the process with `signal` (replaced by `start`). */
  kill: (signal?: NodeJS.Signals) => Promise<void> = async () => {}
}

export interface Answer {
  status: number
  headers: Headers
  body: Record<string, unknown>
}

export async function call(
  url: string,
  init: { method: string; headers?: Record<string, string>; body?: unknown; timeoutMs?: number },
): Promise<Answer> {
  const response = await fetch(url, {
    method: init.method,
    headers: { 'content-type': 'application/json', ...init.headers },
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
    signal: AbortSignal.timeout(init.timeoutMs ?? 15_000),
  })
  const text = await response.text()
  return { status: response.status, headers: response.headers, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} }
}

/** Runs `bin/coffer.js` with `args`; resolves to its exit status and output. */
export async function runCoffer(args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['bin/coffer.js', ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] })
    let output = ''
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()))
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()))
    child.on('exit', (code) => resolve({ code: code ?? 1, output }))
  })
}

export interface SeededUser {
  id: number
  username: string
  walletId: number
  auth: Record<string, string>
}

/** Registers `count` users, creates `asset`, and issues `initial` units of it to each. */
export async function seedUsers(
  url: string,
  adminKey: string,
  options: { tag: string; count: number; asset: string; initial: number },
): Promise<SeededUser[]> {
  const users: SeededUser[] = []
  for (let i = 0; i < options.count; i++) {
    const username = `${options.tag}u${i}`.slice(0, 32)
    const registered = await call(`${url}/users`, { method: 'POST', body: { username, password: 'load test password' } })
    if (registered.status !== 201) throw new Error(`register: ${registered.status} ${JSON.stringify(registered.body)}`)
    const login = await call(`${url}/users/${username}/sessions`, {
      method: 'POST',
      body: { password: 'load test password', return_token: true },
    })
    if (login.status !== 201) throw new Error(`login: ${login.status} ${JSON.stringify(login.body)}`)
    users.push({
      id: registered.body.id as number,
      username,
      walletId: registered.body.primary_wallet_id as number,
      auth: { authorization: `Bearer ${login.body.token}` },
    })
  }
  const admin = { authorization: `Bearer ${adminKey}` }
  const asset = await call(`${url}/assets`, { method: 'POST', headers: admin, body: { name: options.asset, value: 1 } })
  if (asset.status !== 201) throw new Error(`asset: ${asset.status} ${JSON.stringify(asset.body)}`)
  for (const user of users) {
    const issued = await call(`${url}/wallets/${user.walletId}/assets`, {
      method: 'POST',
      headers: admin,
      body: { id: asset.body.id, quantity: options.initial },
    })
    if (issued.status !== 201) throw new Error(`issue: ${issued.status} ${JSON.stringify(issued.body)}`)
  }
  return users
}

/** One transfer of the load: request number → what was sent and, once answered 201, its id. */
export interface Sent {
  transactionId?: number
  from: number
  to: number
  quantity: number
}

/** The n-th transfer of a load: every pair of users in turn, never a user to themself. */
export function transferFor(users: SeededUser[], n: number): { from: SeededUser; to: SeededUser; quantity: number } {
  const count = users.length
  return { from: users[n % count], to: users[((n % count) + 1 + (Math.floor(n / count) % (count - 1))) % count], quantity: 1 + (n % 5) }
}

/** Each user's holding of `asset` through the API equals what the acknowledged transfers say. */
export async function checkHoldings(
  url: string,
  users: SeededUser[],
  sent: Map<number, Sent>,
  asset: string,
  initial: number,
  problems: string[],
): Promise<void> {
  const expected = new Map<number, number>(users.map((user) => [user.walletId, initial]))
  for (const transfer of sent.values()) {
    if (transfer.transactionId === undefined) continue
    expected.set(transfer.from, (expected.get(transfer.from) ?? 0) - transfer.quantity)
    expected.set(transfer.to, (expected.get(transfer.to) ?? 0) + transfer.quantity)
  }
  for (const user of users) {
    const holdings = await call(`${url}/wallet/assets`, { method: 'GET', headers: user.auth })
    if (holdings.status !== 200) {
      problems.push(`reading ${user.username}'s holdings answered ${holdings.status} ${JSON.stringify(holdings.body)}`)
      continue
    }
    const list = holdings.body as unknown as { asset: { name: string }; quantity: number }[]
    const held = list.find((holding) => holding.asset.name === asset)?.quantity ?? 0
    if (held !== expected.get(user.walletId))
      problems.push(`${user.username} holds ${held}, the acknowledged transfers say ${expected.get(user.walletId)}`)
  }
}

/**
 * Straight from the database: every request whose memo is `<memoPrefix><n>` is stored exactly
 * once, with the id it was acknowledged with, and none exists that was never sent. Returns every
 * stored transaction (for further checks) and how many of them belong to the load.
 */
export async function checkExactlyOnce(
  database: Database,
  memoPrefix: string,
  sent: Map<number, Sent>,
  problems: string[],
): Promise<{ rows: { id: number; sending_wallet_id: number; receiving_wallet_id: number }[]; transfers: number }> {
  const rows = await database.db.selectFrom('transactions').select(['id', 'memo', 'sending_wallet_id', 'receiving_wallet_id']).execute()
  const byRequest = new Map<number, number[]>()
  let transfers = 0
  for (const row of rows) {
    if (!row.memo.startsWith(memoPrefix)) continue
    transfers += 1
    const n = Number(row.memo.slice(memoPrefix.length))
    byRequest.set(n, [...(byRequest.get(n) ?? []), row.id])
  }
  for (const [n, transfer] of sent) {
    const ids = byRequest.get(n) ?? []
    if (transfer.transactionId === undefined) problems.push(`request ${n} was never answered`)
    if (ids.length > 1) problems.push(`request ${n} exists ${ids.length} times: transactions ${ids.join(', ')}`)
    if (ids.length === 0) problems.push(`acknowledged request ${n} (transaction ${transfer.transactionId}) is missing`)
    if (ids.length === 1 && ids[0] !== transfer.transactionId)
      problems.push(`request ${n} was acknowledged as ${transfer.transactionId} but stored as ${ids[0]}`)
  }
  for (const n of byRequest.keys()) if (!sent.has(n)) problems.push(`transaction for request ${n} exists though it was never sent`)
  return { rows, transfers }
}

/** One answer to a load's transfer, or the failure to get one. */
export interface Reply {
  /** When it came, ms since the epoch. */
  at: number
  ms: number
  /** 0: no answer (connection refused or reset, or none within the attempt's timeout). */
  status: number
  code?: string
  retryAfter: string | null
}

export interface TransferLoadOptions {
  url: string
  users: SeededUser[]
  asset: string
  /** Names the load's Idempotency-Keys and memos (`<tag> #<n>`). */
  tag: string
  clients: number
  attemptTimeoutMs: number
  /** How long one transfer is retried before it is reported unacknowledged. */
  requestLimitMs?: number
}

/**
 * `clients` clients, each sending one transfer after another and retrying each with its
 * Idempotency-Key until it is acknowledged: after no answer, 503 S001 or 409 G004, the retries the
 * contract allows; any other answer is a problem.
 */
export class TransferLoad {
  readonly sent = new Map<number, Sent>()
  readonly replies: Reply[] = []
  readonly problems: string[] = []
  readonly tag: string
  private next = 0
  private stopping = false
  /** Once set, a request unacknowledged by then is given up on (reported). */
  private giveUpAt = Infinity
  private running: Promise<void>[] = []

  constructor(private readonly options: TransferLoadOptions) {
    this.tag = options.tag
  }

  start(): void {
    this.running = Array.from({ length: this.options.clients }, () => this.client())
  }

  /** Sends nothing new; waits up to `graceMs` for the transfers already sent to be acknowledged. */
  async stop(graceMs = Infinity): Promise<void> {
    this.stopping = true
    this.giveUpAt = Date.now() + graceMs
    await Promise.all(this.running)
  }

  private async client(): Promise<void> {
    while (!this.stopping) await this.send(this.next++)
  }

  private async send(n: number): Promise<void> {
    const { url, users, asset, attemptTimeoutMs, requestLimitMs = 60_000 } = this.options
    const { from, to, quantity } = transferFor(users, n)
    const transfer: Sent = { from: from.walletId, to: to.walletId, quantity }
    this.sent.set(n, transfer)
    const first = Date.now()
    while (Date.now() - first < requestLimitMs && Date.now() < this.giveUpAt) {
      const started = Date.now()
      let reply: Reply
      try {
        const answer = await call(`${url}/wallet/transactions`, {
          method: 'POST',
          headers: { ...from.auth, 'idempotency-key': `${this.tag}-${n}` },
          body: { recipient: to.username, type: 0, memo: `${this.tag} #${n}`, assets: { [asset]: quantity } },
          timeoutMs: attemptTimeoutMs,
        })
        reply = {
          at: Date.now(),
          ms: Date.now() - started,
          status: answer.status,
          code: answer.body.code as string | undefined,
          retryAfter: answer.headers.get('retry-after'),
        }
        if (answer.status === 201) {
          transfer.transactionId = answer.body.id as number
          this.replies.push(reply)
          return
        }
      } catch {
        reply = { at: Date.now(), ms: Date.now() - started, status: 0, retryAfter: null }
      }
      this.replies.push(reply)
      const retried =
        reply.status === 0 || (reply.status === 503 && reply.code === 'S001') || (reply.status === 409 && reply.code === 'G004')
      if (!retried) {
        this.problems.push(`request ${n}: unexpected ${reply.status} ${reply.code ?? ''}`)
        return
      }
      // Sooner than Retry-After, to measure the recovery finely; at once after a lost answer.
      await sleep(reply.status === 503 ? 200 : 50)
    }
    this.problems.push(`request ${n} still unacknowledged after ${((Date.now() - first) / 1000).toFixed(0)} s`)
  }
}

/**
 * A reader following the journal's feed (`GET /admin/journal` with `wait`) from position 0
 * through crashes and faults, as an analytics system would: it resumes after the last position it
 * saw, and notes a problem whenever an entry is not the next position (a gap, a repeat or one
 * behind) or a transaction comes a second time.
 */
export class JournalFollower {
  /** Transaction id → the positions it was seen at. */
  readonly seen = new Map<number, number[]>()
  readonly problems: string[] = []
  last = 0
  reads = 0
  private stopping = false
  private running: Promise<void> = Promise.resolve()

  constructor(
    private readonly url: string,
    private readonly adminKey: string,
  ) {}

  start(): void {
    this.running = this.follow()
  }

  /** Reads on until every id of `ids` was seen (or `limitMs` passed), then what is left, then stops. */
  async finish(ids: Iterable<number>, limitMs = 30_000): Promise<void> {
    const wanted = [...ids]
    const deadline = Date.now() + limitMs
    while (Date.now() < deadline && wanted.some((id) => !this.seen.has(id))) await sleep(100)
    this.stopping = true
    await this.running
    while ((await this.read(0)) > 0);
  }

  /** Every stored transaction was read exactly once, and nothing else was. */
  check(storedIds: Iterable<number>, problems: string[]): void {
    problems.push(...this.problems.slice(0, 20))
    if (this.problems.length > 20) problems.push(`… and ${this.problems.length - 20} more problems of the feed`)
    const stored = new Set(storedIds)
    const missing = [...stored].filter((id) => !this.seen.has(id))
    if (missing.length > 0) problems.push(`the feed never gave ${missing.length} stored transaction(s): ${missing.slice(0, 10).join(', ')}`)
    const unknown = [...this.seen.keys()].filter((id) => !stored.has(id))
    if (unknown.length > 0) problems.push(`the feed gave ${unknown.length} transaction(s) not stored: ${unknown.slice(0, 10).join(', ')}`)
  }

  private async follow(): Promise<void> {
    while (!this.stopping) {
      try {
        await this.read(1)
      } catch {
        // The service is down or its storage is broken: resume after the last position seen.
        await sleep(100)
      }
    }
  }

  /** One page after the last position seen; resolves to how many entries it had. */
  private async read(wait: number): Promise<number> {
    const answer = await call(`${this.url}/admin/journal?after=${this.last}&limit=1000&wait=${wait}`, {
      method: 'GET',
      headers: { authorization: `Bearer ${this.adminKey}` },
      timeoutMs: 10_000,
    })
    if (answer.status !== 200) {
      if (answer.status !== 503) this.problems.push(`the feed answered ${answer.status} ${JSON.stringify(answer.body).slice(0, 200)}`)
      await sleep(100)
      return 0
    }
    this.reads++
    const entries = answer.body.entries as { id: number; position: number; hash: string | null }[]
    for (const entry of entries) {
      if (entry.position !== this.last + 1) this.problems.push(`the feed gave position ${entry.position} right after ${this.last}`)
      if (entry.hash === null) this.problems.push(`position ${entry.position} came without its hash`)
      const positions = this.seen.get(entry.id) ?? []
      if (positions.length > 0)
        this.problems.push(`transaction ${entry.id} came again at position ${entry.position} (before: ${positions.join(', ')})`)
      this.seen.set(entry.id, [...positions, entry.position])
      this.last = Math.max(this.last, entry.position)
    }
    if (answer.body.next !== this.last) this.problems.push(`the feed's next is ${String(answer.body.next)} after position ${this.last}`)
    return entries.length
  }
}
