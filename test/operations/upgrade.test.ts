import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { after, describe, it } from 'node:test'
import { openDatabase } from '../../src/db/database.ts'
import { MIGRATION_NAMES } from '../../src/db/migrate.ts'
import { hashToken } from '../../src/http/tokens.ts'
import { verifyLedger } from '../../src/ledger/verify.ts'
import { checkBackup, restoreBackup } from '../../src/operations/restore.ts'
import { VERSION } from '../../src/version.ts'
import { STORAGE } from '../helpers/app.ts'
import { runCoffer } from '../helpers/cli.ts'
import { checkLedgerWorld, type LedgerWorld } from '../helpers/ledger-world.ts'
import { emptyStore, serveStore, type Store } from '../helpers/stores.ts'

/**
 * Upgrades: a backup made by each earlier release (test/fixtures/backup-<version>.coffer.gz,
 * written by scripts/make-backup-fixture.ts with that release's code) restores into this one,
 * whose migrations bring it up to date, and everything in it still reads and verifies.
 */
const FIXTURES = fs.readdirSync('test/fixtures').filter((file) => /^backup-.*\.coffer\.gz$/.test(file))
const stores: Store[] = []
after(() => stores.forEach((store) => store.remove()))

describe('upgrades', () => {
  it('names one version everywhere: package.json, /healthz and the API reference', async () => {
    const pkg = JSON.parse(fs.readFileSync('package.json', 'utf8'))
    assert.equal(VERSION, pkg.version)
    const store = await emptyStore(STORAGE)
    stores.push(store)
    const service = await serveStore(store)
    try {
      assert.equal((await service.app.inject({ method: 'GET', url: '/healthz' })).json().version, VERSION)
      assert.equal((await service.app.inject({ method: 'GET', url: '/openapi.json' })).json().info.version, VERSION)
    } finally {
      await service.close()
    }
  })

  for (const fixture of FIXTURES) {
    it(`restores ${fixture} into this release on ${STORAGE}: everything reads and verify passes`, async () => {
      const { adminKey, world } = JSON.parse(
        fs.readFileSync(path.join('test/fixtures', fixture.replace(/\.coffer\.gz$/, '.json')), 'utf8'),
      ) as { adminKey: string; world: LedgerWorld }
      // No idle limit: the fixture's credentials were last used the day it was made, and must still open it.
      const store = await emptyStore(STORAGE, { ADMIN_API_KEY: adminKey, SESSION_IDLE_DAYS: '0' })
      stores.push(store)
      const checked = await checkBackup(path.join('test/fixtures', fixture))
      const database = openDatabase(store.config)
      try {
        const summary = await restoreBackup(database, checked)
        assert.deepEqual(summary.upgraded, MIGRATION_NAMES.slice(checked.header.migrations.length))
        const report = await verifyLedger(database.db)
        assert.ok(report.ok, report.problems.join('\n'))
        // Sessions of the fixture may have expired since it was made; their rows are there, by token.
        for (const person of [world.alice, world.bob]) {
          const session = await database.db
            .selectFrom('user_sessions')
            .select('id')
            .where('token_hash', '=', hashToken(person.token))
            .executeTakeFirst()
          assert.ok(session, `${person.username}'s session row`)
        }
      } finally {
        await database.close()
      }
      const status = await runCoffer(store.env, 'migrate', '--status')
      assert.match(status.stdout, /schema is up to date/)
      assert.doesNotMatch(status.stdout, /^pending/m)
      const service = await serveStore(store)
      try {
        await checkLedgerWorld(service.app, { authorization: `Bearer ${adminKey}` }, world, { sessionsLive: false })
      } finally {
        await service.close()
      }
    })
  }
})
