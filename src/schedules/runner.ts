import type { FastifyBaseLogger } from 'fastify'
import type { SchedulesService } from './schedules.service.ts'

/** Schedules looked at per query of the runner. */
const PASS = 100

/**
 * The job that runs due schedules: every `intervalMs` it takes the schedules due now and runs
 * the next occurrence of each (`SchedulesService.runDue`), again and again while any is still
 * due, so that occurrences missed while the service was down run one after the other, in order.
 * Every instance runs one; the data decides who runs an occurrence (`runDue`), so the order in
 * which an instance visits schedules is shuffled only to spread the instances over them.
 */
export function startScheduleRunner(schedules: SchedulesService, log: FastifyBaseLogger, intervalMs: number): { stop(): Promise<void> } {
  let timer: NodeJS.Timeout | undefined
  let running: Promise<void> | undefined
  let stopped = false
  const round = async () => {
    try {
      for (;;) {
        const due = shuffle(await schedules.findDue(PASS))
        let ran = 0
        for (const { id } of due) {
          if (stopped) return
          if (await schedules.runDue(id)) ran++
        }
        if (ran === 0) return
      }
    } catch (error) {
      log.error({ err: error }, 'running schedules failed; the next round tries again')
    }
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
