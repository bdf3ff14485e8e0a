/**
 * The HTTP load's measurements: their ids, labels, and the load job of each.
 * (a)-(h): transfers and history among N traders; the keyed ones: 100 wallets with a key each,
 * sending by key to a wallet id (see `keyed-wallets.ts`).
 */
import type { LoadJob, LoadResult } from './load.ts'
import type { Seeded } from './seed.ts'

export const KEYED_SCENARIOS = ['history100', 'balances', 'transfers', 'history100k'] as const
export type KeyedScenario = (typeof KEYED_SCENARIOS)[number]

export type ScenarioName =
  'e' | 'a' | 'b' | 'c' | 'd100' | 'd100k' | 'batch' | 'hold' | 'invalid' | 'session' | 'unknown' | 'historymixed' | KeyedScenario

/** (a)-(h) in the order a full run measures them. */
export const FIRST_SCENARIOS: ScenarioName[] = ['e', 'a', 'b', 'c', 'd100', 'd100k', 'batch', 'hold']

export interface ScenarioResult extends LoadResult {
  scenario: ScenarioName
  label: string
  /** CPU time per successful request: the service process, the database server (PostgreSQL), the load generator. */
  serviceCpuUs: number
  databaseCpuUs: number
  loadCpuUs: number
  /** Cores' worth of CPU used by other processes on the machine during the run (interference). */
  otherCores: number
}

/** Transfers per request of scenario (f). */
export const BATCH_SIZE = 100

export const LABELS: Record<ScenarioName, string> = {
  e: '(e) GET /healthz (HTTP ceiling)',
  a: '(a) transfers among N wallets',
  b: '(b) hot receiver',
  c: '(c) hot sender',
  d100: '(d) history list, 100 txs',
  d100k: '(d) history list, 100k txs',
  batch: `(f) atomic batches of ${BATCH_SIZE} transfers among N wallets`,
  hold: '(h) holds created, then captured, among N wallets (2 requests per hold)',
  invalid: 'transfer refused by validation (400 G000)',
  session: 'GET /user/session (session lookup, one read)',
  unknown: 'transfer to an unknown username (404 U003)',
  history100: 'by key: history page (limit=10) by key, {wallets} wallets of ~100 txs',
  balances: 'by key: balances (GET /wallet/assets) by key, {wallets} wallets',
  transfers: 'by key: transfers by key to a wallet id, {wallets} wallets',
  history100k: 'by key: history page (limit=10) by key, {wallets} wallets of ~{history} txs',
  historymixed: 'by key, mixed: 1 transfer then 3 history pages (limit=10) per connection, by key, {wallets} wallets (all requests)',
}

/**
 * `--ladder`: requests that each run more of a transfer's path, measured back to back: the HTTP
 * ceiling; a transfer parsed and refused by validation; a session lookup and one read; a
 * transfer whose session, recipient and asset lookups run before it is refused; a transfer.
 */
export const LADDER: ScenarioName[] = ['e', 'invalid', 'session', 'unknown', 'a']

/** The status every answer of a scenario that is refused on purpose should have. */
const EXPECTED_STATUS: Partial<Record<ScenarioName, number>> = { invalid: 400, unknown: 404 }

/** The answers that count for a scenario: 2xx ones, or those with its expected status. */
export function answered(scenario: ScenarioName, result: LoadResult): number {
  const expected = EXPECTED_STATUS[scenario]
  return expected === undefined ? result.requests - result.non2xx : (result.statusCodes[String(expected)] ?? 0)
}

export function jobFor(
  scenario: ScenarioName,
  url: string,
  seeded: Seeded,
  connections: number,
  seconds: number,
  wallets?: number,
): LoadJob {
  const traders = wallets ? seeded.traders.slice(0, wallets) : seeded.traders
  const everyone = traders.map((user) => ({ token: user.token, name: user.username }))
  const names = traders.map((user) => user.username)
  const base = { url, connections, seconds }
  const keys = () => {
    if (!seeded.keyed) throw new Error(`scenario ${scenario} needs the keyed wallets`)
    return seeded.keyed.wallets
  }
  switch (scenario) {
    case 'e':
      return { ...base, kind: 'get', path: '/healthz' }
    case 'a':
      return { ...base, kind: 'transfer', senders: everyone, recipients: names }
    case 'b':
      return { ...base, kind: 'transfer', senders: everyone.slice(1), recipients: [names[0]] }
    case 'c':
      return { ...base, kind: 'transfer', senders: everyone.slice(0, 1), recipients: names.slice(1) }
    case 'batch':
      return { ...base, kind: 'batch', senders: everyone, recipients: names, batchSize: BATCH_SIZE }
    case 'hold':
      return { ...base, kind: 'hold', senders: everyone, recipients: names }
    case 'd100':
      return { ...base, kind: 'get', path: '/wallet/transactions', token: seeded.shortHistory.token }
    case 'd100k':
      return { ...base, kind: 'get', path: '/wallet/transactions', token: seeded.longHistory.token }
    case 'invalid':
      return { ...base, kind: 'transfer', senders: everyone, recipients: names, quantity: 'one', expectStatus: EXPECTED_STATUS.invalid }
    case 'session':
      return { ...base, kind: 'get', path: '/user/session', tokens: everyone.map((sender) => sender.token) }
    case 'unknown':
      return { ...base, kind: 'transfer', senders: everyone, recipients: ['nobody-has-this-name'], expectStatus: EXPECTED_STATUS.unknown }
    case 'transfers': {
      const senders = keys().map((wallet) => ({ token: wallet.key, name: String(wallet.walletId) }))
      return { ...base, kind: 'transfer', senders, recipients: senders.map((sender) => sender.name), recipientType: 2 }
    }
    case 'history100':
    case 'history100k':
      return { ...base, kind: 'get', path: '/wallet/transactions?limit=10', tokens: keys().map((wallet) => wallet.key) }
    case 'historymixed': {
      // History read while transfers commit: every page's commit state has moved.
      const senders = keys().map((wallet) => ({ token: wallet.key, name: String(wallet.walletId) }))
      return {
        ...base,
        kind: 'mixed',
        senders,
        recipients: senders.map((sender) => sender.name),
        recipientType: 2,
        path: '/wallet/transactions?limit=10',
        getsPerTransfer: 3,
      }
    }
    case 'balances':
      return { ...base, kind: 'get', path: '/wallet/assets', tokens: keys().map((wallet) => wallet.key) }
  }
}
