import type { Executor, Trx } from '../db/database.ts'
import type { Write } from '../db/dialect.ts'

/** The ledger's types and constants that other folders may use besides its services. */

/** The reserved wallet that issues and takes back units: the first wallet row (migration 0001). */
export const MINT_WALLET_ID = 1

/** The `wallet_id`, which no wallet has, of the metadata rows that index the whole journal. */
export const JOURNAL_SCOPE = 0

/** The largest quantity a holding or a line may reach: JSON numbers are exact up to 2^53-1. */
export const MAX_QUANTITY = Number.MAX_SAFE_INTEGER

export interface Asset {
  id: number
  name: string
  value: number
}

/** One asset of a transfer and how much of it moves. */
export interface Line {
  asset: Asset
  quantity: number
}

/**
 * What a transaction is: a wallet's send (`transfer`), units created or taken back by mint
 * (`issuance`, `burn`), a deleted wallet's holdings moved to its owner (`sweep`), a settled hold
 * (`capture`), a refund or operator's correction of an earlier transaction (`reversal`), or units
 * returned to mint at their expiry (`expiry`).
 */
export const TRANSACTION_KINDS = ['transfer', 'issuance', 'burn', 'sweep', 'capture', 'reversal', 'expiry'] as const
export type TransactionKind = (typeof TRANSACTION_KINDS)[number]

/** A transaction's metadata: string values by key (`ledger.schemas.ts` Metadata says which). */
export type Metadata = Record<string, string>

/** A recorded ledger entry, as the API answers it. */
export interface Transaction {
  id: number
  sending_wallet_id: number
  receiving_wallet_id: number
  sending_wallet_address: string
  receiving_wallet_address: string
  sending_username?: string
  receiving_username?: string
  created_at: string
  memo: string
  assets: { quantity: number; asset: Asset }[]
  kind: TransactionKind
  /** Only on a `reversal`: the id of the transaction it reverses. */
  reverses?: number
  /** Only on a `capture`: the id of the hold it settles. */
  hold_id?: number
  /** Only on the run of a schedule: its id. */
  schedule_id?: number
  /** `{}` when none. */
  metadata: Metadata
  /** The place in the journal (from 1, gap-free, commit order); null until the journal's sequencer gives it one. */
  position: number | null
  /** The journal's hash chained on the previous position's (`journal/encoding.ts`); null until positioned. */
  hash: string | null
}

export type HoldStatus = 'pending' | 'captured' | 'voided' | 'expired'

/** A hold (two-phase transfer), as the API answers it (`holds.service.ts`). */
export interface Hold {
  id: number
  status: HoldStatus
  sending_wallet_id: number
  receiving_wallet_id: number
  sending_wallet_address: string
  receiving_wallet_address: string
  sending_username?: string
  receiving_username?: string
  memo: string
  metadata: Record<string, string>
  assets: { quantity: number; asset: Asset }[]
  created_at: string
  expires_at: string
  settled_at: string | null
  transaction_id: number | null
}

export type HoldEventType = 'hold.created' | 'hold.captured' | 'hold.voided' | 'hold.expired'

export interface WalletLabel {
  address: string
  /** Present when the wallet is some user's primary wallet. */
  username?: string
}

/** Case-insensitive, then exact; sorted in process, as the storages' collations differ. */
export function compareAssetNames(a: string, b: string): number {
  const x = a.toLowerCase()
  const y = b.toLowerCase()
  if (x !== y) return x < y ? -1 : 1
  return a < b ? -1 : a > b ? 1 : 0
}

/** The outbox the ledger is handed (it never imports events), written in the transfer's own transaction. */
export interface EventWriter {
  /** The deliveries of these transactions' events (their events are derived from their rows, `events/derived-events.ts`). */
  eventWrites(executor: Executor, transactions: Transaction[]): Write[]
  /** The statements that record these hold events (the Hold as it is after each), a reserved slot of the transactions' ids each. */
  holdEventWrites(executor: Executor, events: { type: HoldEventType; hold: Hold }[], slots: number[]): Write[]
  /** Records events that carry their own data (a schedule's, a monitor's), with their webhook deliveries, in the caller's transaction. */
  recordEvents(executor: Executor, events: WalletEvent[]): Promise<void>
  /**
   * Told, inside the transaction of every batch of moves and after its writes, each change of a
   * holding in the order of the moves (balance monitors, `monitors/`); absent when nothing watches.
   */
  watchBalances?: (trx: Trx, changes: HoldingChange[]) => Promise<void>
}

/** An event for one wallet whose `data` is its own (not a transaction's or a hold's). */
export interface WalletEvent {
  walletId: number
  type: string
  createdAt: string
  data: unknown
}

/** A holding as balance monitors see it: what it owns, what pending holds reserve, its credit limit. */
export interface HoldingState {
  quantity: number
  held: number
  creditLimit: number
}

/** What one move (or a change of its credit limit) did to one holding, before and after. */
export interface HoldingChange {
  walletId: number
  asset: Asset
  before: HoldingState
  after: HoldingState
}

/** A key another request stored first: the batch runs again without these moves, which answer its response. */
export class IdempotencyConflict extends Error {
  constructor(readonly indexes: number[]) {
    super('an Idempotency-Key of this batch was stored by another request')
  }
}
