import path from 'node:path'
import { Worker, type MessagePort } from 'node:worker_threads'
import { openDatabase, type DatabaseOptions } from '../db/database.ts'
import type { SigningKey } from '../secrets/signing-key.ts'
import { JournalSequencer, type Sequencer } from './sequencer.ts'

/** What the sequencer's thread starts from. */
interface ThreadData {
  options: DatabaseOptions
  key: SigningKey
  checkpointIntervalMs: number
  /** This module, and tsx's loader when the sources are TypeScript. */
  module: string
  tsx: string | undefined
  /** Packages loaded before tsx's loader is registered: through its hooks they take seconds. */
  preload: string[]
}

type Described = { message: string; stack?: string; code?: string }

/** What the thread tells the process. */
type Told = { ready: true } | { progress: [positioned: number, size: number] } | { error: Described } | { stopped: true }

export interface ThreadedSequencerOptions {
  options: DatabaseOptions
  key: SigningKey
  checkpointIntervalMs: number
  onProgress?: (positioned: number, size: number) => void
  onError?: (error: Error) => void
}

/** After the thread ended by itself (a fault it could not survive), how long before a new one starts. */
const RESTART_DELAY_MS = 1_000

/** Most time given to a stopping thread to close its connection before it is ended. */
const STOP_TIMEOUT_MS = 10_000

const THREAD = `
const { parentPort, workerData } = require('node:worker_threads')
;(async () => {
  for (const url of workerData.preload) await import(url)
  if (workerData.tsx) (await import(workerData.tsx)).register()
  const { runSequencerThread } = await import(workerData.module)
  runSequencerThread(workerData, parentPort)
})().catch((error) => parentPort.postMessage({ error: { message: String(error?.message ?? error), stack: error?.stack } }))
`

/**
 * The sequencer on a thread of its own with a connection of its own (PostgreSQL): a round's reads,
 * hashing and writes, and the garbage they leave, never hold up the event loop that serves
 * requests, whose only part is a message when something commits. The thread reads what it
 * positions from the database, as it does for commits of other instances.
 */
export class ThreadedSequencer implements Sequencer {
  readonly #options: ThreadedSequencerOptions
  #worker: Worker | undefined
  /** Whether the thread has started its sequencer (until then it holds nothing worth a clean stop). */
  #ready = false
  #exited: Promise<void> = Promise.resolve()
  #restart: NodeJS.Timeout | undefined
  #stopped = true

  constructor(options: ThreadedSequencerOptions) {
    this.#options = options
  }

  start(): void {
    this.#stopped = false
    this.#spawn()
  }

  /** Something committed here: the thread's sequencer runs a round soon and reads it. */
  committed(): void {
    this.#worker?.postMessage('wake')
  }

  async stop(): Promise<void> {
    this.#stopped = true
    clearTimeout(this.#restart)
    const worker = this.#worker
    if (!worker) return
    worker.postMessage('stop')
    const timer = setTimeout(() => void worker.terminate(), this.#ready ? STOP_TIMEOUT_MS : 0)
    await this.#exited
    clearTimeout(timer)
  }

  #spawn(): void {
    const here = import.meta.url
    const data: ThreadData = {
      // One connection: rounds run one at a time.
      options: { ...this.#options.options, poolSize: 1 },
      key: this.#options.key,
      checkpointIntervalMs: this.#options.checkpointIntervalMs,
      module: here,
      tsx: path.extname(new URL(here).pathname) === '.ts' ? import.meta.resolve('tsx/esm/api') : undefined,
      preload: ['kysely', 'pg'].map((name) => import.meta.resolve(name)),
    }
    const worker = new Worker(THREAD, { eval: true, workerData: data })
    // As the sequencer's timers in the process: it never keeps the process alive (a round is one statement).
    worker.unref()
    this.#worker = worker
    this.#ready = false
    worker.on('message', (message: Told) => {
      if ('ready' in message) this.#ready = true
      if ('progress' in message) this.#options.onProgress?.(...message.progress)
      if ('error' in message) this.#options.onError?.(Object.assign(new Error(message.error.message), message.error))
      // Its connection is closed: nothing it holds may keep it (or the process) alive.
      if ('stopped' in message) void worker.terminate()
    })
    worker.on('error', (error) => this.#options.onError?.(error))
    this.#exited = new Promise((resolve) =>
      worker.once('exit', (code) => {
        if (this.#worker === worker) this.#worker = undefined
        resolve()
        if (this.#stopped) return
        // Positions wait while no thread runs: a new one takes over where the database says.
        this.#options.onError?.(new Error(`the journal's sequencer thread ended (exit ${code}); another starts in a second`))
        this.#restart = setTimeout(() => this.#stopped || this.#spawn(), RESTART_DELAY_MS)
      }),
    )
  }
}

/** Describes an error for a message to the process, with its code (storage faults are told apart by it). */
function described(error: unknown): Described {
  const { message, stack, code } = error as { message?: unknown; stack?: string; code?: string }
  return { message: String(message ?? error), stack, code }
}

/** The thread's side: a sequencer on its own connection, woken by the process and stopped by it. @public (`THREAD`) */
export function runSequencerThread(data: ThreadData, port: MessagePort): void {
  const database = openDatabase(data.options)
  const sequencer = new JournalSequencer({
    database,
    key: data.key,
    checkpointIntervalMs: data.checkpointIntervalMs,
    onProgress: (positioned, size) => port.postMessage({ progress: [positioned, size] } satisfies Told),
    onError: (error) => port.postMessage({ error: described(error) } satisfies Told),
  })
  sequencer.start()
  port.postMessage({ ready: true } satisfies Told)
  port.on('message', (message: 'wake' | 'stop') => {
    if (message === 'wake') return sequencer.committed([])
    void (async () => {
      try {
        await sequencer.stop()
        await database.close()
      } finally {
        port.postMessage({ stopped: true } satisfies Told)
      }
    })()
  })
}
