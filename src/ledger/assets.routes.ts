import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from '@sinclair/typebox'
import { AppError } from '../http/errors.ts'
import { Id, IdParams, IdString, parseId, responses } from '../http/schemas.ts'
import {
  Asset,
  AssetName,
  AssetValue,
  ExpiresAt,
  IdempotencyHeaders,
  Metadata,
  Quantity,
  ReversalBody,
  Transaction,
} from './ledger.schemas.ts'
import type { Ledger } from './ledger.service.ts'

export interface AssetsRoutesOptions {
  ledger: Ledger
}

/** The most wallets one issuance request reaches. */
const MAX_ISSUANCE_ENTRIES = 1000

const IssuanceBody = Type.Object({
  asset_id: Id,
  entries: Type.Array(Type.Object({ wallet_id: Id, quantity: Quantity }), {
    minItems: 1,
    maxItems: MAX_ISSUANCE_ENTRIES,
    description: `1-${MAX_ISSUANCE_ENTRIES} wallets and the quantity each receives`,
  }),
  memo: Type.Optional(Type.String({ maxLength: 64, description: 'every transaction\'s memo; "issue" when none' })),
  metadata: Type.Optional(Metadata),
  expires_at: Type.Optional(ExpiresAt),
})

/** 1,000 entries of a wallet id and a quantity (about 60 bytes each). */
const ISSUANCE_BODY_LIMIT = 256 * 1024

