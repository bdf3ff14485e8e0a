import { setTimeout as sleep } from 'node:timers/promises'
import type { FastifyBaseLogger } from 'fastify'
import type { SchedulesService } from './schedules.service.ts'

/** Schedules looked at per query of the runner. */
const PASS = 100
/** The slowest pace: a few due runs never wait on the pace (20 a second, 50 ms apart at most). */
const MIN_RUNS_PER_SECOND = 20

/**
 * The job that runs due schedules: every `intervalMs` it takes the schedules due now and runs
 * the next occurrence of each (`SchedulesService.runDue`), again and again while any is still
 * due, so that occurrences missed while the service was down run one after the other, in order.
 * Every instance runs one; the data decides who runs an occurrence (`runDue`), so the order in
 * which an instance visits schedules is shuffled only to spread the instances over them.
 *
 * A backlog is paced to end `paceSeconds` after the round that found it began, so that many runs
 * falling due together share the database with transfers rather than crowd them out; never slower
 * than `MIN_RUNS_PER_SECOND`, and flat out once that time has passed (late is worse than slow).
 * `paceSeconds` 0 runs them flat out.
 */
export function startScheduleRunner(
  schedules: SchedulesService,
  log: FastifyBaseLogger,
  { intervalMs, paceSeconds }: { intervalMs: number; paceSeconds: number },
): { stop(): Promise<void> } {
  let timer: NodeJS.Timeout | undefined
  let running: Promise<void> | undefined
  let stopped = false
  const round = async () => {
    const deadline = performance.now() + paceSeconds * 1000
    try {
      for (;;) {
        const due = shuffle(await schedules.findDue(PASS))
        if (due.length === 0) return
        const gapMs = await gapBetweenRuns(due.length, deadline)
        let ran = 0
        for (const [i, { id }] of due.entries()) {
          if (stopped) return
          const started = performance.now()
          if (await schedules.runDue(id)) ran++
          const wait = gapMs - (performance.now() - started)
          if (wait > 0 && i < due.length - 1) await sleep(wait)
        }
        if (ran === 0) return
      }
    } catch (error) {
      log.error({ err: error }, 'running schedules failed; the next round tries again')
    }
  }
  /** Milliseconds from the start of one run to the next, for the backlog to end by the deadline. */
  const gapBetweenRuns = async (found: number, deadline: number): Promise<number> => {
    const secondsLeft = (deadline - performance.now()) / 1000
    if (secondsLeft <= 0) return 0
    const backlog = found < PASS ? found : await schedules.countDue()
    return 1000 / Math.max(MIN_RUNS_PER_SECOND, backlog / secondsLeft)
  }
  const next = () => {
    if (stopped) return
    timer = setTimeout(() => {
      running = round().finally(next)
    }, intervalMs)
    timer.unref()
  }
  next()
  return {
    async stop() {
      stopped = true
      clearTimeout(timer)
      await running
    },
  }
}

function shuffle<T>(items: T[]): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1))
    ;[items[i], items[j]] = [items[j], items[i]]
  }
  return items
}
