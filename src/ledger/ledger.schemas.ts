import { Type } from '@sinclair/typebox'
import { Id, Timestamp } from '../http/schemas.ts'
import { TRANSACTION_KINDS } from './ledger.types.ts'

/** A quantity in a request: a positive safe integer (anything else is G000). */
export const Quantity = Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER })
export const AssetName = Type.String({ pattern: '^[A-Za-z0-9_-]{1,32}$', description: '1-32 letters, digits, "_" or "-"' })
// 1e309 parses as Infinity, which no JSON answer could carry: finite values only.
export const AssetValue = Type.Number({ minimum: 0, maximum: Number.MAX_VALUE, description: 'display valuation per unit' })

/**
 * Metadata in a request (transfers, holds, batches, refunds, issuance): at most 20 keys of 1-40
 * ASCII letters, digits, `_`, `-` or `.`, each a string of at most 500 characters; anything else
 * is G000. Every key is checked (`propertyNames`), not dropped as an unknown field would be.
 */
export const METADATA_KEY = '^[A-Za-z0-9_.-]{1,40}$'
export const METADATA_VALUE_LENGTH = 500
export const Metadata = Type.Record(Type.String(), Type.String({ maxLength: METADATA_VALUE_LENGTH }), {
  maxProperties: 20,
  propertyNames: { pattern: METADATA_KEY },
  description: 'string values by key: at most 20 keys of 1-40 letters, digits, "_", "-" or "."; values at most 500 characters',
})

/** Every kind of transaction (`ledger.types.ts` TRANSACTION_KINDS). */
export const Kind = Type.Union(TRANSACTION_KINDS.map((kind) => Type.Literal(kind)))

/** The body of a refund or reversal: every field optional, so no body and `{}` alike move back all that is left. */
export const ReversalBody = Type.Object({
  memo: Type.Optional(Type.String({ maxLength: 64 })),
  assets: Type.Optional(Type.Record(Type.String(), Quantity, { minProperties: 1, maxProperties: 64, description: 'asset name → quantity to move back; by default all that is left' })),
  metadata: Type.Optional(Metadata),
})

/** An optional Idempotency-Key header: printable ASCII, space included (HTTP trims it at either end). */
export const IdempotencyHeaders = Type.Object({
  'idempotency-key': Type.Optional(Type.String({ pattern: '^[\\x20-\\x7e]{1,255}$' })),
})

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
    kind: Kind,
    reverses: Type.Optional(Type.Integer({ minimum: 1, description: 'only on a reversal: the id of the transaction it reverses' })),
    hold_id: Type.Optional(Type.Integer({ minimum: 1, description: 'only on a capture: the id of the hold it settles' })),
    metadata: Type.Record(Type.String(), Type.String(), { description: '{} when none' }),
  },
  { description: 'a ledger entry moving one or more assets between two wallets' },
)
