import assert from 'node:assert/strict'
import crypto from 'node:crypto'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import zlib from 'node:zlib'
import { after, before, describe, it } from 'node:test'
import { Webhook } from 'standardwebhooks'
import { ConfigError, loadConfig } from '../../src/config.ts'
import { openDatabase } from '../../src/db/database.ts'
import { nowIso } from '../../src/db/dialect.ts'
import { openWebhookSecret, prepareWebhookSecrets, resealWebhookSecrets } from '../../src/events/webhook-secrets.ts'
import { upsertWebhook } from '../../src/events/webhooks.repository.ts'
import { createBackup } from '../../src/operations/backup.ts'
import { generateSecretsKey, secretsKeyFrom } from '../../src/secrets/secret-box.ts'
import { writeNextSecretsKeyFile } from '../../src/secrets/secrets-key.ts'
import { ADMIN_KEY, STORAGE, buildTestApp, type TestApp } from '../helpers/app.ts'
import { createUser } from '../helpers/factories.ts'
import { runCoffer } from '../helpers/cli.ts'
import { buildLedgerWorld } from '../helpers/ledger-world.ts'
import { startReceiver, type Receiver } from '../helpers/receiver.ts'
import { emptyStore, serveStore, type Store } from '../helpers/stores.ts'

const admin = { authorization: `Bearer ${ADMIN_KEY}` }
const stores: Store[] = []
after(() => stores.forEach((store) => store.remove()))

async function store(env: Record<string, string> = {}): Promise<Store> {
  const made = await emptyStore(STORAGE, env)
  stores.push(made)
  return made
}

/** Everything the database holds about webhooks, as text: what a leaked dump would show. */
async function dumpWebhooks(target: Store | TestApp): Promise<string> {
  const database = 'app' in target ? target.database : openDatabase(target.config)
  try {
    return JSON.stringify(await database.db.selectFrom('webhooks').selectAll().orderBy('wallet_id').execute())
  } finally {
    if (!('app' in target)) await database.close()
  }
}

