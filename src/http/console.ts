import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import fastifyStatic from '@fastify/static'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'

/** Scripts, styles and data from this origin only, never inline; no framing. */
const CONSOLE_HEADERS = {
  'content-security-policy':
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'same-origin',
} as const

/** The built console (`console/dist`, made by `npm run build:console`), found from this file up to the package root. */
function consoleDirectory(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url))
  while (!fs.existsSync(path.join(dir, 'package.json')) && path.dirname(dir) !== dir) dir = path.dirname(dir)
  return path.join(dir, 'console', 'dist')
}

/**
 * The console at `/console/` (and `/` redirecting there): hashed bundles cached for good, the page
 * revalidated so a new build shows at once, precompressed copies sent as they are.
 */
export default fp<{ root?: string }>(async function consolePlugin(app: FastifyInstance, options) {
  const root = options.root ?? consoleDirectory()
  if (!fs.existsSync(path.join(root, 'index.html'))) app.log.warn({ root }, 'the console is not built: run `npm run build:console`')

  app.get('/', { schema: { hide: true } }, async (_request, reply) => reply.headers(CONSOLE_HEADERS).redirect('/console/', 302))

  await app.register(fastifyStatic, {
    root,
    // Without the trailing slash, so that /console is redirected to /console/.
    prefix: '/console',
    redirect: true,
    // The page itself is the route below: @fastify/static finds no precompressed copy of a folder's index.
    index: false,
    wildcard: true,
    dotfiles: 'ignore',
    preCompressed: true,
    setHeaders(reply, file) {
      reply.headers(CONSOLE_HEADERS)
      reply.header('cache-control', file.includes(`${path.sep}assets${path.sep}`) ? 'public, max-age=31536000, immutable' : 'no-cache')
    },
  })
  app.get('/console/', { schema: { hide: true } }, async (_request, reply) => reply.sendFile('index.html'))
})
