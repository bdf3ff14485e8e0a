import { ConfigError } from '../config.ts'
import type { Tracing } from './tracing.ts'

type Env = Record<string, string | undefined>

/** The protocols of OTLP over HTTP; gRPC is not offered (it would bring another stack of dependencies). */
const PROTOCOLS = ['http/protobuf', 'http/json'] as const
type Protocol = (typeof PROTOCOLS)[number]

/** Whether the standard `OTEL_*` variables ask for traces; throws on a protocol it cannot speak. */
export function tracingWanted(env: Env): { protocol: Protocol; url: string } | undefined {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return undefined
  const exporters = (env.OTEL_TRACES_EXPORTER ?? '')
    .split(',')
    .map((name) => name.trim())
    .filter(Boolean)
  const endpoint = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || env.OTEL_EXPORTER_OTLP_ENDPOINT
  const wanted = exporters.length > 0 ? exporters.includes('otlp') : Boolean(endpoint)
  if (!wanted) return undefined
  const protocol = env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL || env.OTEL_EXPORTER_OTLP_PROTOCOL || 'http/protobuf'
  if (!(PROTOCOLS as readonly string[]).includes(protocol)) {
    throw new ConfigError('OTEL_EXPORTER_OTLP_PROTOCOL', `must be ${PROTOCOLS.join(' or ')}, got "${protocol}"`)
  }
  // The signal's own endpoint is taken as it is; the general one gets the traces' path.
  const url =
    env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || `${(env.OTEL_EXPORTER_OTLP_ENDPOINT || 'http://localhost:4318').replace(/\/$/, '')}/v1/traces`
  return { protocol: protocol as Protocol, url }
}

/** Starts the OpenTelemetry SDK when asked for, else loads nothing; the SDK reads the other standard variables. */
export async function startTracing(env: Env, version: string): Promise<Tracing | undefined> {
  const wanted = tracingWanted(env)
  if (!wanted) return undefined
  const [{ NodeTracerProvider, BatchSpanProcessor }, { resourceFromAttributes }, exporters] = await Promise.all([
    import('@opentelemetry/sdk-trace-node'),
    import('@opentelemetry/resources'),
    wanted.protocol === 'http/json'
      ? import('@opentelemetry/exporter-trace-otlp-http')
      : import('@opentelemetry/exporter-trace-otlp-proto'),
  ])
  const provider = new NodeTracerProvider({
    resource: resourceFromAttributes({ 'service.name': env.OTEL_SERVICE_NAME || 'coffer', 'service.version': version }),
    spanProcessors: [new BatchSpanProcessor(new exporters.OTLPTraceExporter({ url: wanted.url }))],
  })
  provider.register()
  return {
    tracer: provider.getTracer('coffer', version),
    flush: () => provider.forceFlush(),
    shutdown: () => provider.shutdown(),
  }
}
