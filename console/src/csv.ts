/**
 * A CSV text as rows of cells (RFC 4180: fields in double quotes may hold commas, quotes doubled
 * and line breaks; lines end with LF or CRLF). Blank lines are dropped. Throws on a quote left open.
 */
export function parseCsv(text: string): string[][] {
  const rows: string[][] = []
  let row: string[] = []
  let cell = ''
  let quoted = false
  let i = 0
  const endRow = () => {
    row.push(cell)
    if (row.some((value) => value.trim() !== '')) rows.push(row)
    row = []
    cell = ''
  }
  while (i < text.length) {
    const char = text[i]
    if (quoted) {
      if (char === '"' && text[i + 1] === '"') {
        cell += '"'
        i += 2
        continue
      }
      if (char === '"') quoted = false
      else cell += char
      i += 1
      continue
    }
    if (char === '"' && cell.trim() === '') {
      quoted = true
      cell = ''
    } else if (char === ',') {
      row.push(cell)
      cell = ''
    } else if (char === '\n' || char === '\r') {
      endRow()
      if (char === '\r' && text[i + 1] === '\n') i += 1
    } else {
      cell += char
    }
    i += 1
  }
  if (quoted) throw new Error('a quoted field is not closed')
  endRow()
  return rows
}
