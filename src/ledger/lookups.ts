import type { KeyLimits } from '../http/key-scopes.ts'
import { findPrimaryWalletByUsername } from '../accounts/accounts.service.ts'
import type { Executor } from '../db/database.ts'
import { AppError } from '../http/errors.ts'
import { Address, IdString, Username } from '../http/schemas.ts'
import { checkPerTransfer, checkRecipient, perDayCharge } from '../wallets/key-policy.ts'
import { findLiveWalletByAddress, findLiveWalletById, findLiveWalletIds } from '../wallets/wallets.service.ts'
import { findAssetByName } from './assets.repository.ts'
import type { SendRequest } from './idempotency.ts'
import { MAX_QUANTITY, type Asset, type Line } from './ledger.types.ts'
import type { Move } from './moves.ts'

const USERNAME = new RegExp(Username.pattern as string)
const ADDRESS = new RegExp(Address.pattern as string)
const WALLET_ID = new RegExp(IdString.pattern as string)

/** Resolves the recipient of a transfer. Throws U003 (unknown username), W000 (unknown wallet), G000 (a malformed wallet id). */
async function resolveRecipient(db: Executor, recipient: string | number, type: 0 | 1 | 2): Promise<number> {
  const text = String(recipient)
  if (type === 0) {
    const walletId = USERNAME.test(text) ? await findPrimaryWalletByUsername(db, text) : undefined
    if (walletId === undefined) throw new AppError('U003', `no user "${text}"`)
    return walletId
  }
  if (type === 1) {
    const wallet = ADDRESS.test(text) ? await findLiveWalletByAddress(db, text) : undefined
    if (!wallet) throw new AppError('W000', `no wallet at address "${text}"`)
    return wallet.id
  }
  if (!WALLET_ID.test(text) || !Number.isSafeInteger(Number(text))) throw new AppError('G000', 'recipient must be a wallet id')
  const wallet = await findLiveWalletById(db, Number(text))
  if (!wallet) throw new AppError('W000', `no wallet ${text}`)
  return wallet.id
}

/** The recipients and assets of one request (a transfer, a batch, a hold, a refund), each looked up once however often it is named. */
export class Lookups {
  readonly #db: Executor
  readonly #recipients = new Map<string, Promise<number>>()
  readonly #assets = new Map<string, Promise<Asset | undefined>>()
  /** The limits of the wallet key making the request (none for a user session). */
  readonly limits: KeyLimits | undefined

  constructor(db: Executor, limits?: KeyLimits) {
    this.#db = db
    this.limits = limits
  }

