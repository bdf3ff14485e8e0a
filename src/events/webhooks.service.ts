import type { Config } from '../config.ts'
import type { Db, Executor, Trx } from '../db/database.ts'
import { inTransaction, nowIso } from '../db/dialect.ts'
import type { UserAuth } from '../http/auth.ts'
import { AppError } from '../http/errors.ts'
import { takeWalletTurns } from '../ledger/ledger.service.ts'
import { holdUsableWallet } from '../wallets/wallets.service.ts'
import type { SecretsKey } from '../secrets/secret-box.ts'
import { newWebhookSecret } from './signature.ts'
import { sealWebhookSecret } from './webhook-secrets.ts'
import { AddressNotAllowedError, assertPublicHost, checkWebhookUrlForm } from './ssrf.ts'
import type { DeliveryStatus } from './deliveries.repository.ts'
import * as repo from './webhooks.repository.ts'

/** How long the set-time DNS check may take before the URL is refused. */
const RESOLVE_TIMEOUT_MS = 5_000
/** Attempts listed per delivery (the most recent ones); `attempts` still counts them all. */
const MAX_LISTED_ATTEMPTS = 50

/** The normalized URL; W010 unless an absolute http(s) URL (≤ 512 characters, no credentials) of a public host. */
async function checkWebhookUrl(config: Config, raw: string): Promise<string> {
  const form = checkWebhookUrlForm(raw.trim())
  if ('reason' in form) throw new AppError('W010', form.reason)
  if (!config.webhookAllowPrivate) {
    let timer: NodeJS.Timeout | undefined
    const timeout = new Promise<never>((_resolve, reject) => {
      timer = setTimeout(() => reject(Object.assign(new Error('timeout'), { code: 'ETIMEOUT' })), RESOLVE_TIMEOUT_MS)
    })
    try {
      await Promise.race([assertPublicHost(form.url.hostname), timeout])
    } catch (error) {
      if (error instanceof AddressNotAllowedError) throw new AppError('W010', `${error.message}; webhooks must reach the public internet`)
      throw new AppError('W010', `${form.url.hostname} could not be resolved`)
    } finally {
      clearTimeout(timer)
    }
  }
  const normalized = form.url.toString()
  if (normalized.length > 512) throw new AppError('W010', 'the URL is longer than 512 characters')
  return normalized
}

async function setWebhook(
  db: Db,
  config: Config,
  secretsKey: SecretsKey,
  auth: UserAuth,
  raw: string,
): Promise<{ webhook: string; secret: string }> {
  const url = await checkWebhookUrl(config, raw)
  const secret = newWebhookSecret()
  const now = nowIso()
  const walletId = auth.walletId
  await inTransaction(db, async (trx) => {
    if (!(await holdUsableWallet(trx, auth.userId, walletId)))
      throw new AppError('W000', "your session's active wallet is not available to you")
    // A transfer of the wallet in progress finishes first; one after it finds the webhook.
    await takeWalletTurns(trx, [walletId])
    // Stored sealed under the secrets key: a copy of the database alone cannot sign a delivery.
    await repo.upsertWebhook(trx, { walletId, url, secret: sealWebhookSecret(secretsKey, walletId, secret), createdAt: now })
    await repo.retargetPendingDeliveries(trx, walletId, url, now)
  })
  return { webhook: url, secret }
}

export interface Backlog {
  /** Deliveries waiting for their first attempt or a retry. */
  pending: number
  /** When the oldest of them was queued; null when none is pending. */
  oldest_pending_at: string | null
  /** How long ago that was, in seconds; 0 when none is pending. */
  oldest_pending_age_seconds: number
}

function toBacklog(pending: number, oldest: string | null, now = Date.now()): Backlog {
  return { pending, oldest_pending_at: oldest, oldest_pending_age_seconds: oldest ? Math.max(0, (now - Date.parse(oldest)) / 1000) : 0 }
}

