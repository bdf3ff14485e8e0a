import { Type } from '@sinclair/typebox'
import { Id, Password, Timestamp, Username } from '../http/schemas.ts'

export const RegisterBody = Type.Object({ username: Username, password: Password })
export const RegisteredUser = Type.Object({ id: Id, username: Type.String(), primary_wallet_id: Id, wallet_address: Type.String() })

// Any name: login answers U001 for every unknown one, even one no user could have (docs/decisions.md).
export const LoginParams = Type.Object({ username: Type.String({ minLength: 1 }) })
export const LoginBody = Type.Object({
  password: Type.String({ maxLength: 256 }),
  return_token: Type.Optional(Type.Boolean({ default: false })),
})
export const LoginResult = Type.Object({ id: Id, user_id: Id, wallet_id: Id, token: Type.Optional(Type.String()) })

export const UsernameBody = Type.Object({ username: Username })
export const UsernameResult = Type.Object({ id: Id, username: Type.String() })
export const PasswordBody = Type.Object({ password: Password })

export const CurrentSession = Type.Object({
  id: Id,
  user_id: Id,
  username: Type.String(),
  primary_wallet_id: Id,
  wallet_id: Id,
  wallet_user_id: Id,
  wallet_address: Type.String(),
  created_at: Timestamp,
})
export const SessionSummary = Type.Object({
  id: Id,
  user_id: Id,
  wallet_id: Id,
  created_at: Timestamp,
  last_used_at: Timestamp,
  current: Type.Boolean(),
  user_agent: Type.Optional(
    Type.String({ description: 'the `User-Agent` the session signed in with (its first 256 characters); absent when none was sent' }),
  ),
})
