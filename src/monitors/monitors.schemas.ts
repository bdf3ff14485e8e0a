import { Type } from '@sinclair/typebox'
import { Id, Timestamp } from '../http/schemas.ts'

const Threshold = Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER })

export const MonitorBody = Type.Object({
  asset: Type.String({ minLength: 1, maxLength: 32, description: 'the asset, by name' }),
  below: Type.Optional({ ...Threshold, description: 'tell when what can be spent drops below this' }),
  above: Type.Optional({ ...Threshold, description: 'tell when what can be spent rises above this' }),
})

export const Monitor = Type.Object({
  id: Id,
  asset: Type.String(),
  below: Type.Union([Type.Integer(), Type.Null()]),
  above: Type.Union([Type.Integer(), Type.Null()]),
  state: Type.Union([Type.Literal('normal'), Type.Literal('crossed')]),
  created_at: Timestamp,
})
