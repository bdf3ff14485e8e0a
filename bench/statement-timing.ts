import Sqlite from 'better-sqlite3'

/**
 * SQLite's time by statement text, in process: better-sqlite3's statement runs wrapped to add their
 * wall time to the label set at the moment (`label`; nothing is timed while it is undefined), so that
 * the experiments can say which statements a feature makes dearer (`--statements`).
 */
export class StatementTiming {
  /** The label the runs are counted under now; undefined: not timed. */
  label: string | undefined
  /** Time and runs by label, then by statement text. */
  readonly spent = new Map<string, Map<string, { ms: number; runs: number }>>()

  /** Wraps the statement methods of better-sqlite3 (every database of this process). */
  install(): void {
    const probe = new Sqlite(':memory:')
    const prototype = Object.getPrototypeOf(probe.prepare('select 1')) as Record<string, (...values: unknown[]) => unknown>
    probe.close()
    // eslint-disable-next-line @typescript-eslint/no-this-alias
    const timing = this
    for (const method of ['run', 'all', 'get']) {
      const original = prototype[method]
      prototype[method] = function (this: { source: string }, ...values: unknown[]) {
        const label = timing.label
        if (label === undefined) return original.apply(this, values)
        const started = process.hrtime.bigint()
        try {
          return original.apply(this, values)
        } finally {
          // Taken before the text is tidied, which is the timer's own work.
          const ms = Number(process.hrtime.bigint() - started) / 1e6
          const byText = timing.spent.get(label) ?? new Map<string, { ms: number; runs: number }>()
          timing.spent.set(label, byText)
          const text = this.source.replace(/\s+/g, ' ').trim().slice(0, 110)
          const entry = byText.get(text) ?? { ms: 0, runs: 0 }
          entry.ms += ms
          entry.runs++
          byText.set(text, entry)
        }
      }
    }
  }

  /**
   * The `top` statements by µs a transfer under each label (`transfers` counted under it), and the
   * statements' total; with two labels, ranked by how much dearer the second is.
   */
  report(transfers: Map<string, number>, top = 25): string {
    const labels = [...transfers.keys()]
    const per = (label: string, text: string) => ((this.spent.get(label)?.get(text)?.ms ?? 0) * 1000) / (transfers.get(label) ?? 1)
    const runs = (label: string, text: string) => (this.spent.get(label)?.get(text)?.runs ?? 0) / (transfers.get(label) ?? 1)
    const texts = [...new Set(labels.flatMap((label) => [...(this.spent.get(label)?.keys() ?? [])]))]
    const rank = (text: string) => (labels.length === 2 ? per(labels[1], text) - per(labels[0], text) : per(labels[0], text))
    texts.sort((a, b) => Math.abs(rank(b)) - Math.abs(rank(a)))
    const lines = [`µs a transfer (runs a transfer) by statement: ${labels.join(' | ')}`]
    const total = (label: string) => texts.reduce((sum, text) => sum + per(label, text), 0)
    lines.push(`${labels.map((label) => total(label).toFixed(1).padStart(8)).join('')}  all statements`)
    for (const text of texts.slice(0, top))
      lines.push(
        `${labels.map((label) => `${per(label, text).toFixed(2).padStart(8)} (${runs(label, text).toFixed(2)})`).join('')}  ${text}`,
      )
    return lines.join('\n')
  }
}
