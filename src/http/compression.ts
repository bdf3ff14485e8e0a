import zlib from 'node:zlib'
import compress from '@fastify/compress'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'

/**
 * Responses from this many bytes up are compressed for a client that accepts it (brotli, else
 * gzip); smaller ones save too little to pay for the work and the header (docs/decisions.md).
 */
export const COMPRESS_FROM_BYTES = 1024

/**
 * The API's answers (JSON pages, CSV statements) compressed on the way out. The console's files
 * come precompressed and the event stream writes to the socket itself, so neither passes here;
 * request bodies are read as sent (no Content-Encoding on requests).
 */
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
