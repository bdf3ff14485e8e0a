import zlib from 'node:zlib'
import compress from '@fastify/compress'
import type { FastifyInstance, RouteOptions } from 'fastify'
import fp from 'fastify-plugin'

/** Smaller responses save too little to pay for compressing (docs/decisions.md). */
export const COMPRESS_FROM_BYTES = 1024

/** Reads whose answer is one short line, polled often. */
const PROBES = new Set(['/healthz', '/readyz'])
/** The one write whose answer grows with its request: a result per transfer. */
const LARGE_WRITES = new Set(['/wallet/transactions/batch'])

/** Whether a route's answer can be large: any read but the probes, and the batch; other writes answer one object. */
function mayAnswerLarge(route: Pick<RouteOptions, 'method' | 'url'>): boolean {
  const methods = [route.method].flat()
  if (methods.includes('GET')) return !PROBES.has(route.url)
  return methods.includes('POST') && LARGE_WRITES.has(route.url)
}

/**
 * Answers that can be large compressed (brotli, else gzip); the console is precompressed and the
 * event stream bypasses it. Other routes get none of the plugin's per-request hooks.
 */
export default fp(async function compression(app: FastifyInstance) {
  // Before the plugin's own onRoute hook, which hooks every route not marked `compress: false`.
  app.addHook('onRoute', (route) => {
    if (route.compress === undefined && !mayAnswerLarge(route)) route.compress = false
  })
  await app.register(compress, {
    global: true,
    globalDecompression: false,
    threshold: COMPRESS_FROM_BYTES,
    encodings: ['br', 'gzip'],
    // A quality that answers in about the time gzip takes; the strongest is for files built once.
    brotliOptions: { params: { [zlib.constants.BROTLI_PARAM_QUALITY]: 4 } },
  })
})
