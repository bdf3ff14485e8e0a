/**
 * What a wallet key may do (`docs/keys.md`). Each wallet-auth route declares the one scope it needs
 * in its route config (`config: { scope }`); the guard (`auth.ts`) refuses a key without it (K000),
 * and refuses to register a wallet-auth route that declares none, so no route can forget it.
 */
export const KEY_SCOPES = ['read', 'send', 'hold', 'schedule', 'monitor'] as const
export type KeyScope = (typeof KEY_SCOPES)[number]

/** A key created without `scopes`: what every key could do before scopes existed. */
export const DEFAULT_KEY_SCOPES: readonly KeyScope[] = ['read', 'send', 'hold']

/** A key's limits, assets by id. Each part is absent when the key has none of it. */
export interface KeyLimits {
  /** The key's id: what it moves is counted against its `per_day` caps. */
  keyId: number
  perTransfer?: ReadonlyMap<number, number>
  perDay?: ReadonlyMap<number, number>
  recipients?: ReadonlySet<number>
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The scope a wallet key needs for this route; required on every route guarded by `requireWalletAccess`. */
    scope?: KeyScope
  }
}

export function isKeyScope(value: string): value is KeyScope {
  return (KEY_SCOPES as readonly string[]).includes(value)
}