describe(`webhook secrets at rest on ${STORAGE}`, () => {
  let t: TestApp
  let receiver: Receiver

  before(async () => {
    t = await buildTestApp()
    receiver = await startReceiver()
  })
  after(async () => {
    await receiver.close()
    await t.close()
  })

  it('stores the secret sealed: the database never shows it, and receivers still verify every delivery', async () => {
    const bob = await createUser(t.app)
    const alice = await createUser(t.app)
    const set = await t.app.inject({
      method: 'PUT',
      url: '/wallet/webhook',
      headers: bob.auth,
      payload: { webhook: `${receiver.url}/bob` },
    })
    assert.equal(set.statusCode, 200, set.body)
    const secret: string = set.json().secret
    const stored = await dumpWebhooks(t)
    assert.ok(!stored.includes(secret.slice(6)), 'the secret is in the database in clear')
    assert.doesNotMatch(stored, /whsec_/)
    assert.match(stored, /"secret":"v1:[0-9a-f]{16}:/)
    if (STORAGE === 'sqlite') {
      // Nor anywhere in the database's files (the file and its write-ahead log).
      for (const file of fs.readdirSync(t.config.dataDir).filter((name) => name.startsWith('coffer.sqlite'))) {
        assert.ok(!fs.readFileSync(path.join(t.config.dataDir, file)).includes(secret.slice(6)), `the secret is in ${file}`)
      }
    }
    const gold = await t.app.inject({ method: 'POST', url: '/assets', headers: admin, payload: { name: 'sealgold', value: 1 } })
    await t.app.inject({
      method: 'POST',
      url: `/wallets/${alice.walletId}/assets`,
      headers: admin,
      payload: { id: gold.json().id, quantity: 10 },
    })
    const sent = await t.app.inject({
      method: 'POST',
      url: '/wallet/transactions',
      headers: alice.auth,
      payload: { recipient: bob.username, assets: { sealgold: 3 } },
    })
    assert.equal(sent.statusCode, 201, sent.body)
    const [delivery] = await receiver.waitFor(1, 10_000)
    const event = new Webhook(secret).verify(delivery.body, delivery.headers as Record<string, string>) as { type: string }
    assert.equal(event.type, 'transaction.received')
  })

  it('seals, at start, secrets an earlier release stored in clear', async () => {
    const carol = await createUser(t.app)
    const clear = 'whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA'
    await upsertWebhook(t.database.db, { walletId: carol.walletId, url: `${receiver.url}/carol`, secret: clear, createdAt: nowIso() })
    const key = await prepareWebhookSecrets(t.database.db, t.config)
    const row = await t.database.db
      .selectFrom('webhooks')
      .select('secret')
      .where('wallet_id', '=', carol.walletId)
      .executeTakeFirstOrThrow()
    assert.match(row.secret, /^v1:/)
    assert.equal(openWebhookSecret(key, carol.walletId, row.secret), clear)
    // Bound to its wallet: the same sealed value does not open as another wallet's secret.
    assert.throws(() => openWebhookSecret(key, carol.walletId + 1, row.secret), /altered or belongs to another row/)
  })

  it('refuses SECRETS_KEY values that are not a 32-byte key', () => {
    for (const value of ['short', 'x'.repeat(44), crypto.randomBytes(16).toString('base64'), crypto.randomBytes(31).toString('hex')]) {
      assert.throws(
        () => loadConfig({ SECRETS_KEY: value }),
        (error: Error) => error instanceof ConfigError && /SECRETS_KEY must be 32 random bytes/.test(error.message),
        value,
      )
    }
    assert.equal(loadConfig({ SECRETS_KEY: crypto.randomBytes(32).toString('hex') }).secretsKey?.length, 32)
  })
})

describe(`the secrets key on ${STORAGE}`, () => {
  let source: Store
  let world: Awaited<ReturnType<typeof buildLedgerWorld>>
  let receiver: Receiver
  let secret: string

  before(async () => {
    receiver = await startReceiver()
    source = await store()
    const service = await serveStore(source)
    try {
      world = await buildLedgerWorld(service.app, admin, { prefix: 'key', transfers: 1 })
      const set = await service.app.inject({
        method: 'PUT',
        url: '/wallet/webhook',
        headers: { authorization: `Bearer ${world.bob.token}` },
        payload: { webhook: `${receiver.url}/bob` },
      })
      secret = set.json().secret
    } finally {
      await service.close()
    }
  })
  after(() => receiver.close())

  it('is generated into the data directory with mode 0600', () => {
    const stat = fs.statSync(path.join(source.config.dataDir, 'secrets-key'))
    assert.equal(stat.mode & 0o777, 0o600)
  })

  it('a wrong or missing key stops the service with one line naming SECRETS_KEY, and nothing changes', async () => {
    const before = await dumpWebhooks(source)
    const wrong = await runCoffer({ ...source.env, PORT: '0', SECRETS_KEY: crypto.randomBytes(32).toString('base64') }, 'serve')
    assert.equal(wrong.code, 1, wrong.stdout)
    assert.match(wrong.stderr, /^coffer: SECRETS_KEY is wrong: the webhook secrets in the database are encrypted with key [0-9a-f]{16}/)
    assert.equal(wrong.stderr.trim().split('\n').length, 1)
    const keyFile = path.join(source.config.dataDir, 'secrets-key')
    const aside = `${keyFile}.aside`
    fs.renameSync(keyFile, aside)
    try {
      const missing = await runCoffer({ ...source.env, PORT: '0' }, 'serve')
      assert.equal(missing.code, 1, missing.stdout)
      assert.match(missing.stderr, /^coffer: .*no SECRETS_KEY is set and .* has no secrets-key file: set SECRETS_KEY to that key\n$/)
      assert.ok(!fs.existsSync(keyFile), 'a new key was generated over encrypted secrets')
    } finally {
      fs.renameSync(aside, keyFile)
    }
    assert.equal(await dumpWebhooks(source), before)
  })

  it('a backup holds the sealed secrets and never the key; restoring needs the same key', async () => {
    const file = path.join(os.tmpdir(), `coffer-secrets-${process.pid}-${STORAGE}.coffer.gz`)
    const database = openDatabase(source.config)
    try {
      const key = await prepareWebhookSecrets(database.db, source.config)
      await createBackup(database, file, { secretsKeyId: async () => key.id })
      const text = zlib.gunzipSync(fs.readFileSync(file)).toString('utf8')
      assert.ok(!text.includes(key.key.toString('base64')) && !text.includes(key.key.toString('hex')), 'the key is in the backup')
      assert.ok(!text.includes(secret.slice(6)), 'a secret is in the backup in clear')
      const other = await store({ SECRETS_KEY: crypto.randomBytes(32).toString('base64') })
      const refused = await runCoffer(other.env, 'restore', file)
      assert.equal(refused.code, 1)
      assert.match(
        refused.stderr,
        /^coffer: the backup's webhook secrets are encrypted with key [0-9a-f]{16} and this store's key is [0-9a-f]{16}: set SECRETS_KEY/,
      )
      const same = await store({ SECRETS_KEY: key.key.toString('base64') })
      const restored = await runCoffer(same.env, 'restore', file)
      assert.equal(restored.code, 0, restored.stderr)
    } finally {
      await database.close()
      fs.rmSync(file, { force: true })
    }
  })

  it('coffer rotate-secrets-key re-seals every secret under a new key, and deliveries still verify', async () => {
    const keyFile = path.join(source.config.dataDir, 'secrets-key')
    const oldKey = fs.readFileSync(keyFile, 'utf8')
    const rotated = await runCoffer(source.env, 'rotate-secrets-key')
    assert.equal(rotated.code, 0, rotated.stderr)
    assert.match(rotated.stdout, /^re-encrypted 1 webhook secrets from key [0-9a-f]{16} to key [0-9a-f]{16}/)
    const newKey = fs.readFileSync(keyFile, 'utf8')
    assert.notEqual(newKey, oldKey)
    assert.equal(fs.statSync(keyFile).mode & 0o777, 0o600)
    assert.ok(!fs.existsSync(`${keyFile}.next`))
    const id = secretsKeyFrom(Buffer.from(newKey.trim(), 'base64')).id
    assert.match(await dumpWebhooks(source), new RegExp(`"secret":"v1:${id}:`))
    // The service starts with the new key and signs with the same secret as before.
    const service = await serveStore(source)
    try {
      const sent = await service.app.inject({
        method: 'POST',
        url: '/wallet/transactions',
        headers: { authorization: `Bearer ${world.walletKey}` },
        payload: { recipient: world.bob.username, assets: { [world.assetName]: 1 } },
      })
      assert.equal(sent.statusCode, 201, sent.body)
      const requests = await receiver.waitFor(1, 10_000)
      assert.doesNotThrow(() => new Webhook(secret).verify(requests[0].body, requests[0].headers as Record<string, string>))
    } finally {
      await service.close()
    }
    // With SECRETS_KEY in the environment the new key must be given: nothing secret is printed.
    const envOnly = await runCoffer({ ...source.env, SECRETS_KEY: newKey.trim() }, 'rotate-secrets-key')
    assert.equal(envOnly.code, 1)
    assert.match(envOnly.stderr, /^coffer: SECRETS_KEY is set: put a new key in NEW_SECRETS_KEY/)
  })

  it('finishes a rotation interrupted after the database switched, before the key file was replaced', async () => {
    const interrupted = await store()
    const service = await serveStore(interrupted)
    let secret: string
    try {
      const user = await createUser(service.app)
      secret = (
        await service.app.inject({ method: 'PUT', url: '/wallet/webhook', headers: user.auth, payload: { webhook: `${receiver.url}/x` } })
      ).json().secret
    } finally {
      await service.close()
    }
    // What rotate-secrets-key does up to its last step: the new key in secrets-key.next, the database re-sealed with it.
    const database = openDatabase(interrupted.config)
    try {
      const current = await prepareWebhookSecrets(database.db, interrupted.config)
      const next = generateSecretsKey()
      writeNextSecretsKeyFile(interrupted.config, next)
      await resealWebhookSecrets(database.db, current, next)
      const key = await prepareWebhookSecrets(database.db, interrupted.config)
      assert.equal(key.id, next.id)
      assert.ok(!fs.existsSync(path.join(interrupted.config.dataDir, 'secrets-key.next')))
      const row = await database.db.selectFrom('webhooks').select(['wallet_id', 'secret']).executeTakeFirstOrThrow()
      assert.equal(openWebhookSecret(key, row.wallet_id, row.secret), secret)
    } finally {
      await database.close()
    }
  })
})
