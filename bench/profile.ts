/**
 * Summarises V8 CPU profiles (`node --cpu-prof`): the functions with the most self time, and the
 * same time grouped by package (or `src/` folder), which says more than any single function.
 *   npx tsx bench/profile.ts <file.cpuprofile> [top] [skip-ms]
 *   npx tsx bench/profile.ts --windows=<windows.json> <file.cpuprofile> [top]   (`compareWindows`)
 */
import fs from 'node:fs'
import path from 'node:path'

interface ProfileNode {
  id: number
  callFrame: { functionName: string; url: string; lineNumber: number }
  children?: number[]
}

interface CpuProfile {
  nodes: ProfileNode[]
  samples: number[]
  timeDeltas: number[]
  startTime: number
  endTime: number
}

export interface ProfileEntry {
  name: string
  selfMs: number
  share: number
}

export interface ProfileSummary {
  totalMs: number
  /** Share of samples that were idle (waiting for I/O). */
  idleShare: number
  functions: ProfileEntry[]
  groups: ProfileEntry[]
}

function groupOf(url: string, functionName: string): string {
  if (functionName === '(garbage collector)') return '(garbage collector)'
  if (functionName === '(program)' || functionName === '(idle)') return functionName
  if (url === '') return '(native)'
  const modules = url.lastIndexOf('node_modules/')
  if (modules >= 0) {
    const rest = url.slice(modules + 'node_modules/'.length).split('/')
    return rest[0].startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0]
  }
  if (url.startsWith('node:')) return `node:${url.slice(5).split('/')[0]}`
  const src = url.indexOf('/src/')
  if (src >= 0) return `coffer src/${url.slice(src + 5).split('/')[0]}`
  return path.basename(url)
}

/** A span of a profile's run (µs of the monotonic clock, V8's sample times) and the transfers made in it. */
export interface ProfileWindow {
  label: string
  start: number
  end: number
  count: number
}

/** Self time (µs) by profile node of the samples `keep` takes, given each sample's time and node. */
function selfTimes(profile: CpuProfile, keep: (at: number) => string | undefined): Map<string, Map<number, number>> {
  const byLabel = new Map<string, Map<number, number>>()
  let at = profile.startTime
  for (let index = 0; index < profile.samples.length; index++) {
    const delta = profile.timeDeltas[index] ?? 0
    at += delta
    const label = keep(at)
    if (label === undefined) continue
    const self = byLabel.get(label) ?? new Map<number, number>()
    byLabel.set(label, self)
    self.set(profile.samples[index], (self.get(profile.samples[index]) ?? 0) + delta)
  }
  return byLabel
}

/** Self time (µs) by function and by group, and the idle and total time, of one set of nodes' self times. */
function tally(byId: Map<number, ProfileNode>, self: Map<number, number>) {
  const functions = new Map<string, number>()
  const groups = new Map<string, number>()
  let total = 0
  let idle = 0
  for (const [id, micros] of self) {
    const { callFrame } = byId.get(id) as ProfileNode
    total += micros
    if (callFrame.functionName === '(idle)') {
      idle += micros
      continue
    }
    const where = callFrame.url
      ? `${callFrame.url
          .replace(/^file:\/\//, '')
          .replace(/^.*node_modules\//, '')
          .replace(/^.*\/src\//, 'src/')}:${callFrame.lineNumber + 1}`
      : ''
    const name = `${callFrame.functionName || '(anonymous)'}${where ? ` ${where}` : ''}`
    functions.set(name, (functions.get(name) ?? 0) + micros)
    const group = groupOf(callFrame.url, callFrame.functionName)
    groups.set(group, (groups.get(group) ?? 0) + micros)
  }
  return { functions, groups, total, idle }
}

const readProfile = (file: string) => JSON.parse(fs.readFileSync(file, 'utf8')) as CpuProfile

/** `skipMs`: leave out the first milliseconds of the profile (start-up, warm-up). */
export function summariseProfile(file: string, top = 15, skipMs = 0): ProfileSummary {
  const profile = readProfile(file)
  const from = profile.startTime + skipMs * 1000
  const self = selfTimes(profile, (at) => (at < from ? undefined : '')).get('') ?? new Map<number, number>()
  const { functions, groups, total, idle } = tally(new Map(profile.nodes.map((node) => [node.id, node])), self)
  const busy = total - idle
  const rank = (map: Map<string, number>) =>
    [...map.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([name, micros]) => ({ name, selfMs: micros / 1000, share: busy > 0 ? micros / busy : 0 }))
  return { totalMs: total / 1000, idleShare: total > 0 ? idle / total : 0, functions: rank(functions), groups: rank(groups) }
}

/**
 * The main thread's time in each labelled kind of window (`transfer-cpu.ts --windows`, the journal
 * bench's `--profile`), µs of busy time a transfer by group, and the `top` functions that differ
 * most between the first two labels: what one way of running costs more than the other,
 * asynchronous work included. Each source is a profile with the windows that fall in it.
 */
