import { Type } from '@sinclair/typebox'
import { KEY_SCOPES } from '../http/key-scopes.ts'
import { Address, ErrorSchema, Id, Timestamp, Username } from '../http/schemas.ts'

/** Shapes of the wallet routes: the user-auth `/wallet` routes and the `/user` routes about wallets. */

export const NewWalletBody = Type.Object({ address: Type.Optional(Address) })
export const WalletSummary = Type.Object({ id: Id, address: Type.String(), user_id: Id })
export const OwnedWallet = Type.Object({ id: Id, address: Type.String(), user_id: Id, webhook: Type.Optional(Type.String()) })
export const WalletIdBody = Type.Object({ wallet_id: Id })
export const PrimaryWalletResult = Type.Object({ id: Id, primary_wallet_id: Id })

export const AssignUserBody = Type.Object({ username: Username })
export const AssignedUser = Type.Object({ id: Id, username: Type.String() })

export const OwnerBody = Type.Object({ user_id: Id })
export const Wallet = Type.Object({ id: Id, address: Type.String(), user_id: Id })

const Scope = Type.Union(
  KEY_SCOPES.map((scope) => Type.Literal(scope)),
  { description: '`read`, `send`, `hold`, `schedule` or `monitor`' },
)
const Cap = Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER })
const Caps = Type.Record(Type.String({ minLength: 1, maxLength: 32 }), Cap, { description: 'a cap by asset name' })
const Limits = Type.Object(
  {
    per_transfer: Type.Optional(Caps),
    per_day: Type.Optional({ ...Caps, description: 'a cap by asset name on what the key moves or holds over any rolling 24 hours' }),
    recipients: Type.Optional(Type.Array(Id, { minItems: 1, maxItems: 100, description: 'the only wallets the key may pay' })),
  },
  { description: 'what the key may move; each part optional' },
)
const Scopes = Type.Array(Scope, { minItems: 1, maxItems: 16 })
const KeyPolicy = {
  scopes: Scopes,
  limits: Limits,
  used: Type.Record(Type.String(), Type.Integer(), { description: 'what counts against each `per_day` cap now (`{}` without one)' }),
}

export const NewWalletSessionBody = Type.Object({
  name: Type.Optional(Type.String({ maxLength: 32, default: '' })),
  scopes: Type.Optional({ ...Scopes, description: 'what the key may do; absent: `read`, `send`, `hold`' }),
  limits: Type.Optional(Limits),
})
export const NewWalletSession = Type.Object(
  {
    id: Id,
    wallet_id: Id,
    name: Type.String(),
    ...KeyPolicy,
    token: Type.String({ description: 'the wallet key (cfw_…); shown only here' }),
  },
  { description: 'present the token as `Authorization: Bearer <token>` on the wallet routes' },
)
export const WalletSession = Type.Object({
  id: Id,
  wallet_id: Id,
  name: Type.String(),
  created_at: Timestamp,
  last_used_at: Type.Union([Timestamp, Type.Null()], { description: 'null until the key is first used' }),
  ...KeyPolicy,
})

/** A delete: 204 without a body, or an error. */
export const NoContent = { 204: Type.Null({ description: 'done' }), '4xx': ErrorSchema, '5xx': ErrorSchema }
