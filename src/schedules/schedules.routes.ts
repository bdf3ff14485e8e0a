import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from '@sinclair/typebox'
import { walletOf } from '../http/auth.ts'
import { nextPageLink } from '../http/paging.ts'
import { IdParams, parseId, responses, Timestamp } from '../http/schemas.ts'
import type { SchedulesService } from './schedules.service.ts'
import { NextRunsQuery, RunsQuery, Schedule, ScheduleBody, ScheduleListQuery, ScheduleRun } from './schedules.schemas.ts'

export interface SchedulesRoutesOptions {
  schedules: SchedulesService
}

/** Scheduled and recurring transfers, wallet auth (`schedules.service.ts`); the operator's list of troubled ones. */
const schedulesRoutes: FastifyPluginAsyncTypebox<SchedulesRoutesOptions> = async (app, { schedules }) => {
  const tags = ['schedules']
  // Reading needs a key's `read` scope, creating and changing a schedule its `schedule` scope.
  const read = { onRequest: app.requireWalletAccess, config: { scope: 'read' as const } }
  const change = { onRequest: app.requireWalletAccess, config: { scope: 'schedule' as const } }

  app.post(
    '/wallet/schedules',
    {
      ...change,
      schema: {
        summary: 'Schedule a transfer',
        description:
          'The body of a transfer plus when it runs: `start_at` (now or later, at most 10 years ahead), `every` ' +
          '(whole days, weeks or months, `P1D` to `P1Y`; absent: once), `count` or `end_at` (not both) and ' +
          '`time_zone` (IANA, `UTC` by default). Occurrence n is `start_at` as a wall-clock time in that zone ' +
          'plus n × `every`. Each run is an ordinary transfer from the wallet, and runs exactly once. The ' +
          'recipient and asset names are checked now, the balance at each run.',
        tags,
        body: ScheduleBody,
        response: responses(201, Schedule),
      },
    },
    async (request, reply) => {
      const auth = request.auth
      const keyId = auth?.kind === 'wallet' ? auth.walletSessionId : undefined
      return reply.status(201).send(await schedules.create(walletOf(request), request.body, keyId))
    },
  )

  app.get(
    '/wallet/schedules',
    {
      ...read,
      schema: {
        summary: "The wallet's schedules",
        description: 'Newest first, filtered by `status`. The `Link` header (`rel="next"`) gives the next page.',
        tags,
        querystring: ScheduleListQuery,
        response: responses(200, Type.Array(Schedule)),
      },
    },
    async (request, reply) => {
      const { schedules: page, more } = await schedules.list(walletOf(request), request.query)
      if (more && page.length > 0) {
        const { limit, after, status } = request.query
        reply.header('link', nextPageLink('/wallet/schedules', { before: page[page.length - 1].id, limit: limit ?? 10, after, status }))
      }
      return page
    },
  )

  app.get(
    '/wallet/schedules/:id',
    {
      ...read,
      schema: {
        summary: 'One schedule',
        description: 'A schedule of the wallet, with its next run, how many runs it has done and refused, and its last run.',
        tags,
        params: IdParams('id'),
        response: responses(200, Schedule),
      },
    },
    async (request) => schedules.find(walletOf(request), parseId(request.params.id)),
  )

  app.get(
    '/wallet/schedules/:id/upcoming',
    {
      ...read,
      schema: {
        summary: 'The next runs of a schedule',
        description: 'When the next `count` runs (5 by default, at most 50) of an active schedule fall due; none for any other.',
        tags,
        params: IdParams('id'),
        querystring: NextRunsQuery,
        response: responses(200, Type.Object({ runs: Type.Array(Timestamp) })),
      },
    },
    async (request) => ({ runs: await schedules.upcoming(walletOf(request), parseId(request.params.id), request.query.count ?? 5) }),
  )

  app.get(
    '/wallet/schedules/:id/runs',
    {
      ...read,
      schema: {
        summary: 'The runs of a schedule',
        description:
          'Every occurrence that ran, the latest first: the transfer it made, or the error that refused it. ' +
          'The `Link` header (`rel="next"`) gives the next page.',
        tags,
        params: IdParams('id'),
        querystring: RunsQuery,
        response: responses(200, Type.Array(ScheduleRun)),
      },
    },
    async (request, reply) => {
      const id = parseId(request.params.id)
      const { runs, more } = await schedules.runs(walletOf(request), id, request.query)
      if (more && runs.length > 0) {
        const limit = request.query.limit ?? 20
        reply.header('link', nextPageLink(`/wallet/schedules/${id}/runs`, { before: runs[runs.length - 1].occurrence, limit }))
      }
      return runs
    },
  )

  for (const [action, summary, description] of [
    ['pause', 'Pause a schedule', 'Nothing runs until it is resumed; pausing a paused schedule changes nothing.'],
    [
      'resume',
      'Resume a schedule',
      'It runs again from its next occurrence from now on (those missed while paused do not run; a one-off whose ' +
        'time passed runs at once); resuming an active schedule changes nothing.',
    ],
  ] as const) {
    app.post(
      `/wallet/schedules/:id/${action}`,
      {
        ...change,
        schema: { summary, description, tags, params: IdParams('id'), response: responses(200, Schedule) },
      },
      async (request) => schedules[action](walletOf(request), parseId(request.params.id)),
    )
  }

  app.delete(
    '/wallet/schedules/:id',
    {
      ...change,
      schema: {
        summary: 'Cancel a schedule',
        description: 'For good: it never runs again.',
        tags,
        params: IdParams('id'),
        response: responses(200, Schedule),
      },
    },
    async (request) => schedules.cancel(walletOf(request), parseId(request.params.id)),
  )

  app.get(
    '/admin/schedules',
    {
      onRequest: app.requireAdmin,
      schema: {
        summary: 'Schedules in trouble',
        description: 'Every schedule, of any wallet, that is paused or has had a run refused (but cancelled ones), latest change first.',
        tags,
        querystring: Type.Object({ limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 50 })) }),
        response: responses(200, Type.Array(Schedule)),
      },
    },
    async (request) => schedules.listTroubled(request.query.limit ?? 50),
  )
}

export default schedulesRoutes
