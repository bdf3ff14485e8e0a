import assert from 'node:assert/strict'
import crypto from 'node:crypto'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import zlib from 'node:zlib'
import { after, before, describe, it } from 'node:test'
import { openDatabase } from '../src/db/database.ts'
import { verifyLedger } from '../src/ledger/verify.ts'
import { createBackup } from '../src/operations/backup.ts'
import { checkBackup, restoreBackup } from '../src/operations/restore.ts'
import { STORAGE } from './helpers/app.ts'
import { runCoffer } from './helpers/cli.ts'
import { buildLedgerWorld, checkLedgerWorld } from './helpers/ledger-world.ts'
import { waitUntil } from './helpers/receiver.ts'
import { emptyStore, serveStore, type Store, type StoreKind } from './helpers/stores.ts'
import { ADMIN_KEY } from './helpers/app.ts'

const admin = { authorization: `Bearer ${ADMIN_KEY}` }
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'coffer-backups-'))
const stores: Store[] = []

/** Every store of these tests shares one secrets key, as instances of one deployment do (SECRETS_KEY). */
const SECRETS_KEY = crypto.randomBytes(32).toString('base64')

async function store(kind: StoreKind, options: { sharedKey?: boolean } = {}): Promise<Store> {
  const made = await emptyStore(kind, options.sharedKey === false ? {} : { SECRETS_KEY })
  stores.push(made)
  return made
}

after(() => {
  for (const made of stores) made.remove()
  fs.rmSync(scratch, { recursive: true, force: true })
})

/** The rows of each table in a store, to show that a refused restore changed nothing. */
async function countAll(target: Store): Promise<string> {
  const database = openDatabase(target.config)
  try {
    const counts = []
    for (const table of ['users', 'wallets', 'transactions', 'events'] as const) {
      const row = await database.db.selectFrom(table).select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()
      counts.push(`${table}=${Number(row.n)}`)
    }
    return counts.join(' ')
  } finally {
    await database.close()
  }
}

describe(`coffer backup on ${STORAGE}`, () => {
  it('backs up while transfers keep committing: the file is one instant in which every asset sums to zero', async () => {
    const source = await store(STORAGE)
    const service = await serveStore(source)
    try {
      const world = await buildLedgerWorld(service.app, admin, { prefix: 'load', transfers: 1 })
      // Transfers both ways, four at a time, until the backup is done.
      let running = true
      let committed = 0
      const pair = [world.alice, world.bob]
      const load = Array.from({ length: 4 }, async (_, lane) => {
        for (let i = 0; running; i++) {
          const from = pair[(lane + i) % 2]
          const to = pair[(lane + i + 1) % 2]
          const sent = await service.app.inject({ method: 'POST', url: '/wallet/transactions', headers: { authorization: `Bearer ${from.token}` }, payload: { recipient: to.username, assets: { [world.assetName]: 1 + (i % 3) } } })
          if (sent.statusCode === 201) committed++
          else assert.equal(sent.json().code, 'I002', sent.body)
        }
      })
      // The load is under way (ten transfers in) before the backup starts, however slow the
      // machine (not a fixed pause), and goes on until it is done.
      await waitUntil(() => committed >= 10, 30_000, 'ten transfers of the load')
      // The backup runs on a connection of its own, as `coffer backup` beside the service does.
      const database = openDatabase(source.config)
      const file = path.join(scratch, `load-${STORAGE}.coffer.gz`)
      let summary
      const progress: [string, number, number][] = []
      try {
        summary = await createBackup(database, file, { progress: (table, done, total) => progress.push([table, done, total]) })
      } finally {
        running = false
        await Promise.all(load)
        await database.close()
      }
      // Progress is reported table by table, never going back, and ends at the whole.
      assert.deepEqual(progress.at(-1)?.slice(1), [summary.rows, summary.rows])
      assert.ok(progress.every(([, done], i) => i === 0 || done >= progress[i - 1][1]))
      assert.ok(progress.some(([table]) => table === 'transactions'))
      assert.ok(summary.tables.transactions > 2 && summary.tables.transactions < committed + 3, `the backup holds ${summary.tables.transactions} of ${committed + 2} transactions`)
      // Restored on its own, the instant it holds checks out: holdings match the journal, assets sum to zero.
      const target = await store('sqlite')
      const restored = openDatabase(target.config)
      try {
        await restoreBackup(restored, await checkBackup(file))
        const report = await verifyLedger(restored.db)
        assert.ok(report.ok, report.problems.join('\n'))
        assert.equal(report.transactions, summary.tables.transactions)
      } finally {
        await restored.close()
      }
    } finally {
      await service.close()
    }
  })
})

const moves: [StoreKind, StoreKind][] = STORAGE === 'postgres' ? [['sqlite', 'postgres'], ['postgres', 'sqlite']] : [['sqlite', 'sqlite']]

for (const [from, to] of moves) {
  describe(`moving a ledger from ${from} to ${to}`, () => {
    it('backs up while serving, restores into an empty store, and every credential still works', async () => {
      // The secrets key comes from the data directory's file here, carried along as the admin key's is.
      const source = await store(from, { sharedKey: false })
      const service = await serveStore(source)
      const file = path.join(scratch, `move-${from}-${to}.coffer.gz`)
      let world
      try {
        world = await buildLedgerWorld(service.app, admin, { prefix: `mv${from.slice(0, 2)}` })
        const backup = await runCoffer(source.env, 'backup', file)
        assert.equal(backup.code, 0, backup.stderr)
        assert.match(backup.stdout, /^backup written to .*: \d+ rows \(2 users, 3 wallets, 6 transactions, 1 webhooks, 11 events\)/)
      } finally {
        await service.close()
      }
      const target = await store(to, { sharedKey: false })
      fs.copyFileSync(path.join(source.config.dataDir, 'secrets-key'), path.join(target.config.dataDir, 'secrets-key'))
      const restore = await runCoffer(target.env, 'restore', file)
      assert.equal(restore.code, 0, restore.stderr + restore.stdout)
      assert.match(restore.stdout, /^restored \d+ rows/)
      assert.match(restore.stdout, /ledger OK/)
      const moved = await serveStore(target)
      try {
        await checkLedgerWorld(moved.app, admin, world)
        const report = await verifyLedger(moved.database.db)
        assert.ok(report.ok, report.problems.join('\n'))
      } finally {
        await moved.close()
      }
    })
  })
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
    // One line of the journal gets one more unit.
    const edited = text.replace('\n[2,1,1]\n', '\n[2,1,2]\n')
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
    const text = zlib.gunzipSync(fs.readFileSync(good)).toString('utf8').replace('"0005_ledger_references"', '"0005_ledger_references","9999_from_the_future"')
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
