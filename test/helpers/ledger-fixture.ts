import assert from 'node:assert/strict'
import { after } from 'node:test'
import type { LightMyRequestResponse } from 'fastify'
import type { Db } from '../../src/db/database.ts'
import type { Asset } from '../../src/ledger/ledger.types.ts'
import { buildTestApp, expectError, type TestApp } from './app.ts'
import { createAsset } from './factories.ts'

/**
 * The ledger suites' set-up: a test app with two assets, and the state a refused request must
 * leave as it was.
 */

/** A test app and two assets of unique names. */
export interface LedgerApp {
  t: TestApp
  gold: Asset
  silver: Asset
}

/**
 * Builds the app and two assets, and registers the file's `after` hook that closes it (once
 * `atEnd` has checked it, when given). Awaited at the top of a test file:
 * `const { t, gold, silver } = await ledgerApp()`.
 */
export async function ledgerApp(options: { env?: Record<string, string>; atEnd?: (t: TestApp) => Promise<void> } = {}): Promise<LedgerApp> {
  const t = await buildTestApp(options.env)
  after(async () => {
    try {
      await options.atEnd?.(t)
    } finally {
      await t.close()
    }
  })
  return { t, gold: await createAsset(t), silver: await createAsset(t) }
}

/** What the ledger holds in all: transactions, events and idempotency keys counted, and every holding. */
export async function ledgerState(db: Db) {
  const count = async (table: 'transactions' | 'events' | 'idempotency_keys') =>
    Number(
      (
        await db
          .selectFrom(table)
          .select((eb) => eb.fn.countAll().as('n'))
          .executeTakeFirstOrThrow()
      ).n,
    )
  const holdings = await db
    .selectFrom('holdings')
    .select(['wallet_id', 'asset_id', 'quantity'])
    .orderBy('wallet_id')
    .orderBy('asset_id')
    .execute()
  return {
    transactions: await count('transactions'),
    events: await count('events'),
    keys: await count('idempotency_keys'),
    holdings: holdings.map((row) => [Number(row.wallet_id), Number(row.asset_id), Number(row.quantity)]),
  }
}

/** Asserts that `request` is refused with this status, code and detail and changes nothing in the ledger. */
export async function assertRefusedUnchanged(
  t: TestApp,
  request: () => Promise<LightMyRequestResponse>,
  status: number,
  code: string,
  detail?: RegExp,
): Promise<void> {
  const before = await ledgerState(t.database.db)
  const response = await request()
  expectError(response, status, code)
  if (detail) assert.match(response.json().detail, detail)
  assert.deepEqual(await ledgerState(t.database.db), before)
}
