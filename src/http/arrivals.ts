import type { Server } from 'node:net'

/** Most extra turns before one piece of work: a steady stream of new connections must not starve it. */
const MAX_EXTRA_TURNS = 64

/**
 * Node (libuv) accepts one waiting connection per turn of the event loop, and on SQLite a turn under
 * load is one group commit (tens of milliseconds): 32 clients connecting together would wait up to a
 * second for the last one's first request to be read. The function returned runs work after this
 * turn's I/O, as `setImmediate` does, and after one more turn each time a turn accepted a connection.
 */
export function afterArrivals(server: Server): (work: () => void) => void {
  let accepted = 0
  server.on('connection', () => {
    accepted++
  })
  return (work) => {
    let seen = accepted
    let turns = 0
    const next = () => {
      if (accepted === seen || turns++ === MAX_EXTRA_TURNS) return work()
      seen = accepted
      setImmediate(next)
    }
    setImmediate(next)
  }
}