  /**
   * Looks up every recipient given by wallet id (type 2) among these requests in one query, ahead
   * of `recipient`, which then answers from it: a batch pays one lookup for all its recipients.
   */
  preloadWalletIds(requests: readonly { recipient: string | number; type?: 0 | 1 | 2 }[]): void {
    const texts = new Map<string, number>()
    for (const { recipient, type } of requests) {
      const text = String(recipient)
      if (type === 2 && WALLET_ID.test(text) && Number.isSafeInteger(Number(text)) && !this.#recipients.has(`2:${text}`))
        texts.set(text, Number(text))
    }
    if (texts.size < 2) return
    const live = findLiveWalletIds(this.#db, [...texts.values()])
    for (const [text, id] of texts)
      this.#recipients.set(
        `2:${text}`,
        live.then((found) => {
          if (!found.has(id)) throw new AppError('W000', `no wallet ${text}`)
          return id
        }),
      )
  }

  /** `resolveRecipient`, once per recipient and type. */
  recipient(recipient: string | number, type: 0 | 1 | 2): Promise<number> {
    const key = `${type}:${String(recipient)}`
    let found = this.#recipients.get(key)
    if (!found) this.#recipients.set(key, (found = resolveRecipient(this.#db, recipient, type)))
    return found
  }

  /** The live asset of this name (case-insensitive), once per name. */
  asset(name: string): Promise<Asset | undefined> {
    const key = name.toLowerCase()
    let found = this.#assets.get(key)
    if (!found) this.#assets.set(key, (found = findAssetByName(this.#db, name)))
    return found
  }
}

/**
 * Resolves asset names to live assets. Throws I001 naming the first unknown one, I003 when one
 * asset's quantities add up past the limit.
 */
export async function resolveLines(lookups: Lookups, requested: Record<string, number>): Promise<Line[]> {
  const names = Object.keys(requested)
  return linesOf(requested, await Promise.all(names.map((name) => lookups.asset(name))))
}

/** `resolveLines` once the assets of `requested`'s names, in its key order, are looked up. */
function linesOf(requested: Record<string, number>, found: (Asset | undefined)[]): Line[] {
  const lines = new Map<number, Line>()
  let index = 0
  for (const name in requested) {
    const asset = found[index++]
    if (!asset) throw new AppError('I001', `no asset named "${name}"`)
    const quantity = (lines.get(asset.id)?.quantity ?? 0) + requested[name]
    if (!Number.isSafeInteger(quantity)) throw new AppError('I003', `the quantity of ${asset.name} exceeds ${MAX_QUANTITY}`)
    lines.set(asset.id, { asset, quantity })
  }
  return [...lines.values()]
}

/**
 * A transfer's request resolved into the move it makes from `walletId`. Throws, in this order:
 * U003/W000/G000 (recipient), W013 (to itself), K002 (not a recipient of the key), I001 (an asset
 * name), I003 (one asset's quantities), K001 (over the key's `per_transfer` cap).
 */
export async function resolveTransfer(lookups: Lookups, walletId: number, request: SendRequest): Promise<Move> {
  // Both lookups at once; their errors still come in the documented order.
  const [recipient, found] = await Promise.allSettled([
    lookups.recipient(request.recipient, request.type ?? 0),
    resolveLines(lookups, request.assets),
  ])
  return transferMove(lookups.limits, walletId, request, recipient, found)
}

/**
 * `resolveTransfer` for each of a batch's requests, in order: every distinct recipient and asset
 * looked up at once (`preloadWalletIds` first), then each move built with no wait of its own.
 */
export async function resolveTransfers(lookups: Lookups, walletId: number, requests: SendRequest[]): Promise<PromiseSettledResult<Move>[]> {
  lookups.preloadWalletIds(requests)
  const pending = new Set<Promise<unknown>>()
  for (const request of requests) {
    pending.add(lookups.recipient(request.recipient, request.type ?? 0))
    for (const name in request.assets) pending.add(lookups.asset(name))
  }
  const waited = [...pending]
  const results = await Promise.allSettled(waited)
  const settled = new Map<Promise<unknown>, PromiseSettledResult<unknown>>(waited.map((promise, i) => [promise, results[i]]))
  const settledOf = <T>(promise: Promise<T>) => settled.get(promise) as PromiseSettledResult<T>
  const assetsOf = (request: SendRequest) => {
    const found: (Asset | undefined)[] = []
    for (const name in request.assets) {
      const asset = settledOf(lookups.asset(name))
      // As `resolveLines`: a failed lookup fails the lines.
      if (asset.status === 'rejected') throw asset.reason
      found.push(asset.value)
    }
    return found
  }
  return requests.map((request) => {
    let lines: PromiseSettledResult<Line[]>
    try {
      lines = { status: 'fulfilled', value: linesOf(request.assets, assetsOf(request)) }
    } catch (reason) {
      lines = { status: 'rejected', reason }
    }
    try {
      const recipient = settledOf(lookups.recipient(request.recipient, request.type ?? 0))
      return { status: 'fulfilled', value: transferMove(lookups.limits, walletId, request, recipient, lines) }
    } catch (reason) {
      return { status: 'rejected', reason }
    }
  })
}

/** The move of `request` from its looked-up recipient and lines, checked in `resolveTransfer`'s order. */
function transferMove(
  limits: KeyLimits | undefined,
  walletId: number,
  request: SendRequest,
  recipient: PromiseSettledResult<number>,
  found: PromiseSettledResult<Line[]>,
): Move {
  if (recipient.status === 'rejected') throw recipient.reason
  if (recipient.value === walletId) throw new AppError('W013')
  checkRecipient(limits, recipient.value)
  if (found.status === 'rejected') throw found.reason
  checkPerTransfer(limits, found.value)
  return {
    from: walletId,
    to: recipient.value,
    lines: found.value,
    memo: request.memo ?? '',
    kind: 'transfer',
    metadata: request.metadata,
    key: perDayCharge(limits),
  }
}
