import { Type } from '@sinclair/typebox'
import { Timestamp } from '../http/schemas.ts'
import { Transaction } from '../ledger/ledger.schemas.ts'

const Hex = Type.String({ pattern: '^[0-9a-f]{64}$' })
const Position = Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER })

export const FeedQuery = Type.Object({
  after: Type.Optional(Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER, default: 0, description: 'the last position seen' })),
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: 100 })),
  wait: Type.Optional(
    Type.Integer({ minimum: 0, maximum: 30, default: 0, description: 'seconds to wait for an entry when none is there yet' }),
  ),
})

export const Feed = Type.Object({
  entries: Type.Array(Transaction),
  next: Type.Integer({ minimum: 0, description: "the last entry's position, or `after` when there is none" }),
})

export const StreamQuery = Type.Object({
  after: Type.Optional(
    Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER, description: 'the last position seen, as Last-Event-ID' }),
  ),
})

export const StreamHeaders = Type.Object({
  'last-event-id': Type.Optional(Type.String({ pattern: '^(0|[1-9][0-9]{0,15})$' })),
})

export const Checkpoint = Type.Object({
  size: Position,
  root: Hex,
  signed_at: Timestamp,
  signature: Type.String({ description: 'base64 Ed25519 signature of `coffer-checkpoint/v1\\n{size}\\n{root}\\n{signed_at}\\n`' }),
})

export const Key = Type.Object({
  algorithm: Type.Literal('Ed25519'),
  public_key: Type.String({ description: 'base64 of the raw 32-byte public key' }),
})

export const ConsistencyQuery = Type.Object({
  from: Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER }),
  to: Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER }),
})

export const Consistency = Type.Object({ from: Position, to: Position, proof: Type.Array(Hex) })

export const Proof = Type.Object({
  transaction: Transaction,
  leaf_index: Position,
  checkpoint: Checkpoint,
  audit_path: Type.Array(Hex),
})
