import { Type, type TSchema } from '@sinclair/typebox'
import { Id, Timestamp } from '../http/schemas.ts'
import { TRANSACTION_KINDS } from './ledger.types.ts'

/** A quantity in a request: a positive safe integer (anything else is G000). */
export const Quantity = Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER })
export const AssetName = Type.String({ pattern: '^[A-Za-z0-9_-]{1,32}$', description: '1-32 letters, digits, "_" or "-"' })
// 1e309 parses as Infinity, which no JSON answer could carry: finite values only.
export const AssetValue = Type.Number({ minimum: 0, maximum: Number.MAX_VALUE, description: 'display valuation per unit' })

/** Metadata keys: checked (`propertyNames`), not dropped as unknown fields are; anything else is G000. */
export const METADATA_KEY = '^[A-Za-z0-9_.-]{1,40}$'
export const METADATA_VALUE_LENGTH = 500
export const Metadata = Type.Record(Type.String(), Type.String({ maxLength: METADATA_VALUE_LENGTH }), {
  maxProperties: 20,
  propertyNames: { pattern: METADATA_KEY },
  description: 'string values by key: at most 20 keys of 1-40 letters, digits, "_", "-" or "."; values at most 500 characters',
})

/** An issuance's `expires_at`: a time a minute to 10 years ahead (the service checks the range, G000). */
export const ExpiresAt = Type.String({
  format: 'date-time',
  description: 'when the issued units expire: at least a minute and at most 10 years ahead',
})

/** Every kind of transaction (`ledger.types.ts` TRANSACTION_KINDS). */
export const Kind = Type.Union(TRANSACTION_KINDS.map((kind) => Type.Literal(kind)))

/** The body of a refund or reversal: every field optional, so no body and `{}` alike move back all that is left. */
export const ReversalBody = Type.Object({
  memo: Type.Optional(Type.String({ maxLength: 64 })),
  assets: Type.Optional(
    Type.Record(Type.String(), Quantity, {
      minProperties: 1,
      maxProperties: 64,
      description: 'asset name → quantity to move back; by default all that is left',
    }),
  ),
  metadata: Type.Optional(Metadata),
})

/** An optional Idempotency-Key header: printable ASCII, space included (HTTP trims it at either end). */
export const IdempotencyHeaders = Type.Object({
  'idempotency-key': Type.Optional(Type.String({ pattern: '^[\\x20-\\x7e]{1,255}$' })),
})

export const Asset = Type.Object({ id: Id, name: Type.String(), value: Type.Number() })

/** The body of a transfer (POST /wallet/transactions); a hold's body is this and more. */
export const SendBody = Type.Object(
  {
    recipient: Type.Union([Type.String({ minLength: 1, maxLength: 64 }), Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER })]),
    type: Type.Optional(
      Type.Union([Type.Literal(0), Type.Literal(1), Type.Literal(2)], { default: 0, description: '0 username, 1 address, 2 wallet id' }),
    ),
    memo: Type.Optional(Type.String({ maxLength: 64 })),
    // Every quantity is checked whatever its key; an unknown name answers I001 later.
    assets: Type.Record(Type.String(), Quantity, { minProperties: 1, maxProperties: 64, description: 'asset name → quantity' }),
    metadata: Type.Optional(Metadata),
  },
  {
    // A username or an address is a string; only a wallet id (type 2) may also be a number.
    if: { required: ['type'], properties: { type: { const: 2 } } },
    else: { properties: { recipient: { type: 'string' } } },
  },
)

/** A transaction or hold id given as a paging cursor (`before`, `after`). */
export const CursorId = Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER })

export const Holding = Type.Object({
  asset: Asset,
  quantity: Type.Integer({
    description: 'everything the wallet owns of the asset, held or not (expired units not counted); below zero when it owes on credit',
  }),
  held: Type.Integer({ description: 'what pending holds reserve of it; `quantity - held + credit_limit` may be spent' }),
  credit_limit: Type.Integer({ description: 'how far below zero the holding may go (0 when none)' }),
  expiring: Type.Array(Type.Object({ quantity: Type.Integer(), expires_at: Timestamp }), {
    description: 'the units of it that have an expiry, soonest first (`[]` when none)',
  }),
})

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
    schedule_id: Type.Optional(Type.Integer({ minimum: 1, description: 'only on the run of a schedule: the id of that schedule' })),
    metadata: Type.Record(Type.String(), Type.String(), { description: '{} when none' }),
    position: Type.Union([Type.Integer({ minimum: 1 }), Type.Null()], {
      description: 'the place in the journal (from 1, gap-free, commit order); null until given, within a second of commit',
    }),
    hash: Type.Union([Type.String({ pattern: '^[0-9a-f]{64}$' }), Type.Null()], {
      description: "hex SHA-256 chained on the previous position's hash (docs/journal.md); null until positioned",
    }),
  },
  { description: 'a ledger entry moving one or more assets between two wallets' },
)

export const HoldStatus = Type.Union([Type.Literal('pending'), Type.Literal('captured'), Type.Literal('voided'), Type.Literal('expired')])

export const Hold = Type.Object(
  {
    id: Id,
    status: HoldStatus,
    sending_wallet_id: Id,
    receiving_wallet_id: Id,
    sending_wallet_address: Type.String(),
    receiving_wallet_address: Type.String(),
    sending_username: Type.Optional(Type.String()),
    receiving_username: Type.Optional(Type.String()),
    memo: Type.String(),
    metadata: Type.Record(Type.String(), Type.String()),
    assets: Type.Array(Type.Object({ quantity: Type.Integer(), asset: Asset }), {
      description: 'what the hold reserves (a partial capture takes less and releases the rest)',
    }),
    created_at: Timestamp,
    expires_at: Timestamp,
    settled_at: Type.Union([Timestamp, Type.Null()], {
      description: 'when it was captured or voided; `expires_at` once it expired; null while pending',
    }),
    transaction_id: Type.Union([Id, Type.Null()], { description: "the capture's transaction" }),
  },
  { description: 'assets reserved in the sending wallet for the recipient until captured, voided or expired' },
)

/** `?dry_run=true` on the four routes that pay (`dry-run.ts`). */
export const DryRunQuery = Type.Object({
  dry_run: Type.Optional(
    Type.Boolean({
      default: false,
      description:
        'true: every check of the request, nothing written (no event, no Idempotency-Key read or stored, nothing counted ' +
        "against the key's caps); 200 with what the request would answer and the paying wallet's holdings after it",
    }),
  ),
})

/** What no dry run can know: a row's id, creation time and journal place. */
const Unknown = Type.Null({ description: 'null in a dry run: known only once recorded' })

/** A Transaction as a dry run answers it. */
export const UnrecordedTransaction = Type.Object(
  { ...Transaction.properties, id: Unknown, created_at: Unknown, position: Unknown, hash: Unknown },
  { description: 'the transaction the request would record; id, created_at, position and hash null' },
)

/** A Hold as a dry run answers it. */
export const UnrecordedHold = Type.Object(
  { ...Hold.properties, id: Unknown, created_at: Unknown },
  { description: 'the hold the request would place, expires_at counted from now; id and created_at null' },
)

/** The 200 of a dry run: what the request would answer, and the holdings of the wallet that pays. */
export function DryRunAnswer<T extends TSchema>(result: T) {
  return Type.Object(
    {
      dry_run: Type.Literal(true),
      result,
      holdings_after: Type.Array(Holding, { description: 'the holdings of the wallet that would pay, as they would be after it' }),
    },
    { description: 'a dry run: nothing was written' },
  )
}
