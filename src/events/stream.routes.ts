import type { ServerResponse } from 'node:http'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { isEnded, type SessionEndings } from '../accounts/session-endings.ts'
import { walletOf } from '../http/auth.ts'
import { openEventStream } from '../http/event-stream.ts'
import { ErrorSchema } from '../http/schemas.ts'
import type { EventHub, EventSink } from './event-hub.ts'
import * as S from './events.schemas.ts'
import type { StreamAccess } from './stream-access.ts'

/** A comment line every so often keeps proxies from closing an idle stream. */
const KEEP_ALIVE_MS = 15_000
/** What EventSource waits before reconnecting after the stream drops. */
const RETRY_MS = 3_000

function responseSink(res: ServerResponse): EventSink {
  return {
    write: (frame) => {
      if (!res.writableEnded) res.write(frame)
    },
    buffered: () => res.writableLength,
    drained: () =>
      new Promise<void>((resolve) => {
        if (!res.writableNeedDrain || res.writableEnded) return resolve()
        const done = () => {
          res.off('drain', done)
          res.off('close', done)
          resolve()
        }
        res.on('drain', done)
        res.on('close', done)
      }),
    close: () => {
      if (!res.writableEnded) res.end()
    },
  }
}

/** GET /wallet/events: the wallet's events as Server-Sent Events (wallet auth; docs/webhooks.md#the-event-stream). */
const streamRoutes: FastifyPluginAsyncTypebox<{
  hub: EventHub
  access: StreamAccess
  sessionEndings: SessionEndings
}> = async (app, { hub, access, sessionEndings }) => {
  app.get(
    '/wallet/events',
    {
      onRequest: app.requireWalletAccess,
      config: { scope: 'read' },
      // A HEAD would hold a stream open with nothing ever sent: only GET (HEAD answers G006).
      exposeHeadRoute: false,
      schema: {
        summary: 'Stream the wallet events',
        description:
          'Server-Sent Events: `id` is the event sequence number, `event` the type, `data` the event JSON ' +
          '(as delivered to webhooks). Send `Last-Event-ID` to receive what followed that event first. ' +
          'Comment lines keep the stream alive; a revoked credential ends it.',
        tags: ['events'],
        headers: S.StreamHeaders,
        querystring: S.StreamQuery,
        // The stream is text/event-stream; its refusals are JSON like every error.
        response: {
          200: { description: 'the event stream', content: { 'text/event-stream': { schema: { type: 'string' } } } },
          '4xx': { description: 'the error body', content: { 'application/json': { schema: ErrorSchema } } },
        },
      },
    },
    async (request, reply) => {
      const walletId = walletOf(request)
      const auth = request.auth
      const header = request.headers['last-event-id']
      const lastEventId = header !== undefined ? Number(header) : request.query.last_event_id

      const res = openEventStream(reply, `retry: ${RETRY_MS}\n: connected\n\n`)

      // A revoked key, or a session ended, expired, idle too long or moved to another wallet, ends
      // the stream within a second, through whichever instance it happened (`stream-access.ts`).
      // A session ended through this instance ends it at once, so a signed-out device stops receiving.
      let closed = false
      let unsubscribe: (() => void) | undefined
      const keepAlive = setInterval(() => res.write(': keep-alive\n\n'), KEEP_ALIVE_MS)
      const end = () => {
        if (!res.writableEnded) res.end()
      }
      const stopWatching =
        auth?.kind === 'user'
          ? access.watch({ kind: 'user', sessionId: auth.sessionId, walletId }, end)
          : auth?.kind === 'wallet'
            ? access.watch({ kind: 'wallet', keyId: auth.walletSessionId }, end)
            : undefined
      const stopListening =
        auth?.kind === 'user'
          ? sessionEndings.listen((ending) => {
              if (isEnded(ending, auth)) end()
            })
          : undefined
      res.on('close', () => {
        // Fastify logs a response that the server ended; a stream its client left is logged here.
        if (!res.writableEnded) app.recordRequest(request, res.statusCode, reply.elapsedTime)
        closed = true
        clearInterval(keepAlive)
        stopWatching?.()
        stopListening?.()
        unsubscribe?.()
      })
      try {
        unsubscribe = await hub.subscribe(walletId, lastEventId, responseSink(res))
      } catch (error) {
        request.log.warn({ err: error }, 'event stream: could not start')
        res.end()
        return
      }
      if (closed) unsubscribe()
    },
  )
}

export default streamRoutes
