import fs from 'node:fs'

/** Data files are the service user's only, set explicitly: the umask never fixes a mode. */
const PRIVATE_FILE_MODE = 0o600

/** Creates the data directory owner-only (0700) when it does not exist yet; an existing one is left as it is. */
export function makeDataDirectory(dir: string): void {
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 })
}

/** Writes `content` to a new file (`wx`: an existing one is an EEXIST error) or over one (`w`), mode 0600. */
export function writePrivateFile(file: string, content: string, flag: 'wx' | 'w' = 'wx'): void {
  const fd = fs.openSync(file, flag, PRIVATE_FILE_MODE)
  try {
    fs.fchmodSync(fd, PRIVATE_FILE_MODE)
    fs.writeFileSync(fd, content)
  } finally {
    fs.closeSync(fd)
  }
}

/** Creates `file` or narrows it to 0600; another user's file is left alone. */
export function makePrivate(file: string, { create = false }: { create?: boolean } = {}): void {
  if (create) fs.closeSync(fs.openSync(file, 'a', PRIVATE_FILE_MODE))
  let stat: fs.Stats
  try {
    stat = fs.statSync(file)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return
    throw error
  }
  if ((stat.mode & 0o777) === PRIVATE_FILE_MODE || (process.getuid && stat.uid !== process.getuid())) return
  fs.chmodSync(file, PRIVATE_FILE_MODE)
}
