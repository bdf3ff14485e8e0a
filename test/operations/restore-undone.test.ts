import assert from 'node:assert/strict'
import crypto from 'node:crypto'
import fs from 'node:fs'
import path from 'node:path'
import zlib from 'node:zlib'
import { describe, it } from 'node:test'
import { openDatabase } from '../../src/db/database.ts'
import { createBackup } from '../../src/operations/backup.ts'
import { ADMIN_KEY, STORAGE } from '../helpers/app.ts'
import { runCoffer } from '../helpers/cli.ts'
import { buildLedgerWorld } from '../helpers/ledger-world.ts'
import { serveStore, storesOfThisFile } from '../helpers/stores.ts'

// A restore is one transaction: one that fails after writing most of the rows leaves the store empty.

const admin = { authorization: `Bearer ${ADMIN_KEY}` }
const { scratch, store } = storesOfThisFile('coffer-restore-undone-')

describe(`coffer restore on ${STORAGE} is all or nothing`, () => {
  it('a row found wrong only while writing (its checksum made to match): everything written is undone', async () => {
    const source = await store(STORAGE)
    const service = await serveStore(source)
    try {
      await buildLedgerWorld(service.app, admin, { prefix: 'undo' })
    } finally {
      await service.close()
    }
    const good = path.join(scratch, `good-${STORAGE}.coffer.gz`)
    const database = openDatabase(source.config)
    try {
      await createBackup(database, good)
    } finally {
      await database.close()
    }
    // The last row gets a column too many, and the trailer the checksum of the edited text, so the
    // check before writing passes and the restore meets the row after every other table's rows.
    const lines = zlib.gunzipSync(fs.readFileSync(good)).toString('utf8').split('\n')
    const trailerAt = lines.length - 2
    let lastRow = trailerAt - 1
    while (!lines[lastRow].startsWith('[')) lastRow--
    lines[lastRow] = lines[lastRow].replace(/\]$/, ',0]')
    const body = lines
      .slice(0, trailerAt)
      .map((line) => `${line}\n`)
      .join('')
    const trailer = { ...JSON.parse(lines[trailerAt]), sha256: crypto.createHash('sha256').update(body).digest('hex') }
    const file = path.join(scratch, 'late-row.coffer.gz')
    fs.writeFileSync(file, zlib.gzipSync(`${body}${JSON.stringify(trailer)}\n`))

    const target = await store(STORAGE)
    assert.equal((await runCoffer(target.env, 'migrate')).code, 0)
    const refused = await runCoffer(target.env, 'restore', file)
    assert.equal(refused.code, 1, refused.stdout + refused.stderr)
    assert.match(refused.stderr, /^coffer: .* is corrupted: a row does not match its table's columns\n$/)
    const check = openDatabase(target.config)
    try {
      for (const table of ['users', 'transactions', 'transaction_assets', 'journal_entries', 'events'] as const) {
        const { n } = await check.db
          .selectFrom(table)
          .select((eb) => eb.fn.countAll<number>().as('n'))
          .executeTakeFirstOrThrow()
        assert.equal(Number(n), 0, `${table} kept rows of the failed restore`)
      }
    } finally {
      await check.close()
    }
    // The store is as empty as before: the good backup goes in.
    const restored = await runCoffer(target.env, 'restore', good)
    assert.equal(restored.code, 0, restored.stderr + restored.stdout)
    assert.match(restored.stdout, /ledger OK/)
  })
})
