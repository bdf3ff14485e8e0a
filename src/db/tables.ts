import type { Generated, Selectable } from 'kysely'

/**
 * Row types of every table. Timestamps are ISO 8601 UTC strings with milliseconds on both
 * dialects, so they sort as text and travel to the API unchanged.
 */

export interface UsersTable {
  id: Generated<number>
  username: string
  /** Lower-cased username: uniqueness is case-insensitive. */
  username_key: string
  password_hash: string
  primary_wallet_id: number | null
  created_at: string
}

export interface UserSessionsTable {
  id: Generated<number>
  user_id: number
  /** The session's active wallet. */
  wallet_id: number
  token_hash: string
  created_at: string
  last_used_at: string
  expires_at: string
  /** The `User-Agent` it signed in with (at most 256 characters); null when none was sent. */
  user_agent: string | null
}

export interface WalletsTable {
  id: Generated<number>
  address: string
  /** Owner; null only for the reserved `mint` wallet. */
  user_id: number | null
  created_at: string
  deleted_at: string | null
}

export interface WalletUsersTable {
  wallet_id: number
  user_id: number
  created_at: string
}

export interface WalletSessionsTable {
  id: Generated<number>
  wallet_id: number
  /** The user who created the key; removing that user from the wallet revokes it. */
  user_id: number
  name: string
  token_hash: string
  created_at: string
  last_used_at: string | null
  /** The key's scopes, comma-separated (`wallets/key-policy.ts`). */
  scopes: Generated<string>
  /** The key's limits as JSON, assets by id; null without limits. */
  limits: string | null
}

/** What a wallet key with a `per_day` cap moved or holds (migration 0017). */
export interface KeyUsesTable {
  id: Generated<number>
  key_id: number
  asset_id: number
  quantity: number
  created_at: string
  /** A hold's use: it counts what the hold reserves or captured. */
  hold_id: number | null
  /** A use without a hold: the key's running total of such uses of the asset, modulo 2^53 (migration 0027). */
  running: number | null
}

export interface AssetsTable {
  id: Generated<number>
  name: string
  name_key: string
  value: number
  created_at: string
  deleted_at: string | null
  /** 1 once the asset has had an issuance with `expires_at` (migration 0023). */
  expiring: Generated<number>
}

export interface HoldingsTable {
  wallet_id: number
  asset_id: number
  quantity: number
  /** What pending holds reserve of `quantity` (those past their expiry included until the expiry job settles them). */
  held: Generated<number>
  /** How far below zero the holding may go (migration 0018); 0 without credit. */
  credit_limit: Generated<number>
  /** 1 once the holding has had units with an expiry: only such holdings have `lots` (migration 0023). */
  dated: Generated<number>
}

/** Every credit limit ever set (migration 0018): `coffer verify` checks each transaction against the one in force. */
export interface CreditLimitsTable {
  id: Generated<number>
  wallet_id: number
  asset_id: number
  credit_limit: number
  set_at: string
  /** The last transaction id drawn when it was set: later transactions of the wallet committed under it. */
  after_transaction: number
}

/** A dated holding's units that expire at one instant, and what pending holds reserve of them. */
export interface LotsTable {
  wallet_id: number
  asset_id: number
  expires_at: string
  quantity: number
  held: Generated<number>
}

/** The units with an expiry that a transaction moved (`transaction_lots`) or a hold reserved (`hold_lots`). */
export interface TransactionLotsTable {
  transaction_id: number
  asset_id: number
  expires_at: string
  quantity: number
}

export interface HoldLotsTable {
  hold_id: number
  asset_id: number
  expires_at: string
  quantity: number
}

/** A hold (`ledger/holds.service.ts`): reserved in the sending wallet until captured, voided or expired. */
export interface HoldsTable {
  id: Generated<number>
  sending_wallet_id: number
  receiving_wallet_id: number
  memo: string
  /** JSON object of strings. */
  metadata: string
  /** pending | captured | voided | expired; a pending row past `expires_at` reads as expired. */
  status: string
  created_at: string
  expires_at: string
  settled_at: string | null
  /** The capture's transaction. */
  transaction_id: number | null
}

