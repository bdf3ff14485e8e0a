import assert from 'node:assert/strict'
import crypto from 'node:crypto'
import { after, before, describe, it } from 'node:test'
import type { FastifyInstance } from 'fastify'
import { buildApp } from '../../src/app.ts'
import { loadConfig } from '../../src/config.ts'
import { openPostgres, type Database } from '../../src/db/database.ts'
import { migrateToLatest } from '../../src/db/migrate.ts'
import { prepareWebhookSecrets } from '../../src/events/webhook-secrets.ts'
import { hashToken } from '../../src/http/tokens.ts'
import { pruneOnce } from '../../src/operations/retention.ts'
import { ADMIN_KEY, STORAGE, awayFromTheMinute } from '../helpers/app.ts'
import { createUser } from '../helpers/factories.ts'
import { createDatabase } from '../../scripts/lib/postgres.ts'

/**
 * Login and registration limits hold across instances: three instances on one PostgreSQL database
 * (as in test/operations/multi-instance.test.ts), attacked together, allow AUTH_RATE_LIMIT attempts per
 * minute in all, not three times as many.
 */
const LIMIT = 5
const INSTANCES = 3

describe(
  'login and registration limits shared by three instances',
  { skip: STORAGE !== 'postgres' && 'PostgreSQL only: a SQLite store has one process' },
  () => {
    const instances: { app: FastifyInstance; database: Database }[] = []

    before(async () => {
      const url = await createDatabase(process.env.TEST_PG_ADMIN_URL as string)
      const secretsKey = crypto.randomBytes(32).toString('base64')
      for (let i = 0; i < INSTANCES; i++) {
        const database = openPostgres(url, 5)
        await migrateToLatest(database.db)
        const config = loadConfig({
          DATABASE_URL: url,
          ADMIN_API_KEY: ADMIN_KEY,
          LOG_LEVEL: process.env.LOG_LEVEL ?? 'silent',
          AUTH_RATE_LIMIT: String(LIMIT),
          SECRETS_KEY: secretsKey,
        })
        const app = await buildApp({
          config,
          database,
          adminKeyHash: hashToken(ADMIN_KEY),
          secretsKey: await prepareWebhookSecrets(database.db, config),
        })
        instances.push({ app, database })
      }
    })
    after(async () => {
      for (const { app, database } of instances) {
        await app.close()
        await database.close()
      }
    })

    it('allows AUTH_RATE_LIMIT login attempts per minute for a username in all, whichever instance takes them', async () => {
      // Registered with the limit off: only the logins count here.
      const victim = await createUser(instances[0].app)
      await instances[0].database.db.deleteFrom('rate_limit_hits').execute()
      await awayFromTheMinute()
      // Fifteen wrong passwords at once, spread over the three instances, each from its own address.
      const answers = await Promise.all(
        Array.from({ length: LIMIT * INSTANCES }, (_, n) =>
          instances[n % INSTANCES].app.inject({
            method: 'POST',
            url: `/users/${victim.username}/sessions`,
            remoteAddress: `10.0.0.${n + 1}`,
            payload: { password: 'wrong password' },
          }),
        ),
      )
      const codes = answers.map((answer) => answer.json().code)
      assert.equal(codes.filter((code) => code === 'U001').length, LIMIT, codes.join(' '))
      assert.equal(codes.filter((code) => code === 'G005').length, LIMIT * (INSTANCES - 1), codes.join(' '))
      const limited = answers.find((answer) => answer.json().code === 'G005')
      assert.equal(limited?.statusCode, 429)
      assert.ok(Number(limited?.headers['retry-after']) >= 1 && Number(limited?.headers['retry-after']) <= 60)
      // The right password is refused too until the window ends, on every instance.
      for (const { app } of instances) {
        const right = await app.inject({
          method: 'POST',
          url: `/users/${victim.username}/sessions`,
          remoteAddress: '10.9.9.9',
          payload: { password: victim.password },
        })
        assert.equal(right.json().code, 'G005')
      }
    })

    it('allows AUTH_RATE_LIMIT registrations per minute from one address in all', async () => {
      await instances[0].database.db.deleteFrom('rate_limit_hits').execute()
      await awayFromTheMinute()
      const answers = await Promise.all(
        Array.from({ length: LIMIT * INSTANCES }, (_, n) =>
          instances[n % INSTANCES].app.inject({
            method: 'POST',
            url: '/users',
            remoteAddress: '10.1.1.1',
            payload: { username: `flood${process.pid}x${n}`, password: 'long enough' },
          }),
        ),
      )
      assert.equal(answers.filter((answer) => answer.statusCode === 201).length, LIMIT)
      assert.equal(answers.filter((answer) => answer.json().code === 'G005').length, LIMIT * (INSTANCES - 1))
    })

    it('forgets ended windows: the retention job removes their counters', async () => {
      const before = await instances[0].database.db.selectFrom('rate_limit_hits').select('key').execute()
      assert.ok(before.length > 0)
      const report = await pruneOnce(
        instances[1].database,
        { eventRetentionDays: 30, idempotencyRetentionHours: 168, sessionIdleDays: 7 },
        Date.now() + 3 * 60_000,
      )
      assert.equal(report?.rateLimitWindows, before.length)
      assert.equal((await instances[0].database.db.selectFrom('rate_limit_hits').select('key').execute()).length, 0)
    })
  },
)