async function findBacklog(db: Executor, walletId: number): Promise<Backlog> {
  const [row] = await repo.findBacklogs(db, walletId)
  return toBacklog(row?.pending ?? 0, row?.oldest ?? null)
}

async function listBacklogs(db: Executor): Promise<(Backlog & { origin: string; wallet_id: number })[]> {
  const now = Date.now()
  return (await repo.findBacklogs(db)).map((row) => ({
    origin: row.origin,
    wallet_id: row.wallet_id,
    ...toBacklog(row.pending, row.oldest, now),
  }))
}

async function getWebhook(
  db: Db,
  walletId: number,
): Promise<{ webhook: string; created_at: string; backlog: Backlog } | { webhook: null }> {
  const hook = await repo.findWebhook(db, walletId)
  return hook ? { webhook: hook.url, created_at: hook.created_at, backlog: await findBacklog(db, walletId) } : { webhook: null }
}

async function removeWebhook(db: Db, walletId: number): Promise<void> {
  await inTransaction(db, (trx) => removeWebhookIn(trx, walletId))
}

/** `removeWebhook` in the caller's transaction, after the wallet's turn, so no move in progress escapes it. */
export async function removeWebhookIn(trx: Trx, walletId: number): Promise<void> {
  await takeWalletTurns(trx, [walletId])
  await repo.deleteWebhook(trx, walletId)
  await repo.cancelPendingDeliveries(trx, walletId, nowIso(), 'webhook removed')
}

async function removeGoneWebhook(db: Db, walletId: number, url: string, withIt: (trx: Trx) => Promise<void>): Promise<boolean> {
  return inTransaction(db, async (trx) => {
    await takeWalletTurns(trx, [walletId])
    await withIt(trx)
    if (!(await repo.deleteWebhook(trx, walletId, url))) return false
    await repo.cancelPendingDeliveries(trx, walletId, nowIso(), 'webhook removed after 410 Gone')
    return true
  })
}

export interface DeliveryView {
  id: number
  event_id: string
  type: string
  url: string
  status: DeliveryStatus
  attempts: number
  next_attempt_at: string | null
  last_status_code: number | null
  last_error: string | null
  created_at: string
  updated_at: string
  attempt_log: { attempted_at: string; status_code: number | null; latency_ms: number; error: string | null }[]
}

export interface DeliveryQuery {
  limit?: number
  offset?: number
  status?: DeliveryStatus
}

type DeliveryRow = Awaited<ReturnType<typeof repo.listDeliveries>>[number]
type AttemptRow = Awaited<ReturnType<typeof repo.listAttempts>>[number]

function toDeliveryView(row: DeliveryRow, attempts: AttemptRow[]): DeliveryView {
  return {
    id: row.id,
    event_id: row.event_id,
    type: row.type,
    url: row.url,
    status: row.status as DeliveryStatus,
    attempts: row.attempts,
    next_attempt_at: row.status === 'pending' ? row.next_attempt_at : null,
    last_status_code: row.last_status_code,
    last_error: row.last_error,
    created_at: row.created_at,
    updated_at: row.updated_at,
    attempt_log: attempts.slice(-MAX_LISTED_ATTEMPTS).map((attempt) => ({
      attempted_at: attempt.attempted_at,
      status_code: attempt.status_code,
      latency_ms: attempt.latency_ms,
      error: attempt.error,
    })),
  }
}

async function withAttempts(db: Executor, rows: DeliveryRow[]): Promise<DeliveryView[]> {
  const attempts = await repo.listAttempts(
    db,
    rows.map((row) => row.id),
  )
  const byDelivery = new Map<number, AttemptRow[]>()
  for (const attempt of attempts) {
    const list = byDelivery.get(attempt.delivery_id) ?? []
    list.push(attempt)
    byDelivery.set(attempt.delivery_id, list)
  }
  return rows.map((row) => toDeliveryView(row, byDelivery.get(row.id) ?? []))
}