export interface HoldAssetsTable {
  hold_id: number
  asset_id: number
  quantity: number
}

/** PostgreSQL also has `journal_xid` (migration 0040), its writer's transaction id, set by its default and read by the journal only. */
export interface TransactionsTable {
  id: Generated<number>
  sending_wallet_id: number
  receiving_wallet_id: number
  memo: string
  created_at: string
  /**
   * The transaction as answered (JSON), its events' `data`; null once the retention job pruned its
   * events (and for rows the bench writes directly).
   */
  body: string | null
  /** `ledger/ledger.types.ts` TransactionKind (migration 0008). */
  kind: string
  /** A reversal's original. */
  reverses: number | null
  /** A capture's hold. */
  hold_id: number | null
  /** The metadata object as JSON; null when it is empty. */
  metadata: string | null
  /** The schedule whose run recorded it (migration 0021). */
  schedule_id: number | null
}

/** One metadata key of a transaction, for filtering: a row per side's wallet and one for the journal (`wallet_id` 0). */
export interface TransactionMetadataTable {
  wallet_id: number
  key: string
  value: string
  transaction_id: number
}

export interface TransactionAssetsTable {
  transaction_id: number
  asset_id: number
  quantity: number
}

/** A holding as it stood right after each move that changed it (migration 0010): balances in time. */
export interface RunningBalancesTable {
  wallet_id: number
  asset_id: number
  /** The transaction's time. */
  created_at: string
  transaction_id: number
  quantity: number
}

export interface IdempotencyKeysTable {
  wallet_id: number
  key: string
  request_hash: string
  status_code: number
  response_body: string
  created_at: string
}

export interface WebhooksTable {
  wallet_id: number
  url: string
  /** The URL's origin (`scheme://host:port`): deliveries are queued, limited and backed off per origin. */
  origin: Generated<string>
  /** The `whsec_` signing secret, sealed under the secrets key (`secrets/secret-box.ts`). */
  secret: string
  created_at: string
}

export interface EventsTable {
  /** Sequence number: the SSE event id, increasing per database. */
  id: Generated<number>
  /** Public id, `evt_…`, stable across webhook retries. */
  event_id: string
  wallet_id: number
  type: string
  /** The transaction of a `transaction.*` event; null for a `hold.*` event. */
  transaction_id: number | null
  /** The event's time; the payload is composed from these columns and the transaction's body. */
  created_at: string
  /** A `hold.*` event's data: the Hold as it was at the event (JSON). */
  body: string | null
}

export interface WebhookDeliveriesTable {
  id: Generated<number>
  event_id: number
  wallet_id: number
  url: string
  /** pending | delivered | failed | cancelled */
  status: string
  attempts: number
  next_attempt_at: string | null
  lease_until: string | null
  last_status_code: number | null
  last_error: string | null
  created_at: string
  updated_at: string
}

/** A delivery worker's attempts in flight at one origin (migration 0014): the per-origin limit across instances. */
export interface WebhookLeaseCountsTable {
  instance: string
  origin: string
  leased: number
  lease_until: string
}

export interface WebhookAttemptsTable {
  id: Generated<number>
  delivery_id: number
  attempted_at: string
  status_code: number | null
  latency_ms: number
  error: string | null
}

/** Operator sessions of the console (`POST /admin/sessions`), keyed by the SHA-256 of their token. */
export interface OperatorSessionsTable {
  token_hash: string
  created_at: string
  expires_at: string
}

/** A scheduled or recurring transfer (migration 0020, `schedules/`). */
export interface SchedulesTable {
  id: Generated<number>
  wallet_id: number
  /** The wallet key that created it, when one did. */
  key_id: number | null
  /** The transfer's body as given (JSON). */
  request: string
  start_at: string
  every: string | null
  count: number | null
  end_at: string | null
  time_zone: string
  status: string
  /** Index of the next occurrence to run (0 for `start_at`). */
  next_occurrence: number
  /** That occurrence's instant; null once finished or cancelled. */
  next_run_at: string | null
  runs: number
  failures: number
  refusals_in_a_row: number
  /** `{at, transaction_id, error}` as JSON, null before the first run. */
  last_run: string | null
  created_at: string
  updated_at: string
}

