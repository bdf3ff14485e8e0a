import type { ServerResponse } from 'node:http'
import type { FastifyReply } from 'fastify'

/**
 * Takes the response over as a Server-Sent Events stream and writes `preamble`. Headers set so
 * far (request id, CORS, security) go out with the stream's own. The connection ends with the
 * stream: a client reconnects for the next one anyway, and an idle connection left open would
 * hold up the server's shutdown until the client drops it.
 */
export function openEventStream(reply: FastifyReply, preamble: string): ServerResponse {
  reply.hijack()
  const res = reply.raw
  for (const [name, value] of Object.entries(reply.getHeaders())) if (value !== undefined) res.setHeader(name, value)
  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache, no-transform',
    connection: 'close',
    'x-accel-buffering': 'no',
  })
  res.write(preamble)
  return res
}
