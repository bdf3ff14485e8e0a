import assert from 'node:assert/strict'
import net from 'node:net'
import { test } from 'node:test'
import { afterArrivals } from '../../src/http/arrivals.ts'

const CLIENTS = 32

/**
 * Keeps the event loop busy as a loaded group committer does (a few milliseconds of synchronous
 * work, rescheduled by `schedule`) while CLIENTS connect at once; counts the works that ran
 * before the server had accepted them all.
 */
async function worksWhileConnecting(schedule: (server: net.Server) => (work: () => void) => void): Promise<number> {
  const server = net.createServer((socket) => socket.destroy())
  const later = schedule(server)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as net.AddressInfo
  let works = 0
  let accepted = 0
  let busy = true
  const work = () => {
    const until = performance.now() + 3
    while (performance.now() < until);
    works++
    if (busy) later(work)
  }
  const all = new Promise<number>((resolve) =>
    server.on('connection', () => {
      if (++accepted === CLIENTS) resolve(works)
    }),
  )
  later(work)
  const clients = Array.from({ length: CLIENTS }, () => net.connect(port, '127.0.0.1').on('error', () => {}))
  const counted = await all
  busy = false
  for (const client of clients) client.destroy()
  await new Promise((resolve) => server.close(resolve))
  return counted
}

test('a busy loop accepts a burst of connections within a few works, not one a work', async () => {
  // The premise: Node accepts one connection per turn, so plain setImmediate takes a work per client.
  const plain = await worksWhileConnecting(() => setImmediate)
  assert.ok(plain >= CLIENTS / 2, `plain setImmediate accepted ${CLIENTS} connections within ${plain} works`)
  const gated = await worksWhileConnecting(afterArrivals)
  assert.ok(gated <= 4, `afterArrivals accepted ${CLIENTS} connections within ${gated} works`)
})