/** One occurrence of a schedule that ran, written with its transfer: its key makes the run happen once. */
export interface ScheduleRunsTable {
  schedule_id: number
  occurrence: number
  due_at: string
  ran_at: string
  transaction_id: number | null
  /** The refusal's error body (JSON) when it moved nothing. */
  error: string | null
}

/** A balance monitor (migration 0022, `monitors/`). */
export interface MonitorsTable {
  id: Generated<number>
  wallet_id: number
  asset_id: number
  below: number | null
  above: number | null
  state: string
  created_at: string
}

export interface RateLimitHitsTable {
  key: string
  window_start: number
  hits: number
}

/** A transaction's place in the journal (migration 0015), written after it committed. */
export interface JournalEntriesTable {
  position: number
  transaction_id: number
  /** Hex SHA-256 chained on the previous position's (`journal/encoding.ts`). */
  hash: string
}

/** A complete subtree of the journal's Merkle tree above the leaves: leaves [idx·2^level, (idx+1)·2^level). */
export interface JournalNodesTable {
  level: number
  idx: number
  hash: string
}

/** The sequencer's state: one row. */
export interface JournalStateTable {
  id: number
  size: number
  /** SQLite: the highest positioned transaction id (ids are commit order there). */
  last_transaction_id: number
  /** The hash of position `size` (64 zeros at 0). */
  head: string
  /** JSON array of [level, hex] of the complete subtrees of the tree of `size` leaves, largest first. */
  frontier: string
  /** PostgreSQL: the next round reads transactions after (`journal_xid`, `id`) = (watermark_xid, watermark_id) (migration 0040). */
  watermark_xid: Generated<number>
  watermark_id: Generated<number>
}

export interface JournalCheckpointsTable {
  size: number
  root: string
  signed_at: string
  signature: string
}

/** Where a transaction's events start being derived from its row (migration 0041); one row. */
export interface EventStateTable {
  id: number
  /** Transactions from this id on have no event rows: their events' ids are 2 × id (sent) and 2 × id + 1 (received). */
  derived_from: number
  /** Eight hex digits in every derived event's public id, so that two stores never give the same one. */
  salt: string
}

/** How far the retention job has cleared transactions' `body` (migration 0032); one row. */
export interface RetentionStateTable {
  id: number
  /** Every transaction up to this id has had its `body` cleared, or needs it still for none of its events. */
  bodies_cleared_to: number
}

export interface DB {
  users: UsersTable
  user_sessions: UserSessionsTable
  wallets: WalletsTable
  wallet_users: WalletUsersTable
  wallet_sessions: WalletSessionsTable
  key_uses: KeyUsesTable
  credit_limits: CreditLimitsTable
  assets: AssetsTable
  holdings: HoldingsTable
  lots: LotsTable
  transaction_lots: TransactionLotsTable
  hold_lots: HoldLotsTable
  holds: HoldsTable
  hold_assets: HoldAssetsTable
  transactions: TransactionsTable
  transaction_assets: TransactionAssetsTable
  transaction_metadata: TransactionMetadataTable
  running_balances: RunningBalancesTable
  idempotency_keys: IdempotencyKeysTable
  webhooks: WebhooksTable
  events: EventsTable
  event_state: EventStateTable
  webhook_deliveries: WebhookDeliveriesTable
  webhook_attempts: WebhookAttemptsTable
  webhook_lease_counts: WebhookLeaseCountsTable
  rate_limit_hits: RateLimitHitsTable
  retention_state: RetentionStateTable
  operator_sessions: OperatorSessionsTable
  journal_entries: JournalEntriesTable
  journal_nodes: JournalNodesTable
  journal_state: JournalStateTable
  journal_checkpoints: JournalCheckpointsTable
  schedules: SchedulesTable
  schedule_runs: ScheduleRunsTable
  monitors: MonitorsTable
}

export type UserRow = Selectable<UsersTable>
export type WalletRow = Selectable<WalletsTable>
export type AssetRow = Selectable<AssetsTable>
