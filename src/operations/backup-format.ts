import crypto from 'node:crypto'
import fs from 'node:fs'
import zlib from 'node:zlib'

/**
 * The backup file: gzip of JSON lines, the same whichever storage wrote or reads it.
 *
 *   {"coffer_backup":1, "created_at", "coffer_version", "source", "migrations":[…], "tables":{name: rows}, …}
 *   {"table":"users","columns":["id","username",…]}      one per table, in restore order
 *   [1,"alice",…]                                        its rows, one JSON array each
 *   …
 *   {"end":true,"rows":N,"sha256":"…"}                   SHA-256 of every byte before this line
 *
 * The counts and checksum let a restore refuse a truncated or altered file before writing anything.
 */
export const BACKUP_FORMAT = 1

export interface BackupHeader {
  coffer_backup: number
  created_at: string
  coffer_version: string
  source: 'sqlite' | 'postgres'
  /** Migrations applied to the store the backup was taken from, in order. */
  migrations: string[]
  /** Rows per table, in the order the file holds them. */
  tables: Record<string, number>
  /** Id of the key the webhook secrets in it are sealed with (the key itself is never in a backup); null when none are. */
  secrets_key_id: string | null
}

export interface TableStart {
  table: string
  columns: string[]
}

export interface BackupTrailer {
  end: true
  rows: number
  sha256: string
}

/** A backup that cannot be taken or restored, with a one-line reason for the operator. */
export class BackupError extends Error {}

/** Writes the lines of a backup to a gzip file and keeps the running checksum. */
export class BackupWriter {
  private readonly hash = crypto.createHash('sha256')
  // The fastest level: compressing is most of a backup's work, and level 6 saves little more on these lines.
  // Several pages may wait for it, so reading the next goes on meanwhile (zlib works off the main thread).
  // (zlib passes stream options on to its Transform; its option type does not name them.)
  private readonly gzip = zlib.createGzip({ level: 1, chunkSize: 1 << 18, writableHighWaterMark: 1 << 24 } as zlib.ZlibOptions)
  private readonly output: fs.WriteStream
  private readonly finished: Promise<void>

  constructor(private readonly file: string) {
    this.output = fs.createWriteStream(file, { mode: 0o600 })
    this.finished = new Promise((resolve, reject) => {
      this.output.on('close', resolve)
      this.output.on('error', reject)
      this.gzip.on('error', reject)
    })
    // A write error (disk full) surfaces at the next write or at finish, never unhandled.
    this.finished.catch(() => {})
    this.gzip.pipe(this.output)
  }

  async write(value: unknown): Promise<void> {
    await this.writeLines(`${JSON.stringify(value)}\n`)
  }

  /** Whole lines of JSON, each ending in a newline. */
  async writeLines(lines: string | Buffer): Promise<void> {
    const bytes = typeof lines === 'string' ? Buffer.from(lines) : lines
    this.hash.update(bytes)
    if (!this.gzip.write(bytes)) await Promise.race([new Promise((resolve) => this.gzip.once('drain', resolve)), this.finished])
  }

  /** Appends the trailer and waits for the file to be on disk. */
  async finish(rows: number): Promise<void> {
    const trailer: BackupTrailer = { end: true, rows, sha256: this.hash.digest('hex') }
    this.gzip.end(`${JSON.stringify(trailer)}\n`)
    await this.finished
    const fd = fs.openSync(this.file, 'r')
    try {
      fs.fsyncSync(fd)
    } finally {
      fs.closeSync(fd)
    }
  }

  destroy(): void {
    this.gzip.destroy()
    this.output.destroy()
  }

  /** Destroys the writer and waits until its file is closed, so that the file can be written anew. */
  async discard(): Promise<void> {
    this.destroy()
    await this.finished.catch(() => {})
  }
}

/** Decompressed whole lines, a block at a time: each block ends with a newline. */
async function* readBlocks(file: string): AsyncGenerator<Buffer> {
  const input = fs.createReadStream(file, { highWaterMark: 1 << 20 })
  // Decompressed off the main thread a few blocks ahead of the parsing.
  const gunzip = zlib.createGunzip({ chunkSize: 1 << 18, readableHighWaterMark: 1 << 22 } as zlib.ZlibOptions)
  input.on('error', (error) => gunzip.destroy(error))
  input.pipe(gunzip)
  let rest: Buffer | undefined
  try {
    for await (const chunk of gunzip as AsyncIterable<Buffer>) {
      const data = rest ? Buffer.concat([rest, chunk]) : chunk
      const end = data.lastIndexOf(NEWLINE) + 1
      rest = end < data.length ? Buffer.from(data.subarray(end)) : undefined
      if (end > 0) yield data.subarray(0, end)
    }
  } catch (error) {
    if (error instanceof BackupError) throw error
    const code = (error as NodeJS.ErrnoException).code
    if (code === 'ENOENT') throw new BackupError(`${file}: no such file`)
    if (code === 'Z_BUF_ERROR' || /unexpected end/i.test((error as Error).message))
      throw new BackupError(`${file} is truncated: it ends before the backup does`)
    if (typeof code === 'string' && code.startsWith('Z_'))
      throw new BackupError(`${file} is corrupted or not a Coffer backup (${(error as Error).message})`)
    throw error
  } finally {
    input.destroy()
  }
  if (rest) throw new BackupError(`${file} is truncated: it ends in the middle of a line`)
}

const NEWLINE = 0x0a
const OPEN_BRACKET = 0x5b

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text)
  } catch {
    throw new BackupError('the backup is corrupted: a line is not valid JSON')
  }
}

