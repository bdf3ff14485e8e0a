/**
 * Summarises V8 CPU profiles (`node --cpu-prof`): the functions with the most self time, and the
 * same time grouped by package (or `src/` folder), which says more than any single function.
 *   npx tsx bench/profile.ts <file.cpuprofile> [top] [skip-ms]
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

/** `skipMs`: leave out the first milliseconds of the profile (start-up, warm-up). */
export function summariseProfile(file: string, top = 15, skipMs = 0): ProfileSummary {
  const profile = JSON.parse(fs.readFileSync(file, 'utf8')) as CpuProfile
  const byId = new Map(profile.nodes.map((node) => [node.id, node]))
  const self = new Map<number, number>()
  let elapsed = 0
  for (let index = 0; index < profile.samples.length; index++) {
    const delta = profile.timeDeltas[index] ?? 0
    elapsed += delta
    if (elapsed < skipMs * 1000) continue
    self.set(profile.samples[index], (self.get(profile.samples[index]) ?? 0) + delta)
  }
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
  const busy = total - idle
  const rank = (map: Map<string, number>) =>
    [...map.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([name, micros]) => ({ name, selfMs: micros / 1000, share: busy > 0 ? micros / busy : 0 }))
  return { totalMs: total / 1000, idleShare: total > 0 ? idle / total : 0, functions: rank(functions), groups: rank(groups) }
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
  const [file, top, skip] = process.argv.slice(2)
  if (!file) {
    console.error('usage: tsx bench/profile.ts <file.cpuprofile> [top] [skip-ms]')
    process.exit(2)
  }
  console.log(formatSummary(summariseProfile(file, top ? Number(top) : 15, skip ? Number(skip) : 0)))
}
