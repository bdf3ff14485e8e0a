import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from '@sinclair/typebox'
import { CurrentSession } from '../accounts/accounts.schemas.ts'
import type { Database } from '../db/database.ts'
import { userAuth } from '../http/auth.ts'
import { IdParams, parseId, responses } from '../http/schemas.ts'
import type { AssetCatalogue } from './key-policy.ts'
import * as S from './wallets.schemas.ts'
import * as wallets from './wallets.service.ts'

export interface WalletsRoutesOptions {
  database: Database
  /** The live assets, for the caps of wallet keys (assets live above wallets). */
  assets: AssetCatalogue
}

/**
 * The user-auth wallet routes: the user's wallets (`/user/…`), and the `/wallet` routes (assigned
 * users, ownership, wallet keys), which act on the session's active wallet. The wallet-auth
 * routes (assets, transactions) are in ledger/; DELETE /wallet is in flows/.
 */
const walletsRoutes: FastifyPluginAsyncTypebox<WalletsRoutesOptions> = async (app, { database, assets }) => {
  const { db } = database
  const user = { onRequest: app.requireUser }

  // The user's wallets (listed with the account routes in the API reference).
  {
    const tags = ['accounts']
    app.put(
      '/user/wallet',
      {
        ...user,
        schema: {
          summary: 'Choose your primary wallet',
          description: 'Makes a live wallet the caller owns their primary wallet: the one transfers to their username ' + 'reach.',
          tags,
          body: S.WalletIdBody,
          response: responses(200, S.PrimaryWalletResult),
        },
      },
      async (request) => wallets.setPrimaryWallet(db, userAuth(request), request.body.wallet_id),
    )

    app.get(
      '/user/wallets',
      {
        ...user,
        schema: {
          summary: 'Wallets you own',
          description: 'The live wallets the caller owns, each with its webhook when one is set.',
          tags,
          response: responses(200, Type.Array(S.OwnedWallet)),
        },
      },
      async (request) => wallets.listOwnedWallets(db, userAuth(request).userId),
    )

    app.get(
      '/user/assigned_wallets',
      {
        ...user,
        schema: {
          summary: 'Wallets you are assigned to',
          description: 'The live wallets of other owners the caller may use.',
          tags,
          response: responses(200, Type.Array(S.WalletSummary)),
        },
      },
      async (request) => wallets.listAssignedWallets(db, userAuth(request).userId),
    )

    app.post(
      '/user/wallets',
      {
        ...user,
        schema: {
          summary: 'Create a wallet',
          description:
            'A new wallet owned by the caller, at the given address (3-24 lowercase letters) or a random one. ' +
            'Addresses are never reused.',
          tags,
          body: S.NewWalletBody,
          response: responses(201, S.WalletSummary),
        },
      },
      async (request, reply) => {
        const wallet = await wallets.createWallet(db, userAuth(request).userId, request.body.address)
        return reply.status(201).send(wallet)
      },
    )

    app.put(
      '/user/session/wallet',
      {
        ...user,
        schema: {
          summary: 'Switch the active wallet',
          description:
            'The session acts on another wallet the caller owns or is assigned to; answers the session as ' + '`GET /user/session` does.',
          tags,
          body: S.WalletIdBody,
          response: responses(200, CurrentSession),
        },
      },
      async (request) => wallets.setActiveWallet(db, userAuth(request), request.body.wallet_id),
    )
  }

  const tags = ['wallet']

  app.post(
    '/wallet/users',
    {
      ...user,
      schema: {
        summary: 'Assign a user to the wallet',
        description: 'Gives a user read and write access to the active wallet. Owner only.',
        tags,
        body: S.AssignUserBody,
        response: responses(201, S.AssignedUser),
      },
    },
    async (request, reply) => {
      const assigned = await wallets.assignUser(db, userAuth(request), request.body.username)
      return reply.status(201).send(assigned)
    },
  )

  app.get(
    '/wallet/users',
    {
      ...user,
      schema: {
        summary: 'Users assigned to the wallet',
        description: 'The users assigned to the active wallet (the owner not included).',
        tags,
        response: responses(200, Type.Array(S.AssignedUser)),
      },
    },
    async (request) => wallets.listAssignedUsers(db, userAuth(request)),
  )

  app.delete(
    '/wallet/users/:userid',
    {
      ...user,
      schema: {
        summary: 'Remove a user from the wallet',
        description:
          "Ends the user's access at once: their sessions on the wallet move to their primary wallet and " +
          'the wallet keys they made for it are revoked. Owner only.',
        tags,
        params: IdParams('userid'),
        response: S.NoContent,
      },
    },
    async (request, reply) => {
      await wallets.removeUser(db, userAuth(request), parseId(request.params.userid))
      return reply.status(204).send(null)
    },
  )

  app.put(
    '/wallet/owner',
    {
      ...user,
      schema: {
        summary: 'Hand the wallet to another user',
        description:
          'Makes an assigned user the owner; the caller becomes an assigned user in their place. Owner ' +
          'only; not for a primary wallet.',
        tags,
        body: S.OwnerBody,
        response: responses(200, S.Wallet),
      },
    },
    async (request) => wallets.transferOwnership(db, userAuth(request), request.body.user_id),
  )

  app.post(
    '/wallet/sessions',
    {
      ...user,
      schema: {
        summary: 'Create a wallet key',
        description:
          'A key (`cfw_…`) to the active wallet, for a program, with what it may do (`scopes`) and move ' +
          '(`limits`: `per_transfer` and `per_day` caps by asset name, `recipients` the only wallets it may pay). A route ' +
          'outside its scopes answers K000, a recipient outside `recipients` K002, a transfer over a cap K001. ' +
          'Scopes and limits never change: revoke the key and create another. The token is shown only here; ' +
          'present it as `Authorization: Bearer <token>`.',
        tags,
        body: Type.Optional(S.NewWalletSessionBody),
        response: responses(201, S.NewWalletSession),
      },
    },
    async (request, reply) => {
      const key = await wallets.createWalletSession(db, userAuth(request), request.body ?? {}, assets)
      return reply.status(201).send(key)
    },
  )

  app.get(
    '/wallet/sessions',
    {
      ...user,
      schema: {
        summary: "The wallet's keys",
        description: 'Every key of the active wallet, whoever made it, without tokens.',
        tags,
        response: responses(200, Type.Array(S.WalletSession)),
      },
    },
    async (request) => wallets.listWalletSessions(db, userAuth(request), assets),
  )

  app.delete(
    '/wallet/sessions/:sessionid',
    {
      ...user,
      schema: {
        summary: 'Revoke a wallet key',
        description: 'Revokes one key of the active wallet.',
        tags,
        params: IdParams('sessionid'),
        response: S.NoContent,
      },
    },
    async (request, reply) => {
      await wallets.revokeWalletSession(db, userAuth(request), parseId(request.params.sessionid))
      return reply.status(204).send(null)
    },
  )

  app.delete(
    '/wallet/sessions',
    {
      ...user,
      schema: {
        summary: "Revoke all of the wallet's keys",
        description: 'Revokes every key of the active wallet at once.',
        tags,
        response: S.NoContent,
      },
    },
    async (request, reply) => {
      await wallets.revokeWalletSessions(db, userAuth(request))
      return reply.status(204).send(null)
    },
  )
}

export default walletsRoutes
