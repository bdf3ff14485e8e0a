import assert from 'node:assert/strict'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { after, before, describe, it } from 'node:test'
import type { FastifyInstance } from 'fastify'
import { startTracing, tracingWanted } from '../../src/telemetry/sdk.ts'
import type { Tracing } from '../../src/telemetry/tracing.ts'
import { buildTestApp, type TestApp } from '../helpers/app.ts'
import { createAsset, createUser, issue, transfer } from '../helpers/factories.ts'

/** A span as OTLP/JSON carries it (ids in hex). */
interface OtlpSpan {
  traceId: string
  spanId: string
  parentSpanId?: string
  name: string
  kind: number
  attributes?: { key: string; value: Record<string, unknown> }[]
}

/** A small OTLP/HTTP receiver: keeps the spans of every JSON export posted to /v1/traces. */
async function startReceiver(): Promise<{ url: string; spans: OtlpSpan[]; close(): Promise<void> }> {
  const spans: OtlpSpan[] = []
  const server = http.createServer((request, response) => {
    const chunks: Buffer[] = []
    request.on('data', (chunk: Buffer) => chunks.push(chunk))
    request.on('end', () => {
      if (request.url === '/v1/traces' && request.headers['content-type']?.startsWith('application/json')) {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8'))
        for (const resource of body.resourceSpans ?? []) for (const scope of resource.scopeSpans ?? []) spans.push(...(scope.spans ?? []))
        response.writeHead(200, { 'content-type': 'application/json' }).end('{}')
      } else response.writeHead(404).end()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    spans,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  }
}

describe('OpenTelemetry traces', () => {
  it('are off unless the OTEL_* variables ask for them', () => {
    assert.equal(tracingWanted({}), undefined)
    assert.equal(tracingWanted({ OTEL_SERVICE_NAME: 'coffer' }), undefined)
    assert.equal(tracingWanted({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_TRACES_EXPORTER: 'none' }), undefined)
    assert.equal(tracingWanted({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_SDK_DISABLED: 'true' }), undefined)
    assert.deepEqual(tracingWanted({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/' }), {
      protocol: 'http/protobuf',
      url: 'http://collector:4318/v1/traces',
    })
    assert.deepEqual(tracingWanted({ OTEL_TRACES_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json' }), {
      protocol: 'http/json',
      url: 'http://localhost:4318/v1/traces',
    })
    assert.throws(() => tracingWanted({ OTEL_TRACES_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }), /OTEL_EXPORTER_OTLP_PROTOCOL/)
  })

  describe('exported over OTLP', () => {
    const lines: Record<string, unknown>[] = []
    let receiver: Awaited<ReturnType<typeof startReceiver>>
    let tracing: Tracing
    let t: TestApp
    let app: FastifyInstance

    before(async () => {
      receiver = await startReceiver()
      tracing = (await startTracing(
        { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' },
        'test',
      )) as Tracing
      assert.ok(tracing)
      t = await buildTestApp({ LOG_LEVEL: 'info' }, { logStream: { write: (line: string) => void lines.push(JSON.parse(line)) }, tracing })
      app = t.app
    })
    after(async () => {
      await t.close()
      await tracing.shutdown()
      await receiver.close()
    })

    it("show a transfer's request with its statements and its group commit, and the log line names the trace", async () => {
      const gold = await createAsset(t, { name: 'gold' })
      const [alice, bob] = [await createUser(app), await createUser(app)]
      await issue(t, alice.walletId, gold.id, 10)
      const sent = await transfer(t, alice, bob.username, { gold: 3 })
      await tracing.flush()

      const line = lines.find((entry) => entry.msg === 'request' && entry.route === '/wallet/transactions' && entry.status === 201)
      assert.ok(line, 'the request was logged')
      assert.match(String(line.trace_id), /^[0-9a-f]{32}$/)
      const spans = receiver.spans.filter((span) => span.traceId === line.trace_id)
      const request = spans.find((span) => span.name === 'POST /wallet/transactions')
      assert.ok(request, `the request's span is exported (${spans.map((span) => span.name).join(', ')})`)
      assert.equal(request.kind, 2, 'a server span')
      assert.equal(request.parentSpanId ?? '', '', 'the root of its trace')
      const status = request.attributes?.find((attribute) => attribute.key === 'http.response.status_code')?.value
      assert.equal(Number(status?.intValue), 201)

      const children = spans.filter((span) => span.parentSpanId === request.spanId)
      const commit = children.find((span) => span.name === 'coffer.group_commit')
      assert.ok(commit, 'the group commit it was part of')
      const written = spans.filter((span) => span.parentSpanId === commit.spanId && span.name.startsWith('db '))
      assert.ok(written.length > 0, "the commit's statements")
      assert.ok(
        written.every((span) => span.kind === 3),
        `client spans: ${written.map((span) => `${span.kind} ${span.name}`).join(', ')}`,
      )
      assert.ok(sent.id)
    })
  })
})
