import { createRequire } from 'node:module'
import { Worker } from 'node:worker_threads'

/**
 * A server checkpoints the WAL from a worker thread with its own connection, so no commit (and no
 * request waiting behind it) pays for copying the log back; a passive checkpoint blocks no one.
 */
const WORKER = `
const { parentPort, workerData } = require('node:worker_threads')
const SQLite = require(workerData.driver)
const db = new SQLite(workerData.file)
db.pragma('busy_timeout = 5000')
db.pragma('synchronous = FULL')
const timer = setInterval(() => {
  try {
    db.pragma('wal_checkpoint(PASSIVE)')
  } catch {
    // Busy or failing now: the next round tries again, and the writer's own threshold still holds.
  }
}, workerData.intervalMs)
parentPort.once('message', () => {
  clearInterval(timer)
  db.close()
  parentPort.close()
})
`

export interface Checkpointer {
  /** Closes the worker's connection and ends the thread. */
  stop(): Promise<void>
}

export function startCheckpointer(file: string, intervalMs = 100): Checkpointer {
  const driver = createRequire(import.meta.url).resolve('better-sqlite3')
  const worker = new Worker(WORKER, { eval: true, workerData: { file, driver, intervalMs } })
  // Never keeps the process alive; if the thread fails, the writer checkpoints by itself as before.
  worker.unref()
  worker.on('error', () => {})
  const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()))
  let stopping: Promise<void> | undefined
  return {
    stop() {
      stopping ??= (async () => {
        worker.postMessage('stop')
        const timer = setTimeout(() => void worker.terminate(), 5_000)
        await exited
        clearTimeout(timer)
      })()
      return stopping
    },
  }
}
