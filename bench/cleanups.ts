/**
 * Everything a bench run starts, stopped however the run ends: `push` a step when something is
 * started, `track` the process id of each child; `cleanUp()` runs the steps in reverse order of
 * start, once (the normal end and a signal wait for the same run). SIGINT and SIGTERM clean up and
 * exit with 130; at exit, the children a failed step left behind are killed by their ids (only
 * when a step failed: once everything stopped, an id may be another process's).
 */
export interface BenchCleanups {
  push(cleanup: () => Promise<void>): void
  track(pid: number): void
  cleanUp(): Promise<void>
  /** Whether a signal ended the run. */
  readonly interrupted: boolean
}

export function benchCleanups(): BenchCleanups {
  const steps: (() => Promise<void>)[] = []
  const pids = new Set<number>()
  let cleaning: Promise<void> | undefined
  let interrupted = false
  const cleanUp = (): Promise<void> => {
    cleaning ??= (async () => {
      let failed = false
      while (steps.length > 0) {
        const step = steps.pop() as () => Promise<void>
        await step().catch((error: unknown) => {
          failed = true
          console.error('cleanup failed:', error instanceof Error ? error.message : error)
        })
      }
      if (!failed) pids.clear()
    })()
    return cleaning
  }
  process.on('exit', () => {
    // Last resort for anything a failed cleanup left behind.
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGKILL')
      } catch {
        // already gone
      }
    }
  })
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      console.error(`\n${signal}: stopping everything the bench started`)
      interrupted = true
      void cleanUp().finally(() => process.exit(130))
    })
  }
  return {
    push: (step) => void steps.push(step),
    track: (pid) => void pids.add(pid),
    cleanUp,
    get interrupted() {
      return interrupted
    },
  }
}