async function listDeliveries(db: Db, walletId: number, query: DeliveryQuery): Promise<DeliveryView[]> {
  const rows = await repo.listDeliveries(db, walletId, { limit: query.limit ?? 20, offset: query.offset ?? 0, status: query.status })
  return withAttempts(db, rows)
}

async function retryDelivery(db: Db, walletId: number, deliveryId: number): Promise<DeliveryView> {
  return inTransaction(db, async (trx) => {
    const delivery = await repo.findDelivery(trx, walletId, deliveryId)
    if (!delivery) throw new AppError('G006', `this wallet has no webhook delivery ${deliveryId}`)
    const hook = await repo.findWebhook(trx, walletId)
    if (!hook) throw new AppError('G006', 'no webhook is set on this wallet; set one with PUT /wallet/webhook first')
    await repo.requeueDelivery(trx, deliveryId, hook.url, nowIso())
    const queued = (await repo.findDelivery(trx, walletId, deliveryId)) as DeliveryRow
    const [view] = await withAttempts(trx, [queued])
    return view
  })
}

export interface WebhooksServiceDeps {
  db: Db
  config: Config
  /** Seals the signing secrets at rest. */
  secretsKey: SecretsKey
}

export interface WebhooksService {
  /**
   * PUT /wallet/webhook: sets (or replaces) the active wallet's webhook with a new signing secret,
   * shown only in this answer, and points the deliveries still waiting at it. Throws W010
   * (checkWebhookUrl), and W000 when the caller may no longer use the wallet (`holdUsableWallet`).
   */
  setWebhook(auth: UserAuth, url: string): Promise<{ webhook: string; secret: string }>
  /** GET /wallet/webhook: the URL, when it was set and its backlog, or `{webhook: null}`. The secret is never shown. */
  getWebhook(walletId: number): ReturnType<typeof getWebhook>
  /** DELETE /wallet/webhook: removes it and cancels every waiting delivery. Idempotent. */
  removeWebhook(walletId: number): Promise<void>
  /** After a 410 Gone: removes the webhook unless replaced meanwhile, with `withIt` in the same transaction. */
  removeGoneWebhook(walletId: number, url: string, withIt: (trx: Trx) => Promise<void>): Promise<boolean>
  /** The wallet's webhook backlog: deliveries pending and the age of the oldest (GET /wallet/webhook, the delivery log's headers). */
  findBacklog(walletId: number): Promise<Backlog>
  /** Every webhook's backlog with its origin, for /metrics (`operations/metrics.ts`): only wallets with deliveries pending. */
  listBacklogs(): ReturnType<typeof listBacklogs>
  /** GET /wallet/webhook/deliveries: the wallet's deliveries, newest first, each with its attempts. */
  listDeliveries(walletId: number, query: DeliveryQuery): Promise<DeliveryView[]>
  /**
   * POST /wallet/webhook/deliveries/{id}/retry: makes the delivery due now, whatever its status,
   * to the wallet's current webhook. Returns it as queued. Throws G006 when the wallet has no such
   * delivery (also one of another wallet) or no webhook is set any more.
   */
  retryDelivery(walletId: number, deliveryId: number): Promise<DeliveryView>
}

export function createWebhooksService({ db, config, secretsKey }: WebhooksServiceDeps): WebhooksService {
  return {
    setWebhook: (auth, url) => setWebhook(db, config, secretsKey, auth, url),
    getWebhook: (walletId) => getWebhook(db, walletId),
    removeWebhook: (walletId) => removeWebhook(db, walletId),
    removeGoneWebhook: (walletId, url, withIt) => removeGoneWebhook(db, walletId, url, withIt),
    findBacklog: (walletId) => findBacklog(db, walletId),
    listBacklogs: () => listBacklogs(db),
    listDeliveries: (walletId, query) => listDeliveries(db, walletId, query),
    retryDelivery: (walletId, deliveryId) => retryDelivery(db, walletId, deliveryId),
  }
}
