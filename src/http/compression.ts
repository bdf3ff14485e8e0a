import zlib from 'node:zlib'
import compress from '@fastify/compress'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'

/** Smaller responses save too little to pay for compressing (docs/decisions.md). */
export const COMPRESS_FROM_BYTES = 1024

/** The API's answers compressed (brotli, else gzip); the console is precompressed and the event stream bypasses it. */
export default fp(async function compression(app: FastifyInstance) {
  await app.register(compress, {
    global: true,
    globalDecompression: false,
    threshold: COMPRESS_FROM_BYTES,
    encodings: ['br', 'gzip'],
    // A quality that answers in about the time gzip takes; the strongest is for files built once.
    brotliOptions: { params: { [zlib.constants.BROTLI_PARAM_QUALITY]: 4 } },
  })
})
