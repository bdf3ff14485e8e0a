/**
 * A small line plot as SVG, written from the bench's figures: x on a log scale (ledger sizes grow
 * by tens), y linear from 0, a dashed target line, a legend. No dependency: the bench writes it
 * where people look at it.
 */

export interface PlotSeries {
  name: string
  /** Series sharing a colour (one measure on two storages) differ by `dashed`. */
  colour?: number
  dashed?: boolean
  points: { x: number; y: number }[]
}

export interface Plot {
  title: string
  subtitle?: string
  /** A warning under the plot (figures taken on a busy machine). */
  note?: string
  xLabel: string
  yLabel: string
  target?: { y: number; label: string }
  series: PlotSeries[]
}

const COLOURS = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#8c564b']

const escape = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')

function compact(value: number): string {
  if (value >= 1_000_000) return `${value / 1_000_000}M`
  if (value >= 1_000) return `${value / 1_000}k`
  return String(value)
}

export function plotSvg(plot: Plot): string {
  const [width, height] = [760, 440]
  const margin = { left: 70, right: 230, top: 60, bottom: 60 }
  const points = plot.series.flatMap((series) => series.points).filter((point) => Number.isFinite(point.y) && point.x > 0)
  const xs = points.map((point) => point.x)
  const [xMin, xMax] = [Math.min(...xs), Math.max(...xs)]
  const [logMin, logMax] = [Math.floor(Math.log10(xMin)), Math.max(Math.ceil(Math.log10(xMax)), Math.floor(Math.log10(xMin)) + 1)]
  // Five ticks of a round step (0.1, 0.2, 0.5, 1, 2, 5, … ).
  const highest = Math.max(plot.target ? plot.target.y * 1.2 : 0, ...points.map((point) => point.y)) || 1
  const magnitude = 10 ** Math.floor(Math.log10(highest / 5))
  const step = [1, 2, 5, 10].map((factor) => factor * magnitude).find((candidate) => candidate * 5 >= highest) ?? 10 * magnitude
  const yMax = step * 5
  const plotWidth = width - margin.left - margin.right
  const plotHeight = height - margin.top - margin.bottom
  const x = (value: number) => margin.left + ((Math.log10(value) - logMin) / (logMax - logMin)) * plotWidth
  const y = (value: number) => margin.top + plotHeight - (value / yMax) * plotHeight
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="12">`,
    `<rect width="${width}" height="${height}" fill="white"/>`,
    `<text x="${margin.left}" y="24" font-size="15" font-weight="bold">${escape(plot.title)}</text>`,
  ]
  if (plot.subtitle) out.push(`<text x="${margin.left}" y="42" fill="#555">${escape(plot.subtitle)}</text>`)
  if (plot.note) out.push(`<text x="${margin.left}" y="${height - 2}" fill="#b00" font-weight="bold">${escape(plot.note)}</text>`)
  // Axes, with a tick at every power of ten and five on the y axis.
  out.push(
    `<line x1="${margin.left}" y1="${margin.top + plotHeight}" x2="${margin.left + plotWidth}" y2="${margin.top + plotHeight}" stroke="black"/>`,
    `<line x1="${margin.left}" y1="${margin.top}" x2="${margin.left}" y2="${margin.top + plotHeight}" stroke="black"/>`,
  )
  for (let power = logMin; power <= logMax; power++) {
    const at = x(10 ** power)
    out.push(
      `<line x1="${at}" y1="${margin.top}" x2="${at}" y2="${margin.top + plotHeight}" stroke="#eee"/>`,
      `<text x="${at}" y="${margin.top + plotHeight + 18}" text-anchor="middle">${compact(10 ** power)}</text>`,
    )
  }
  for (let tick = 0; tick <= 5; tick++) {
    const value = (yMax * tick) / 5
    out.push(
      `<line x1="${margin.left}" y1="${y(value)}" x2="${margin.left + plotWidth}" y2="${y(value)}" stroke="#eee"/>`,
      `<text x="${margin.left - 8}" y="${y(value) + 4}" text-anchor="end">${value.toFixed(value < 10 ? 1 : 0)}</text>`,
    )
  }
  out.push(
    `<text x="${margin.left + plotWidth / 2}" y="${height - 16}" text-anchor="middle">${escape(plot.xLabel)}</text>`,
    `<text transform="translate(18 ${margin.top + plotHeight / 2}) rotate(-90)" text-anchor="middle">${escape(plot.yLabel)}</text>`,
  )
  if (plot.target)
    out.push(
      `<line x1="${margin.left}" y1="${y(plot.target.y)}" x2="${margin.left + plotWidth}" y2="${y(plot.target.y)}" stroke="#999" stroke-dasharray="2 3"/>`,
      `<text x="${margin.left + 6}" y="${y(plot.target.y) - 4}" fill="#777">${escape(plot.target.label)}</text>`,
    )
  plot.series.forEach((series, index) => {
    const colour = COLOURS[(series.colour ?? index) % COLOURS.length]
    const dash = series.dashed ? ' stroke-dasharray="6 4"' : ''
    const line = series.points
      .filter((point) => Number.isFinite(point.y) && point.x > 0)
      .map((point) => `${x(point.x).toFixed(1)},${y(point.y).toFixed(1)}`)
    out.push(`<polyline points="${line.join(' ')}" fill="none" stroke="${colour}" stroke-width="2"${dash}/>`)
    for (const point of line) {
      const [cx, cy] = point.split(',')
      out.push(`<circle cx="${cx}" cy="${cy}" r="3" fill="${colour}"/>`)
    }
    const legendY = margin.top + 10 + index * 18
    const legendX = margin.left + plotWidth + 16
    out.push(
      `<line x1="${legendX}" y1="${legendY}" x2="${legendX + 24}" y2="${legendY}" stroke="${colour}" stroke-width="2"${dash}/>`,
      `<text x="${legendX + 30}" y="${legendY + 4}">${escape(series.name)}</text>`,
    )
  })
  out.push('</svg>')
  return out.join('\n') + '\n'
}
