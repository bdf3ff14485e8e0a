import fs from 'node:fs'

/**
 * CPU time used by processes, from /proc (Linux). Throughput depends on what else the machine is
 * doing; CPU time per request much less so, which makes it the figure to compare between runs.
 * Returns NaN where /proc is not available.
 */
const TICKS_PER_SECOND = 100

function readStat(pid: number | string): string[] | undefined {
  try {
    const text = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
    // Fields after the command name, which is in parentheses and may contain spaces.
    return text.slice(text.lastIndexOf(')') + 2).split(' ')
  } catch {
    return undefined
  }
}

/** User + system CPU milliseconds of one process. */
export function processCpuMs(pid: number): number {
  const fields = readStat(pid)
  if (!fields) return NaN
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / TICKS_PER_SECOND
}

/** User + system CPU milliseconds of one thread of a process (its main thread: `tid` = `pid`). */
export function threadCpuMs(pid: number, tid = pid): number {
  const fields = readStat(`${pid}/task/${tid}`)
  if (!fields) return NaN
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / TICKS_PER_SECOND
}

/**
 * User + system CPU milliseconds of a process and its direct children (a PostgreSQL server and its
 * backends), counting children that have exited too (the parent's cutime and cstime).
 */
export function processTreeCpuMs(pid: number): number {
  const own = readStat(pid)
  if (!own) return NaN
  let total = ((Number(own[11]) + Number(own[12]) + Number(own[13]) + Number(own[14])) * 1000) / TICKS_PER_SECOND
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    const fields = readStat(Number(entry))
    if (fields && Number(fields[1]) === pid) total += ((Number(fields[11]) + Number(fields[12])) * 1000) / TICKS_PER_SECOND
  }
  return total
}

/** Whole-machine busy and total jiffies, to tell how busy the machine was during a scenario. */
export function machineCpu(): { busy: number; total: number } {
  try {
    const line = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0]
    const values = line.trim().split(/\s+/).slice(1).map(Number)
    const idle = values[3] + (values[4] ?? 0)
    const total = values.reduce((sum, value) => sum + value, 0)
    return { busy: total - idle, total }
  } catch {
    return { busy: NaN, total: NaN }
  }
}
