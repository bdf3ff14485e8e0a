import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { sql } from 'kysely'
import type { Executor } from '../src/db/database.ts'

/**
 * The same build without the journal's work on the write path, for `--journal-off` comparisons:
 * this checkout's `src` in a temporary directory, the sequencer's start and wake-up taken out of
 * `src/app.ts` (the one place the app runs it and hands it what commits); `remove` deletes the copy.
 */
export function journalOffCopy(root: string): { root: string; remove(): void } {
  const copy = fs.mkdtempSync(path.join(os.tmpdir(), 'coffer-journal-off-'))
  fs.cpSync(path.join(root, 'src'), path.join(copy, 'src'), { recursive: true })
  fs.copyFileSync(path.join(root, 'package.json'), path.join(copy, 'package.json'))
  fs.symlinkSync(fs.realpathSync(path.join(root, 'node_modules')), path.join(copy, 'node_modules'))
  const file = path.join(copy, 'src/app.ts')
  let text = fs.readFileSync(file, 'utf8')
  for (const taken of [
    `app.addHook('onReady', async () => sequencer.start())`,
    'onCommit: (transactions) => sequencer.committed(transactions),',
  ]) {
    // Exactly one occurrence, or the copy would silently keep the journal: the patch needs updating.
    if (text.split(taken).length !== 2) throw new Error(`--journal-off: src/app.ts has no single \`${taken}\` to take out`)
    text = text.replace(taken, '')
  }
  fs.writeFileSync(file, text)
  return { root: copy, remove: () => fs.rmSync(copy, { recursive: true, force: true }) }
}

/**
 * PostgreSQL: a store whose transactions are never positioned needs neither their writer's id nor
 * its index; dropped after the copy's migrations ran, so that the write path is the journal's alone.
 */
export async function dropWriterXid(db: Executor): Promise<void> {
  await sql`alter table transactions alter column journal_xid drop default`.execute(db)
  await sql`drop index transactions_journal_xid`.execute(db)
}
