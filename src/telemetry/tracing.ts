import {
  context,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Span,
  type Tracer,
} from '@opentelemetry/api'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { KyselyPlugin, PluginTransformQueryArgs, PluginTransformResultArgs, QueryResult, RootOperationNode, UnknownRow } from 'kysely'

/** OpenTelemetry traces; without them nothing here runs. */
export interface Tracing {
  readonly tracer: Tracer
  /** Exports what is queued now (tests; the shutdown does it too). */
  flush(): Promise<void>
  /** Exports what is queued and stops (the app closes). */
  shutdown(): Promise<void>
}

/** Runs `work` in a new span, child of `parent` (the active context by default); the span ends when `work` settles. */
async function inSpan<T>(
  tracing: Tracing,
  name: string,
  work: (span: Span) => Promise<T>,
  options: { parent?: Context; attributes?: Attributes; kind?: SpanKind; links?: Span[] } = {},
): Promise<T> {
  const parent = options.parent ?? context.active()
  const links = options.links?.map((linked) => ({ context: linked.spanContext() }))
  const span = tracing.tracer.startSpan(name, { kind: options.kind ?? SpanKind.INTERNAL, attributes: options.attributes, links }, parent)
  try {
    return await context.with(trace.setSpan(parent, span), () => work(span))
  } catch (error) {
    span.recordException(error as Error)
    span.setStatus({ code: SpanStatusCode.ERROR })
    throw error
  } finally {
    span.end()
  }
}

/** The ids of the active span, for the JSON log lines (pino's `mixin`). */
export function traceFields(): { trace_id?: string; span_id?: string } {
  const span = trace.getActiveSpan()
  if (!span) return {}
  const { traceId, spanId } = span.spanContext()
  return { trace_id: traceId, span_id: spanId }
}

/** A server span per request, made active again after the body read, so the handler and log line carry it. */
export function traceRequests(app: FastifyInstance, tracing: Tracing): void {
  const requestSpans = new WeakMap<FastifyRequest, { span: Span; context: Context }>()
  app.addHook('onRequest', (request, _reply, done) => {
    const span = tracing.tracer.startSpan(`${request.method} ${request.routeOptions.url ?? 'unmatched'}`, {
      kind: SpanKind.SERVER,
      attributes: {
        'http.request.method': request.method,
        'http.route': request.routeOptions.url ?? 'unmatched',
        'coffer.request_id': request.id,
      },
    })
    const active = trace.setSpan(ROOT_CONTEXT, span)
    requestSpans.set(request, { span, context: active })
    context.with(active, done)
  })
  app.addHook('preHandler', (request, _reply, done) => {
    const traced = requestSpans.get(request)
    if (traced) context.with(traced.context, done)
    else done()
  })
  app.addHook('onResponse', (request, reply, done) => {
    const traced = requestSpans.get(request)
    if (!traced) return done()
    traced.span.setAttribute('http.response.status_code', reply.statusCode)
    if (reply.statusCode >= 500) traced.span.setStatus({ code: SpanStatusCode.ERROR })
    traced.span.end()
    context.with(traced.context, done)
  })
}

/** A Kysely plugin: a client span per statement, child of the active span, ended when its result is back. */
export function traceStatements(tracing: Tracing, system: 'sqlite' | 'postgresql'): KyselyPlugin {
  const open = new WeakMap<object, Span>()
  return {
    transformQuery({ node, queryId }: PluginTransformQueryArgs): RootOperationNode {
      const operation = operationOf(node)
      const span = tracing.tracer.startSpan(
        `db ${operation}`,
        { kind: SpanKind.CLIENT, attributes: { 'db.system.name': system, 'db.operation.name': operation } },
        context.active(),
      )
      open.set(queryId, span)
      return node
    },
    async transformResult({ result, queryId }: PluginTransformResultArgs): Promise<QueryResult<UnknownRow>> {
      open.get(queryId)?.end()
      open.delete(queryId)
      return result
    },
  }
}

/** `select`, `insert`, …; for SQL written out, its first word. */
function operationOf(node: RootOperationNode): string {
  if (node.kind === 'RawNode') return /^\s*([a-z]+)\b/i.exec(node.sqlFragments[0] ?? '')?.[1]?.toLowerCase() ?? 'sql'
  return node.kind.replace(/QueryNode$/, '').toLowerCase()
}

/** A batch's span: child of its first member's, linked to the others', so each transfer's trace shows its commit. */
export interface BatchTracing {
  capture(): Context
  run<T>(members: Context[], size: number, work: () => Promise<T>): Promise<T>
}

export function traceBatches(tracing: Tracing): BatchTracing {
  return {
    capture: () => context.active(),
    run(members, size, work) {
      const links = members.slice(1).flatMap((member) => {
        const span = trace.getSpan(member)
        return span ? [span] : []
      })
      return inSpan(tracing, 'coffer.group_commit', work, { parent: members[0], attributes: { 'coffer.batch.transfers': size }, links })
    },
  }
}

/** A delivery attempt in a trace of its own, without the URL (the receiver is the user's). */
export function traceAttempt<T extends { statusCode: number | null }>(
  tracing: Tracing | undefined,
  attempt: number,
  send: () => Promise<T>,
): Promise<T> {
  if (!tracing) return send()
  return inSpan(
    tracing,
    'coffer.webhook.attempt',
    async (span) => {
      const outcome = await send()
      if (outcome.statusCode !== null) span.setAttribute('http.response.status_code', outcome.statusCode)
      if (outcome.statusCode === null || outcome.statusCode >= 300) span.setStatus({ code: SpanStatusCode.ERROR })
      return outcome
    },
    { parent: ROOT_CONTEXT, kind: SpanKind.CLIENT, attributes: { 'coffer.webhook.attempt': attempt } },
  )
}