export function compareWindows(sources: { file: string; windows: ProfileWindow[] }[], top = 25): string {
  const counts = new Map<string, number>()
  const tallied = new Map<string, ReturnType<typeof tally>[]>()
  for (const source of sources) {
    const profile = readProfile(source.file)
    const sorted = [...source.windows].sort((a, b) => a.start - b.start)
    for (const window of sorted) counts.set(window.label, (counts.get(window.label) ?? 0) + window.count)
    let next = 0
    const self = selfTimes(profile, (at) => {
      while (next < sorted.length && sorted[next].end < at) next++
      return next < sorted.length && sorted[next].start <= at ? sorted[next].label : undefined
    })
    const byId = new Map(profile.nodes.map((node) => [node.id, node]))
    for (const [label, times] of self) tallied.set(label, [...(tallied.get(label) ?? []), tally(byId, times)])
  }
  const labels = [...counts.keys()]
  const sum = (maps: Map<string, number>[]) => {
    const total = new Map<string, number>()
    for (const map of maps) for (const [name, micros] of map) total.set(name, (total.get(name) ?? 0) + micros)
    return total
  }
  const tallies = labels.map((label) => {
    const parts = tallied.get(label) ?? []
    return {
      functions: sum(parts.map((part) => part.functions)),
      groups: sum(parts.map((part) => part.groups)),
      total: parts.reduce((total, part) => total + part.total, 0),
      idle: parts.reduce((total, part) => total + part.idle, 0),
    }
  })
  const per = (micros: number | undefined, i: number) => ((micros ?? 0) / (counts.get(labels[i]) ?? 1)).toFixed(1).padStart(7)
  const lines = [`µs of the main thread a transfer: ${labels.join(' | ')}`]
  lines.push(`  busy ${tallies.map((t, i) => per(t.total - t.idle, i)).join(' ')}`)
  const rows = (pick: (t: (typeof tallies)[number]) => Map<string, number>) => {
    const names = new Set(tallies.flatMap((t) => [...pick(t).keys()]))
    const differences = [...names].map((name) => {
      const values = tallies.map((t, i) => (pick(t).get(name) ?? 0) / (counts.get(labels[i]) ?? 1))
      return { name, values, difference: (values[1] ?? 0) - values[0] }
    })
    return differences
      .sort((a, b) => Math.abs(b.difference) - Math.abs(a.difference))
      .slice(0, top)
      .map(
        ({ name, values, difference }) =>
          `  ${values.map((v) => v.toFixed(1).padStart(7)).join(' ')} ${difference.toFixed(1).padStart(7)}  ${name}`,
      )
  }
  lines.push('  by package / folder (the last column: the second label less the first):', ...rows((t) => t.groups))
  lines.push('  functions:', ...rows((t) => t.functions))
  return lines.join('\n')
}

/**
 * The main thread's profile among those `node --cpu-prof` wrote to `dir`: one file a thread,
 * named `CPU.<date>.<time>.<pid>.<thread id>.<seq>.cpuprofile`, the main thread's id 0 (tsx's
 * loader thread and any worker have others, and may sort first). Of several processes' main
 * threads, the largest profile (the busiest).
 */
export function mainThreadProfile(dir: string): string | undefined {
  const files = fs.existsSync(dir) ? fs.readdirSync(dir).filter((file) => /^CPU\.\d+\.\d+\.\d+\.0\.\d+\.cpuprofile$/.test(file)) : []
  const sized = files.map((file) => ({ file: path.join(dir, file), size: fs.statSync(path.join(dir, file)).size }))
  return sized.sort((a, b) => b.size - a.size)[0]?.file
}

export function formatSummary(summary: ProfileSummary): string {
  const lines = [
    `profile: ${(summary.totalMs / 1000).toFixed(1)} s, idle ${(summary.idleShare * 100).toFixed(0)} %; shares below are of busy time`,
  ]
  lines.push('  by package / folder:')
  for (const entry of summary.groups) lines.push(`    ${(entry.share * 100).toFixed(1).padStart(5)} %  ${entry.name}`)
  lines.push('  top functions (self time):')
  for (const entry of summary.functions) lines.push(`    ${(entry.share * 100).toFixed(1).padStart(5)} %  ${entry.name}`)
  return lines.join('\n')
}

if (process.argv[1] && import.meta.url.endsWith(path.basename(process.argv[1]))) {
  const windows = process.argv.find((arg) => arg.startsWith('--windows='))?.slice('--windows='.length)
  const [file, top, skip] = process.argv.slice(2).filter((arg) => !arg.startsWith('--windows='))
  if (file && windows) {
    const read = JSON.parse(fs.readFileSync(windows, 'utf8')) as ProfileWindow[]
    console.log(compareWindows([{ file, windows: read }], top ? Number(top) : 25))
    process.exit(0)
  }
  if (!file) {
    console.error('usage: tsx bench/profile.ts <file.cpuprofile> [top] [skip-ms]')
    process.exit(2)
  }
  console.log(formatSummary(summariseProfile(file, top ? Number(top) : 15, skip ? Number(skip) : 0)))
}
