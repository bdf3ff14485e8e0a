import { Type } from '@sinclair/typebox'
import { Id, Timestamp } from '../http/schemas.ts'
import { Asset, Holding, Kind } from '../ledger/ledger.schemas.ts'

/** Shapes of the operator routes under `/admin`. */

export const OperatorLoginBody = Type.Object({ key: Type.String({ minLength: 1, maxLength: 1024, description: 'the admin key' }) })
export const OperatorSession = Type.Object(
  { expires_at: Timestamp },
  { description: 'the operator session is the `coffer_admin` cookie (HttpOnly, SameSite=Strict), valid 12 hours' },
)

export const Overview = Type.Object({
  users: Type.Integer({ description: 'registered users' }),
  wallets: Type.Integer({ description: 'live user wallets (not mint, not deleted)' }),
  transactions: Type.Integer({ description: 'recorded transactions' }),
  assets: Type.Array(
    Type.Object({
      asset: Asset,
      circulating: Type.Integer({ description: 'what all wallets but mint hold, debts counted against it' }),
      holders: Type.Integer({ description: 'wallets but mint holding a non-zero quantity' }),
      owed: Type.Integer({ description: 'what wallets below zero owe on credit, together' }),
      expiring_30d: Type.Integer({ description: 'units held that expire within 30 days' }),
    }),
  ),
})

export const WalletSearchQuery = Type.Object({
  q: Type.Optional(
    Type.String({ maxLength: 64, description: 'a wallet id, or the start of an address or of the owner’s username (any case)' }),
  ),
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 20 })),
  offset: Type.Optional(Type.Integer({ minimum: 0, maximum: 10_000, default: 0 })),
})

export const AdminWallet = Type.Object({
  id: Id,
  address: Type.String(),
  user_id: Id,
  username: Type.String({ description: 'the owner’s username' }),
  deleted: Type.Boolean(),
})

const UserRef = Type.Object({ id: Id, username: Type.String() })

export const AdminWalletDetail = Type.Object({
  wallet: Type.Object({
    id: Id,
    address: Type.String(),
    user_id: Id,
    username: Type.String({ description: 'the owner’s username' }),
    deleted: Type.Boolean(),
    primary: Type.Boolean({ description: 'the owner’s primary wallet' }),
    created_at: Timestamp,
  }),
  owner: UserRef,
  users: Type.Array(UserRef, { description: 'assigned users' }),
  holdings: Type.Array(Holding),
})

const CursorId = Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER })
export const JournalQuery = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 10 })),
    offset: Type.Optional(Type.Integer({ minimum: 0, maximum: 10_000, default: 0 })),
    before: Type.Optional(CursorId),
    after: Type.Optional(CursorId),
    asset: Type.Optional(Type.String({ minLength: 1, maxLength: 32 })),
    since: Type.Optional(Timestamp),
    until: Type.Optional(Timestamp),
    wallet: Type.Optional(
      Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER, description: 'only transactions of this wallet (either side)' }),
    ),
    direction: Type.Optional(Type.Never({ description: 'refused (G002): the journal has no side' })),
    kind: Type.Optional(Kind),
  },
  { description: 'also `metadata[KEY]=VALUE`, at most 5, all matching exactly' },
)

export const VerifyReport = Type.Object({
  ok: Type.Boolean(),
  transactions: Type.Integer(),
  holdings: Type.Integer(),
  assets: Type.Integer(),
  problems: Type.Array(Type.String(), { description: 'every discrepancy found; empty when ok' }),
})
