import { LRUCache } from 'lru-cache'
import client from 'prom-client'
import type { CommitState } from '../db/commit-state.ts'
import type { PageStamp } from './transactions.repository.ts'

/**
 * History pages kept in memory with their stamp, never served on their own say: a store of bytes
 * that spares building a page, not a source of truth.
 */
export interface CachedPage {
  /** The answer's bytes, as the route sends them. */
  body: Buffer
  more: boolean
  lastId: number | undefined
  stamp: PageStamp
  /** Read before the page was built or confirmed: while unchanged, the page is served without a check. */
  state: CommitState | undefined
}

export interface PageCacheLimits {
  maxEntries: number
  maxBytes: number
}

/** A polled first page (about 5 KiB) for 10,000 wallets. */
const DEFAULT_LIMITS: PageCacheLimits = { maxEntries: 10_000, maxBytes: 32 * 1024 * 1024 }

/** What an entry costs besides its body: its key, stamp and the cache's own bookkeeping (an estimate). */
const ENTRY_OVERHEAD = 200

export class PageCache {
  readonly #pages: LRUCache<string, CachedPage>
  /** `unchanged` (nothing committed since), `hit` (stamp matched), `stale`, `miss`. */
  readonly lookups = new client.Counter({
    name: 'coffer_history_page_cache_lookups_total',
    help:
      'GET /wallet/transactions pages: served from memory with nothing committed to the database since (unchanged), ' +
      'served after the database confirmed them (hit), built again because the database had changed (stale), or built (miss)',
    labelNames: ['outcome'],
    registers: [],
  })

  constructor(limits: PageCacheLimits = DEFAULT_LIMITS) {
    this.#pages = new LRUCache({
      max: limits.maxEntries,
      maxSize: limits.maxBytes,
      sizeCalculation: (page, key) => page.body.length + page.stamp.ids.length + key.length + ENTRY_OVERHEAD,
    })
  }

  get(key: string): CachedPage | undefined {
    return this.#pages.get(key)
  }

  set(key: string, page: CachedPage): void {
    this.#pages.set(key, page)
  }

  count(outcome: 'unchanged' | 'hit' | 'stale' | 'miss'): void {
    this.lookups.inc({ outcome })
  }

  get size(): number {
    return this.#pages.size
  }

  get bytes(): number {
    return this.#pages.calculatedSize
  }
}