export interface BackupSection {
  table: string
  columns: string[]
  rows: unknown[][]
}

/**
 * Reads a backup block by block, checking its structure, counts and checksum. With `onRows`, the
 * rows are parsed and handed over in chunks of at most `chunk` per table; without, a check only
 * counts them: the checksum covers their bytes, and the restore's own read checks their shapes.
 */
export async function readBackup(
  file: string,
  onHeader: (header: BackupHeader) => void,
  onRows?: (section: BackupSection) => Promise<void> | void,
  chunk = 1000,
): Promise<BackupTrailer> {
  const hash = crypto.createHash('sha256')
  let header: BackupHeader | undefined
  let section: BackupSection | undefined
  let trailer: BackupTrailer | undefined
  const counts = new Map<string, number>()
  let total = 0
  const flush = async () => {
    if (onRows && section && section.rows.length > 0) {
      await onRows(section)
      section = { ...section, rows: [] }
    }
  }
  // A run of row lines: counted, and with `onRows` parsed in one go as the items of one JSON array
  // (a check only counts them: their text is not even decoded).
  const rows = async (block: Buffer, from: number, to: number, lines: number) => {
    if (!header) throw new BackupError(`${file} is not a Coffer backup`)
    if (trailer) throw new BackupError(`${file} is corrupted: it goes on after its end`)
    if (!section) throw new BackupError(`${file} is corrupted: a row does not match its table's columns`)
    counts.set(section.table, (counts.get(section.table) ?? 0) + lines)
    total += lines
    if (!onRows) return
    const values = parseJson(`[${block.toString('utf8', from, to).replaceAll('\n', ',')}]`) as unknown[]
    if (values.length !== lines) throw new BackupError('the backup is corrupted: a line is not valid JSON')
    for (const value of values) {
      if (!Array.isArray(value) || value.length !== section.columns.length)
        throw new BackupError(`${file} is corrupted: a row does not match its table's columns`)
      section.rows.push(value)
      if (section.rows.length >= chunk) await flush()
    }
  }
  const line = async (value: unknown) => {
    if (trailer) throw new BackupError(`${file} is corrupted: it goes on after its end`)
    if (!header) {
      header = checkHeader(file, value)
      onHeader(header)
    } else if (isTableStart(value)) {
      await flush()
      if (!(value.table in header.tables) || counts.has(value.table))
        throw new BackupError(`${file} is corrupted: unexpected table ${value.table}`)
      section = { table: value.table, columns: value.columns, rows: [] }
      counts.set(value.table, 0)
    } else if (isTrailer(value)) {
      await flush()
      trailer = value
    } else {
      throw new BackupError(`${file} is corrupted: a line is neither a table, a row nor the end`)
    }
  }
  // The line seen last, hashed once another follows: the trailer, last, is not in its own checksum.
  let held: Buffer | undefined
  for await (const block of readBlocks(file)) {
    const last = block.lastIndexOf(NEWLINE, block.length - 2) + 1
    if (held) hash.update(held)
    hash.update(block.subarray(0, last))
    held = block.subarray(last)
    for (let at = 0; at < block.length;) {
      let end = at
      let lines = 0
      while (end < block.length && block[end] === OPEN_BRACKET) {
        end = block.indexOf(NEWLINE, end) + 1
        lines++
      }
      if (lines > 0) await rows(block, at, end - 1, lines)
      else {
        end = block.indexOf(NEWLINE, at) + 1
        await line(parseJson(block.toString('utf8', at, end - 1)))
      }
      at = end
    }
  }
  if (!header) throw new BackupError(`${file} is empty`)
  if (!trailer) throw new BackupError(`${file} is truncated: it ends before the backup does`)
  if (trailer.sha256 !== hash.digest('hex')) throw new BackupError(`${file} is corrupted: its checksum does not match its contents`)
  for (const [table, expected] of Object.entries(header.tables)) {
    if ((counts.get(table) ?? 0) !== expected)
      throw new BackupError(`${file} is corrupted: ${table} holds ${counts.get(table) ?? 0} rows, the header says ${expected}`)
  }
  if (trailer.rows !== total) throw new BackupError(`${file} is corrupted: it holds ${total} rows, its end says ${trailer.rows}`)
  return trailer
}

function checkHeader(file: string, value: unknown): BackupHeader {
  const header = value as Partial<BackupHeader> | null
  if (!header || typeof header !== 'object' || typeof header.coffer_backup !== 'number')
    throw new BackupError(`${file} is not a Coffer backup`)
  if (header.coffer_backup > BACKUP_FORMAT) {
    throw new BackupError(
      `${file} has backup format ${header.coffer_backup}, newer than this Coffer reads (${BACKUP_FORMAT}): ` +
        `restore it with Coffer ${header.coffer_version ?? 'of that version'} or later`,
    )
  }
  if (!Array.isArray(header.migrations) || typeof header.tables !== 'object' || header.tables === null)
    throw new BackupError(`${file} is corrupted: its header is incomplete`)
  return { secrets_key_id: null, ...header } as BackupHeader
}

function isTableStart(value: unknown): value is TableStart {
  const start = value as TableStart | null
  return (
    !!start &&
    typeof start === 'object' &&
    typeof start.table === 'string' &&
    Array.isArray(start.columns) &&
    start.columns.every((column) => typeof column === 'string')
  )
}

function isTrailer(value: unknown): value is BackupTrailer {
  const end = value as BackupTrailer | null
  return !!end && typeof end === 'object' && end.end === true && typeof end.sha256 === 'string' && typeof end.rows === 'number'
}
