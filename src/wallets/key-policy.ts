import { AppError } from '../http/errors.ts'
import { DEFAULT_KEY_SCOPES, KEY_SCOPES, type KeyLimits, type KeyScope } from '../http/key-scopes.ts'

/**
 * A wallet key's scopes and limits (`docs/keys.md`): checked and stored when the key is created,
 * read back for each request, shown on the key object, and the limit checks a send makes.
 */

/** The limits as a request gives them: caps by asset name, recipients by wallet id. */
export interface LimitsBody {
  per_transfer?: Record<string, number>
  per_day?: Record<string, number>
  recipients?: number[]
}

/** The limit parts a key may have; anything else is refused rather than silently ignored. */
const LIMIT_PARTS = new Set(['per_transfer', 'per_day', 'recipients'])

/** How limits are stored (`wallet_sessions.limits`): caps by asset id, so a renamed asset keeps them. */
interface StoredLimits {
  per_transfer?: Record<string, number>
  per_day?: Record<string, number>
  recipients?: number[]
}

/** The catalogue of live assets, handed in by the app (assets live above wallets). */
export type AssetCatalogue = () => Promise<{ id: number; name: string }[]>

/** Scopes in their fixed order, without repeats. */
export function normalScopes(scopes: readonly KeyScope[] | undefined): KeyScope[] {
  if (scopes === undefined) return [...DEFAULT_KEY_SCOPES]
  return KEY_SCOPES.filter((scope) => scopes.includes(scope))
}

/**
 * The limits to store, or null for none. Throws G000 for an unknown part, I001 for a cap on an
 * unknown asset, W000 for a recipient that is not a live wallet (`liveWallets` answers which are).
 */
export async function limitsToStore(
  limits: LimitsBody | undefined,
  assets: AssetCatalogue,
  liveWallets: (ids: number[]) => Promise<Set<number>>,
): Promise<string | null> {
  if (limits === undefined) return null
  for (const part of Object.keys(limits)) if (!LIMIT_PARTS.has(part)) throw new AppError('G000', `limits has no part "${part}"`)
  const stored: StoredLimits = {}
  const byName = new Map<string, number>()
  if (Object.keys(limits.per_transfer ?? {}).length + Object.keys(limits.per_day ?? {}).length > 0)
    for (const asset of await assets()) byName.set(asset.name.toLowerCase(), asset.id)
  for (const part of ['per_transfer', 'per_day'] as const) {
    const caps = Object.entries(limits[part] ?? {})
    if (caps.length === 0) continue
    const byId: Record<string, number> = {}
    for (const [name, cap] of caps) {
      const id = byName.get(name.toLowerCase())
      if (id === undefined) throw new AppError('I001', `limits.${part}: no asset named "${name}"`)
      byId[id] = cap
    }
    stored[part] = byId
  }
  if (limits.recipients !== undefined) {
    const recipients = [...new Set(limits.recipients)]
    const live = await liveWallets(recipients)
    const missing = recipients.find((id) => !live.has(id))
    if (missing !== undefined) throw new AppError('W000', `limits.recipients: no wallet ${missing}`)
    stored.recipients = recipients
  }
  return Object.keys(stored).length === 0 ? null : JSON.stringify(stored)
}

/** The stored scopes and limits as the guard and the send checks use them. */
export function readPolicy(keyId: number, scopes: string, limits: string | null): { scopes: KeyScope[]; limits: KeyLimits | undefined } {
  return {
    scopes: scopes.split(',') as KeyScope[],
    limits: limits === null ? undefined : readLimits(keyId, JSON.parse(limits) as StoredLimits),
  }
}

function readLimits(keyId: number, stored: StoredLimits): KeyLimits {
  const asMap = (caps: Record<string, number> | undefined) =>
    caps === undefined ? undefined : new Map(Object.entries(caps).map(([id, cap]) => [Number(id), cap]))
  return {
    keyId,
    perTransfer: asMap(stored.per_transfer),
    perDay: asMap(stored.per_day),
    recipients: stored.recipients === undefined ? undefined : new Set(stored.recipients),
  }
}

/**
 * A key row as the key object shows it: scopes, limits with current asset names (`{}` without), and
 * `used`, what counts against each `per_day` cap now (`usage`, by asset id; none counted is 0).
 */
export function describeKey<T extends { scopes: string; limits: string | null }>(
  key: T,
  names: ReadonlyMap<number, string>,
  usage: ReadonlyMap<number, { used: number }> | undefined,
): Omit<T, 'scopes' | 'limits'> & { scopes: KeyScope[]; limits: LimitsBody; used: Record<string, number> } {
  const { scopes, limits, ...rest } = key
  const shown: LimitsBody = {}
  const used: Record<string, number> = {}
  if (limits !== null) {
    const stored = JSON.parse(limits) as StoredLimits
    for (const part of ['per_transfer', 'per_day'] as const) {
      const caps = stored[part]
      if (caps === undefined) continue
      const named: Record<string, number> = {}
      // A deleted asset can be sent no more; its cap is not shown.
      for (const [id, cap] of Object.entries(caps)) {
        const name = names.get(Number(id))
        if (name === undefined) continue
        named[name] = cap
        if (part === 'per_day') used[name] = usage?.get(Number(id))?.used ?? 0
      }
      shown[part] = named
    }
    if (stored.recipients !== undefined) shown.recipients = stored.recipients
  }
  return { ...rest, scopes: scopes.split(',') as KeyScope[], limits: shown, used }
}

/** What a move through a key with `per_day` caps is charged to; undefined for any other caller. */
export function perDayCharge(limits: KeyLimits | undefined): KeyCharge | undefined {
  return limits?.perDay === undefined ? undefined : { keyId: limits.keyId, perDay: limits.perDay }
}

/** A key's `per_day` caps, by asset id, that a move counts against (`ledger/moves.ts`). */
export interface KeyCharge {
  keyId: number
  perDay: ReadonlyMap<number, number>
}

/** Throws K002 when a key with `recipients` would pay a wallet outside them. */
export function checkRecipient(limits: KeyLimits | undefined, walletId: number): void {
  if (limits?.recipients !== undefined && !limits.recipients.has(walletId))
    throw new AppError('K002', `this key may not pay wallet ${walletId}`)
}

/** Throws K001 naming the `per_transfer` cap when one move (a transfer, batch member, hold or refund) exceeds it. */
export function checkPerTransfer(
  limits: KeyLimits | undefined,
  lines: readonly { asset: { id: number; name: string }; quantity: number }[],
): void {
  const caps = limits?.perTransfer
  if (caps === undefined) return
  for (const { asset, quantity } of lines) {
    const cap = caps.get(asset.id)
    if (cap !== undefined && quantity > cap)
      throw new AppError('K001', `per_transfer cap of ${asset.name} is ${cap}, ${quantity} requested`)
  }
}