/** Asset management and issuance: the admin routes (admin key), and the asset list any caller may read. */
const assetsRoutes: FastifyPluginAsyncTypebox<AssetsRoutesOptions> = async (app, { ledger }) => {
  const { assets } = ledger
  const tags = ['admin']
  const admin = { onRequest: app.requireAdmin }

  app.get(
    '/assets',
    {
      onRequest: app.requireAnyCaller,
      // A wallet key needs `read`, as for the wallet's own holdings.
      config: { scope: 'read' as const },
      schema: {
        summary: 'List assets',
        description: 'Every live asset, for any caller (a wallet key needs the `read` scope).',
        tags,
        response: responses(200, Type.Array(Asset)),
      },
    },
    async () => assets.listAssets(),
  )

  app.post(
    '/assets',
    {
      ...admin,
      schema: {
        summary: 'Create an asset',
        description:
          'A new asset: a name of 1-32 letters, digits, `_` or `-`, unique case-insensitively, and a ' + 'display value per unit.',
        tags,
        body: Type.Object({ name: AssetName, value: AssetValue }),
        response: responses(201, Asset),
      },
    },
    async (request, reply) => {
      const asset = await assets.createAsset(request.body.name, request.body.value)
      return reply.status(201).send(asset)
    },
  )

  app.put(
    '/assets/:id/value',
    {
      ...admin,
      schema: {
        summary: "Change an asset's value",
        description: 'Sets the display value per unit; holdings do not change.',
        tags,
        params: IdParams('id'),
        body: Type.Object({ value: AssetValue }),
        response: responses(200, Asset),
      },
    },
    async (request) => assets.revalueAsset(parseId(request.params.id), request.body.value),
  )

  app.put(
    '/assets/:id/name',
    {
      ...admin,
      schema: {
        summary: 'Rename an asset',
        description: 'Renames the asset; history shows the new name.',
        tags,
        params: IdParams('id'),
        body: Type.Object({ name: AssetName }),
        response: responses(200, Asset),
      },
    },
    async (request) => assets.renameAsset(parseId(request.params.id), request.body.name),
  )

  app.delete(
    '/assets/:id',
    {
      ...admin,
      schema: {
        summary: 'Delete an asset',
        description: 'Deletes an asset nobody holds; its name becomes free and history keeps it.',
        tags,
        params: IdParams('id'),
      },
    },
    async (request, reply) => {
      await assets.deleteAsset(parseId(request.params.id))
      return reply.status(204).send()
    },
  )

  app.post(
    '/wallets/:walletid/assets',
    {
      ...admin,
      schema: {
        summary: 'Issue units into a wallet',
        description: 'Issues new units of an asset from `mint` into a user wallet, recorded as a transaction.',
        tags,
        params: IdParams('walletid'),
        body: Type.Object({
          id: Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER }),
          quantity: Quantity,
          metadata: Type.Optional(Metadata),
          expires_at: Type.Optional(ExpiresAt),
        }),
        response: responses(201, Transaction),
      },
    },
    async (request, reply) => {
      const transaction = await ledger.issuance.issue(
        parseId(request.params.walletid),
        request.body.id,
        request.body.quantity,
        request.body.metadata,
        request.body.expires_at,
      )
      return reply.status(201).send(transaction)
    },
  )

  app.post(
    '/transactions/:id/reversal',
    {
      ...admin,
      schema: {
        summary: 'Reverse a transaction',
        description:
          "The operator's correction: moves back what any transaction but a reversal moved (an issuance " +
          'back to `mint`, a burn out of it again), as a transaction of kind `reversal` naming it in ' +
          '`reverses`: the listed quantities, or by default all that is not yet reversed. All reversals of ' +
          'a transaction together never move back more of an asset than it moved. `Idempotency-Key` as for ' +
          'transfers.',
        tags,
        params: IdParams('id'),
        body: ReversalBody,
        headers: IdempotencyHeaders,
        response: responses(201, Transaction),
      },
    },
    async (request, reply) => {
      const result = await ledger.reversals.reverse(parseId(request.params.id), request.body, request.headers['idempotency-key'])
      if (result.replayed) reply.header('idempotent-replayed', 'true')
      return reply.status(result.status).send(result.body)
    },
  )

  app.post(
    '/issuances',
    {
      ...admin,
      bodyLimit: Math.max(ISSUANCE_BODY_LIMIT, app.initialConfig.bodyLimit ?? 0),
      schema: {
        summary: 'Issue units into many wallets',
        description:
          'Issues new units of one asset from `mint` into up to 1,000 user wallets, all or nothing: one ' +
          'transaction per entry, in order. An entry refused names itself in `detail` (`entries[i]: `).',
        tags,
        body: IssuanceBody,
        response: responses(201, Type.Object({ transactions: Type.Array(Transaction) })),
      },
    },
    async (request, reply) => {
      const transactions = await ledger.issuance.issueToMany(request.body)
      return reply.status(201).send({ transactions })
    },
  )

  app.delete(
    '/wallets/:walletid/assets/:assetid',
    {
      ...admin,
      schema: {
        summary: 'Burn units of a wallet',
        description:
          'Moves `quantity` units (or all that pending holds leave free) back to `mint`, recorded as a ' +
          'transaction; nothing free to burn is a 204 that changes nothing, more than is free `I002`.',
        tags,
        params: Type.Object({ walletid: IdString, assetid: IdString }),
        querystring: Type.Object({ quantity: Type.Optional(Type.String({ pattern: '^[1-9][0-9]{0,15}$' })) }),
      },
    },
    async (request, reply) => {
      const raw = request.query.quantity
      const quantity = raw === undefined ? undefined : Number(raw)
      if (quantity !== undefined && !Number.isSafeInteger(quantity)) throw new AppError('G002', 'quantity must be a positive safe integer')
      await ledger.issuance.burn(parseId(request.params.walletid), parseId(request.params.assetid), quantity)
      return reply.status(204).send()
    },
  )

  app.put(
    '/wallets/:walletid/credit',
    {
      ...admin,
      schema: {
        summary: "Set a wallet's credit limit",
        description:
          "The wallet's holding of the asset may go down to `-limit` (0, the default, removes the credit). " +
          'A limit below what the wallet owes is allowed: it then spends nothing of that asset until it is back above `-limit`.',
        tags,
        params: Type.Object({ walletid: IdString }),
        body: Type.Object({ asset_id: Id, limit: Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER }) }),
        response: responses(200, Type.Object({ wallet_id: Id, asset_id: Id, limit: Type.Integer() })),
      },
    },
    async (request) => ledger.credit.setLimit(parseId(request.params.walletid), request.body.asset_id, request.body.limit),
  )
}

export default assetsRoutes
