import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import zlib from 'node:zlib'
import { before, describe, it } from 'node:test'
import { openDatabase } from '../../src/db/database.ts'
import { createBackup } from '../../src/operations/backup.ts'
import { ADMIN_KEY, STORAGE } from '../helpers/app.ts'
import { runCoffer } from '../helpers/cli.ts'
import { buildLedgerWorld } from '../helpers/ledger-world.ts'
import { serveStore, storesOfThisFile, type Store } from '../helpers/stores.ts'

// A file of its own, apart from operations-backup.test.ts: each case runs `coffer` once or twice
// in a process of its own, which made one file of both too long for the per-file limit on a busy
// machine.

const admin = { authorization: `Bearer ${ADMIN_KEY}` }
const { scratch, store, made: stores } = storesOfThisFile('coffer-restore-refusals-')

/** The rows of each table in a store, to show that a refused restore changed nothing. */
async function countAll(target: Store): Promise<string> {
  const database = openDatabase(target.config)
  try {
    const counts = []
    for (const table of ['users', 'wallets', 'transactions', 'events'] as const) {
      const row = await database.db
        .selectFrom(table)
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .executeTakeFirstOrThrow()
      counts.push(`${table}=${Number(row.n)}`)
    }
    return counts.join(' ')
  } finally {
    await database.close()
  }
}

describe(`coffer restore refuses bad input on ${STORAGE}, writing nothing`, () => {
  let good: string
  before(async () => {
    const source = await store(STORAGE)
    const service = await serveStore(source)
    try {
      await buildLedgerWorld(service.app, admin, { prefix: 'bad' })
    } finally {
      await service.close()
    }
    good = path.join(scratch, `good-${STORAGE}.coffer.gz`)
    const database = openDatabase(source.config)
    try {
      await createBackup(database, good)
    } finally {
      await database.close()
    }
  })

  async function refused(file: string, pattern: RegExp, target?: Store): Promise<void> {
    const into = target ?? (await store(STORAGE))
    const before = target ? await countAll(into) : undefined
    const result = await runCoffer(into.env, 'restore', file)
    assert.equal(result.code, 1, result.stdout + result.stderr)
    assert.match(result.stderr, pattern)
    assert.equal(result.stderr.trim().split('\n').length, 1, `not one line: ${result.stderr}`)
    assert.equal(result.stdout, '')
    if (target) assert.equal(await countAll(into), before)
    else if (into.kind === 'sqlite') assert.ok(!fs.existsSync(path.join(into.config.dataDir, 'coffer.sqlite')), 'a SQLite file was created')
    else assert.equal((await runCoffer(into.env, 'migrate', '--status')).stdout.match(/^applied/gm), null)
  }

  it('a truncated file', async () => {
    const bytes = fs.readFileSync(good)
    const cut = path.join(scratch, 'truncated.coffer.gz')
    fs.writeFileSync(cut, bytes.subarray(0, Math.floor(bytes.length * 0.7)))
    await refused(cut, /^coffer: .*truncated.coffer.gz is truncated/)
  })

  it('a file cut exactly at a line, whose gzip stream is complete', async () => {
    const text = zlib.gunzipSync(fs.readFileSync(good)).toString('utf8').split('\n')
    const cut = path.join(scratch, 'cut-at-line.coffer.gz')
    fs.writeFileSync(cut, zlib.gzipSync(`${text.slice(0, 12).join('\n')}\n`))
    await refused(cut, /^coffer: .* is truncated: it ends before the backup does/)
  })

  it('a corrupted file (one byte changed)', async () => {
    const bytes = Buffer.from(fs.readFileSync(good))
    bytes[Math.floor(bytes.length / 2)] ^= 0x55
    const corrupted = path.join(scratch, 'corrupted.coffer.gz')
    fs.writeFileSync(corrupted, bytes)
    await refused(corrupted, /^coffer: .*(corrupted|truncated)/)
  })

  it('a file whose rows were edited (the checksum no longer matches)', async () => {
    const text = zlib.gunzipSync(fs.readFileSync(good)).toString('utf8')
    // One line of the journal gets one more unit (PostgreSQL writes a space after each comma).
    const edited = text.replace(/\n\[2, ?1, ?1\]\n/, '\n[2,1,2]\n')
    assert.notEqual(edited, text)
    const file = path.join(scratch, 'edited.coffer.gz')
    fs.writeFileSync(file, zlib.gzipSync(edited))
    await refused(file, /^coffer: .* is corrupted: its checksum does not match its contents/)
  })

  it('a backup of a future format', async () => {
    const text = zlib.gunzipSync(fs.readFileSync(good)).toString('utf8').replace('{"coffer_backup":1,', '{"coffer_backup":2,')
    const future = path.join(scratch, 'future.coffer.gz')
    fs.writeFileSync(future, zlib.gzipSync(text))
    await refused(future, /^coffer: .* has backup format 2, newer than this Coffer reads \(1\)/)
  })

  it('a backup whose schema has a migration this release does not know', async () => {
    const text = zlib
      .gunzipSync(fs.readFileSync(good))
      .toString('utf8')
      .replace('"0005_ledger_references"', '"0005_ledger_references","9999_from_the_future"')
    const future = path.join(scratch, 'future-schema.coffer.gz')
    fs.writeFileSync(future, zlib.gzipSync(text))
    // The header is read before the checksum is known: the schema is refused first.
    await refused(future, /^coffer: .* was made by a newer Coffer .*9999_from_the_future/)
  })

  it('a store that already holds data', async () => {
    const target = await store(STORAGE)
    const service = await serveStore(target)
    try {
      await buildLedgerWorld(service.app, admin, { prefix: 'full', transfers: 1 })
    } finally {
      await service.close()
    }
    await refused(good, /^coffer: the store is not empty \(it holds 2 users, 2 wallets, .*\): restore only into an empty store$/m, target)
  })

  it('coffer backup to a place it cannot write: one line, no file', async () => {
    const source = stores[stores.length - 1]
    const result = await runCoffer(source.env, 'backup', path.join(scratch, 'no-such-dir', 'b.coffer.gz'))
    assert.equal(result.code, 1)
    assert.match(result.stderr, /^coffer: could not write .*b\.coffer\.gz: its directory does not exist\n$/)
  })

  it('a file that does not exist, or is not a backup', async () => {
    await refused(path.join(scratch, 'missing.coffer.gz'), /^coffer: .*missing.coffer.gz: no such file/)
    const plain = path.join(scratch, 'plain.txt')
    fs.writeFileSync(plain, 'hello')
    await refused(plain, /^coffer: .*plain.txt is corrupted or not a Coffer backup/)
  })
})
