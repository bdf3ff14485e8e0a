import { LRUCache } from 'lru-cache'
import client from 'prom-client'
import type { CommitState } from '../db/commit-state.ts'
import type { PageStamp } from './transactions.repository.ts'

/**
 * History pages answered before, kept in this process's memory with the stamp they were read with
 * (`transactions.repository.ts` PageStamp). An entry is never served on its own say: the service
 * checks its stamp against the database first (`history.service.ts` answerWalletTransactions), so
 * this is a store of bytes that spares building a page, not a source of truth. Bounded by entries
 * and by bytes, the least recently used going first.
 */
export interface CachedPage {
  /** The answer's bytes, as the route sends them. */
  body: Buffer
  more: boolean
  lastId: number | undefined
  stamp: PageStamp
  /**
   * The database's commit state read before the page was built or last confirmed: while the state
   * read now is the same, nothing has been committed since, and the page is served without its
   * stamp check (`history.service.ts`). Undefined when it could not be read.
   */
  state: CommitState | undefined
}

export interface PageCacheLimits {
  maxEntries: number
  maxBytes: number
}

/**
 * 10,000 pages within 32 MiB: a wallet's polled first page for 10,000 wallets, or fewer of larger
 * pages. A ten-transaction page is about 5 KiB.
 */
const DEFAULT_LIMITS: PageCacheLimits = { maxEntries: 10_000, maxBytes: 32 * 1024 * 1024 }

/** What an entry costs besides its body: its key, stamp and the cache's own bookkeeping (an estimate). */
const ENTRY_OVERHEAD = 200

export class PageCache {
  readonly #pages: LRUCache<string, CachedPage>
  /**
   * Lookups by outcome, for /metrics: `unchanged` (served: nothing committed since it was kept),
   * `hit` (served once its stamp matched), `stale` (its stamp no longer matched), `miss`.
   */
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
