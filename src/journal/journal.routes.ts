import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { Config } from '../config.ts'
import type { Database } from '../db/database.ts'
import type { SigningKey } from '../secrets/signing-key.ts'
import { walletOf } from '../http/auth.ts'
import { AppError } from '../http/errors.ts'
import { openEventStream } from '../http/event-stream.ts'
import { ErrorSchema, IdParams, JSON_TYPE, parseId, responses } from '../http/schemas.ts'
import * as S from './journal.schemas.ts'
import * as journal from './journal.service.ts'

/** A comment line every so often keeps proxies from closing an idle stream. */
const KEEP_ALIVE_MS = 15_000
/** How often an idle stream looks for new entries. */
const STREAM_POLL_MS = 200
const STREAM_BATCH = 500

/** The journal's routes: the operator's feed (JSON and SSE), the checkpoints, the proofs (`journal/README.md`). */
const journalRoutes: FastifyPluginAsyncTypebox<{ database: Database; config: Config; signingKey: SigningKey }> = async (
  app,
  { database, config, signingKey },
) => {
  const { db } = database
  const tags = ['journal']
  const retryAfterSeconds = Math.ceil(config.checkpointIntervalMs / 1000)
  // Open streams end when the app closes, so that closing never waits on a client.
  const streams = new Set<() => void>()
  app.addHook('onClose', async () => {
    for (const end of streams) end()
  })

  app.get(
    '/admin/journal',
    {
      onRequest: app.requireAdmin,
      schema: {
        tags,
        summary: 'Follow the journal',
        description:
          'Every transaction after position `after` (default 0), in position order, each once: `{entries, next}` with `next` ' +
          "the last entry's position (or `after`). With `wait` (seconds, up to 30) it answers as soon as there is an entry, " +
          'or empty when the time is up.',
        querystring: S.FeedQuery,
        response: responses(200, S.Feed),
      },
    },
    async (request, reply) => {
      const { after = 0, limit = 100, wait = 0 } = request.query
      const left = new AbortController()
      request.raw.once('close', () => left.abort())
      // JSON text already (`Feed`'s shape): sent as it is, not serialised again.
      return reply.type(JSON_TYPE).send((await journal.waitForFeed(db, after, limit, wait, left.signal)) as never)
    },
  )

  app.get(
    '/admin/journal/stream',
    {
      onRequest: app.requireAdmin,
      exposeHeadRoute: false,
      schema: {
        tags,
        summary: 'The journal as Server-Sent Events',
        description:
          'The feed as Server-Sent Events: `id` is the position, `data` the Transaction. Resumes after `Last-Event-ID` (or `after`).',
        headers: S.StreamHeaders,
        querystring: S.StreamQuery,
        response: {
          200: { description: 'the journal as Server-Sent Events', content: { 'text/event-stream': { schema: { type: 'string' } } } },
          '4xx': { description: 'the error body', content: { 'application/json': { schema: ErrorSchema } } },
        },
      },
    },
    async (request, reply) => {
      const header = request.headers['last-event-id']
      let after = header !== undefined ? Number(header) : (request.query.after ?? 0)
      const res = openEventStream(reply, ': connected\n\n')
      let open = true
      const end = () => {
        open = false
        if (!res.writableEnded) res.end()
      }
      streams.add(end)
      res.once('close', () => (open = false))
      let quietSince = Date.now()
      while (open) {
        let page: { text: string; last: number | null }
        try {
          page = await journal.readJournalPage(db, after, STREAM_BATCH)
        } catch (error) {
          request.log.error({ err: error }, 'journal stream read failed')
          break
        }
        // The page's lines as `coffer export` writes them, each an event: no entry parsed and written again.
        for (const line of page.text.split('\n')) if (line) res.write(`id: ${journal.positionOfLine(line)}\ndata: ${line}\n\n`)
        after = page.last ?? after
        if (page.last !== null) {
          quietSince = Date.now()
          if (res.writableNeedDrain) await new Promise((resolve) => res.once('drain', resolve).once('close', resolve))
          continue
        }
        if (Date.now() - quietSince >= KEEP_ALIVE_MS) {
          res.write(': keep-alive\n\n')
          quietSince = Date.now()
        }
        await new Promise((resolve) => setTimeout(resolve, STREAM_POLL_MS))
      }
      streams.delete(end)
      if (!res.writableEnded) res.end()
    },
  )

  app.get(
    '/journal/key',
    {
      schema: {
        tags,
        summary: 'The checkpoint signing key',
        description: 'The Ed25519 public key that signs checkpoints, base64 of its raw 32 bytes.',
        response: responses(200, S.Key),
      },
    },
    async () => ({
      algorithm: 'Ed25519' as const,
      public_key: signingKey.publicKeyBase64,
    }),
  )

  app.get(
    '/journal/checkpoint',
    {
      onRequest: app.requireAnyCaller,
      config: { scope: 'read' },
      schema: {
        tags,
        summary: 'The latest signed checkpoint',
        description:
          "The latest checkpoint: the journal's size, its RFC 9162 Merkle root, when it was signed, and the base64 Ed25519 " +
          'signature of `coffer-checkpoint/v1\\n{size}\\n{root}\\n{signed_at}\\n`. `J000` until the first is signed.',
        response: responses(200, S.Checkpoint),
      },
    },
    async (_request, reply) => {
      const checkpoint = await journal.latestCheckpoint(db)
      if (!checkpoint) {
        reply.header('retry-after', String(retryAfterSeconds))
        throw new AppError('J000', 'the journal has no signed checkpoint yet', { headers: { 'retry-after': String(retryAfterSeconds) } })
      }
      return checkpoint
    },
  )

  app.get(
    '/journal/consistency',
    {
      onRequest: app.requireAnyCaller,
      config: { scope: 'read' },
      schema: {
        tags,
        summary: 'Prove the journal only grew',
        description:
          "The RFC 9162 consistency proof between the trees of sizes `from` and `to` (1 ≤ from ≤ to ≤ the latest checkpoint's size).",
        querystring: S.ConsistencyQuery,
        response: responses(200, S.Consistency),
      },
    },
    async (request) => journal.proveConsistency(db, request.query.from, request.query.to),
  )

  app.get(
    '/wallet/transactions/:id/proof',
    {
      onRequest: app.requireWalletAccess,
      config: { scope: 'read' },
      schema: {
        tags,
        summary: 'Prove a transaction is in the journal',
        description:
          'The transaction (sent or received by the wallet), its leaf index (position - 1), the latest signed checkpoint and ' +
          "the RFC 9162 audit path from its leaf to that checkpoint's root. `J000` with `Retry-After` until a checkpoint covers it.",
        params: IdParams('id'),
        response: responses(200, S.Proof),
      },
    },
    async (request) => journal.proveInclusion(db, walletOf(request), parseId(request.params.id), retryAfterSeconds),
  )
}

export default journalRoutes
