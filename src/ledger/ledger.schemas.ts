import { Type } from '@sinclair/typebox'
import { Id, Timestamp } from '../http/schemas.ts'

/** A quantity in a request: a positive safe integer (anything else is G000). */
export const Quantity = Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER })
export const AssetName = Type.String({ pattern: '^[A-Za-z0-9_-]{1,32}$', description: '1-32 letters, digits, "_" or "-"' })
// 1e309 parses as Infinity, which no JSON answer could carry: finite values only.
export const AssetValue = Type.Number({ minimum: 0, maximum: Number.MAX_VALUE, description: 'display valuation per unit' })

export const Asset = Type.Object({ id: Id, name: Type.String(), value: Type.Number() })
export const Holding = Type.Object({ asset: Asset, quantity: Type.Integer() })

export const Transaction = Type.Object(
  {
    id: Id,
    sending_wallet_id: Id,
    receiving_wallet_id: Id,
    sending_wallet_address: Type.String(),
    receiving_wallet_address: Type.String(),
    sending_username: Type.Optional(Type.String()),
    receiving_username: Type.Optional(Type.String()),
    created_at: Timestamp,
    memo: Type.String(),
    assets: Type.Array(Type.Object({ quantity: Type.Integer(), asset: Asset })),
  },
  { description: 'a ledger entry moving one or more assets between two wallets' },
)
