import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from '@sinclair/typebox'
import { walletOf } from '../http/auth.ts'
import { IdParams, parseId, responses } from '../http/schemas.ts'
import { NoContent } from '../wallets/wallets.schemas.ts'
import type { MonitorsService } from './monitors.service.ts'
import { Monitor, MonitorBody } from './monitors.schemas.ts'

/** Balance monitors, wallet auth (`monitors.service.ts`). */
const monitorsRoutes: FastifyPluginAsyncTypebox<{ monitors: MonitorsService }> = async (app, { monitors }) => {
  const tags = ['monitors']
  // Reading needs a key's `read` scope, adding and deleting a monitor its `monitor` scope.
  const read = { onRequest: app.requireWalletAccess, config: { scope: 'read' as const } }
  const change = { onRequest: app.requireWalletAccess, config: { scope: 'monitor' as const } }

  app.post(
    '/wallet/monitors',
    {
      ...change,
      schema: {
        summary: 'Watch a balance',
        description:
          'Tells the wallet (a `balance.crossed` event, to its webhook and stream) when what it can spend of the asset ' +
          '(`quantity - held`) goes below `below`, or above `above` (exactly one of the two), and `balance.restored` when it ' +
          'comes back. `state` says where it stands now. At most 20 per wallet.',
        tags,
        body: MonitorBody,
        response: responses(201, Monitor),
      },
    },
    async (request, reply) => reply.status(201).send(await monitors.create(walletOf(request), request.body)),
  )

  app.get(
    '/wallet/monitors',
    {
      ...read,
      schema: {
        summary: "The wallet's monitors",
        description: 'Every monitor of the wallet, oldest first, with its state.',
        tags,
        response: responses(200, Type.Array(Monitor)),
      },
    },
    async (request) => monitors.list(walletOf(request)),
  )

  app.delete(
    '/wallet/monitors/:id',
    {
      ...change,
      schema: {
        summary: 'Stop watching a balance',
        description: 'Deletes the monitor; no event is sent for it any more.',
        tags,
        params: IdParams('id'),
        response: NoContent,
      },
    },
    async (request, reply) => {
      await monitors.remove(walletOf(request), parseId(request.params.id))
      return reply.status(204).send(null)
    },
  )
}

export default monitorsRoutes
