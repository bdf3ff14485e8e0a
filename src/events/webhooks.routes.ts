import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from '@sinclair/typebox'
import { userAuth } from '../http/auth.ts'
import { IdParams, parseId, responses } from '../http/schemas.ts'
import type { DeliveryWorker } from './delivery.worker.ts'
import * as S from './events.schemas.ts'
import type { WebhooksService } from './webhooks.service.ts'

/** The webhook routes of the interface (user auth, active wallet) and the delivery log. */
const webhooksRoutes: FastifyPluginAsyncTypebox<{
  webhooks: WebhooksService
  worker: DeliveryWorker
}> = async (app, { webhooks, worker }) => {
  const tags = ['webhooks']
  const user = { onRequest: app.requireUser }

  app.put(
    '/wallet/webhook',
    {
      ...user,
      schema: {
        summary: 'Set the wallet webhook',
        description:
          "Sets (or replaces) the active wallet's webhook with a new signing secret, shown only here; " +
          'events still waiting go to the new URL. Each event is POSTed signed (Standard Webhooks) and ' +
          'retried on failure.',
        tags,
        body: S.WebhookBody,
        response: responses(200, S.WebhookCreated),
      },
    },
    async (request) => webhooks.setWebhook(userAuth(request), request.body.webhook),
  )

  app.get(
    '/wallet/webhook',
    {
      ...user,
      schema: {
        summary: 'The wallet webhook',
        description: 'The URL and when it was set, or `{"webhook": null}`. The secret is never shown again.',
        tags,
        response: responses(200, S.WebhookInfo),
      },
    },
    async (request) => webhooks.getWebhook(userAuth(request).walletId),
  )

  app.delete(
    '/wallet/webhook',
    {
      ...user,
      schema: { summary: 'Remove the wallet webhook', description: 'Removes the webhook and cancels every delivery still waiting.', tags },
    },
    async (request, reply) => {
      await webhooks.removeWebhook(userAuth(request).walletId)
      return reply.status(204).send()
    },
  )

  app.get(
    '/wallet/webhook/deliveries',
    {
      ...user,
      schema: {
        summary: 'Webhook deliveries',
        description: "The active wallet's deliveries, newest first, each with its attempts.",
        tags,
        querystring: S.DeliveryQuery,
        response: responses(200, Type.Array(S.Delivery)),
      },
    },
    async (request, reply) => {
      const walletId = userAuth(request).walletId
      // The page is a bare array, so the backlog's summary travels in headers (as in GET /wallet/webhook's `backlog`).
      const backlog = await webhooks.findBacklog(walletId)
      reply.header('coffer-backlog-pending', String(backlog.pending))
      reply.header('coffer-backlog-oldest-age-seconds', backlog.oldest_pending_age_seconds.toFixed(3))
      return webhooks.listDeliveries(walletId, request.query)
    },
  )

  app.post(
    '/wallet/webhook/deliveries/:id/retry',
    {
      ...user,
      schema: {
        summary: 'Retry a delivery',
        description: "Makes a delivery due now, whatever its status, to the wallet's current webhook.",
        tags,
        params: IdParams('id'),
        response: responses(202, S.Delivery),
      },
    },
    async (request, reply) => {
      const delivery = await webhooks.retryDelivery(userAuth(request).walletId, parseId(request.params.id))
      worker.wake()
      return reply.status(202).send(delivery)
    },
  )
}

export default webhooksRoutes
