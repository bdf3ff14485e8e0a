import { sql } from 'kysely'
import type { Executor } from '../db/database.ts'
import { MINT_WALLET_ID } from '../ledger/ledger.types.ts'

// Operator sessions.

export async function insertOperatorSession(db: Executor, tokenHash: string, createdAt: string, expiresAt: string): Promise<void> {
  await db.insertInto('operator_sessions').values({ token_hash: tokenHash, created_at: createdAt, expires_at: expiresAt }).execute()
}

export async function operatorSessionExists(db: Executor, tokenHash: string, now: string): Promise<boolean> {
  const row = await db
    .selectFrom('operator_sessions')
    .select('token_hash')
    .where('token_hash', '=', tokenHash)
    .where('expires_at', '>', now)
    .executeTakeFirst()
  return row !== undefined
}

export async function deleteOperatorSession(db: Executor, tokenHash: string): Promise<void> {
  await db.deleteFrom('operator_sessions').where('token_hash', '=', tokenHash).execute()
}

/** Expired sessions are refused anyway; their rows are removed when a new session opens. */
export async function deleteExpiredOperatorSessions(db: Executor, now: string): Promise<void> {
  await db.deleteFrom('operator_sessions').where('expires_at', '<=', now).execute()
}

// The overview.

/** Users, live user wallets (not `mint`) and recorded transactions. */
export async function countRecords(db: Executor): Promise<{ users: number; wallets: number; transactions: number }> {
  const count = (table: 'users' | 'transactions') =>
    db
      .selectFrom(table)
      .select((eb) => eb.fn.countAll().as('n'))
      .executeTakeFirstOrThrow()
  const [users, transactions, wallets] = await Promise.all([
    count('users'),
    count('transactions'),
    db
      .selectFrom('wallets')
      .select((eb) => eb.fn.countAll().as('n'))
      .where('user_id', 'is not', null)
      .where('deleted_at', 'is', null)
      .executeTakeFirstOrThrow(),
  ])
  return { users: Number(users.n), wallets: Number(wallets.n), transactions: Number(transactions.n) }
}

/**
 * Every live asset with what the wallets other than `mint` hold of it, how many hold some, and
 * what those below zero owe on credit. What they hold is what `mint` issued net of burns and
 * expiries, debts counted against it, less units that have expired and wait for their expiry to be
 * written; with what of it expires within 30 days.
 */
export async function listCirculation(db: Executor, now: string) {
  const rows = await db
    .selectFrom('assets')
    .leftJoin('holdings', (join) =>
      join.onRef('holdings.asset_id', '=', 'assets.id').on('holdings.wallet_id', '<>', MINT_WALLET_ID).on('holdings.quantity', '<>', 0),
    )
    .select(['assets.id', 'assets.name', 'assets.value'])
    .select((eb) => [
      eb.fn.coalesce(eb.fn.sum<number | string>('holdings.quantity'), sql<number>`0`).as('circulating'),
      eb.fn.count<number | string>('holdings.wallet_id').as('holders'),
      eb.fn
        .coalesce(eb.fn.sum<number | string>(sql`case when holdings.quantity < 0 then -holdings.quantity else 0 end`), sql<number>`0`)
        .as('owed'),
    ])
    .where('assets.deleted_at', 'is', null)
    .groupBy(['assets.id', 'assets.name', 'assets.value'])
    .orderBy('assets.id')
    .execute()
  const lots = await listLotTotals(db, now)
  return rows.map((row) => ({
    asset: { id: row.id, name: row.name, value: row.value },
    circulating: Number(row.circulating) - (lots.get(row.id)?.expired ?? 0),
    holders: Number(row.holders),
    owed: Number(row.owed),
    expiring_30d: lots.get(row.id)?.soon ?? 0,
  }))
}

const THIRTY_DAYS_MS = 30 * 86_400_000

/**
 * By asset: units that have expired by `now` and wait for their expiry to be written (what no
 * hold reserves), and units that expire within 30 days of `now`.
 */
async function listLotTotals(db: Executor, now: string): Promise<Map<number, { expired: number; soon: number }>> {
  const soon = new Date(Date.parse(now) + THIRTY_DAYS_MS).toISOString()
  const { rows } = await sql<{ asset_id: number; expired: number | string | null; soon: number | string | null }>`
    select asset_id,
      sum(case when expires_at <= ${now} then quantity - held else 0 end) as expired,
      sum(case when expires_at > ${now} and expires_at <= ${soon} then quantity else 0 end) as soon
    from lots where quantity > 0 group by asset_id`.execute(db)
  return new Map(rows.map((row) => [Number(row.asset_id), { expired: Number(row.expired ?? 0), soon: Number(row.soon ?? 0) }]))
}

// Wallets.

export interface WalletSearch {
  /** A wallet id, or the start of an address or of its owner's username (any case). */
  q?: string
  limit: number
  offset: number
}

/** User wallets (never `mint`), deleted ones included, by id, matching the search. */
export async function searchWallets(db: Executor, search: WalletSearch) {
  let query = db
    .selectFrom('wallets')
    .innerJoin('users', 'users.id', 'wallets.user_id')
    .select(['wallets.id', 'wallets.address', 'wallets.user_id', 'users.username', 'wallets.deleted_at'])
    .where('wallets.id', '<>', MINT_WALLET_ID)
  const q = search.q
  if (q !== undefined && q !== '') {
    const id = /^[0-9]{1,16}$/.test(q) && Number.isSafeInteger(Number(q)) ? Number(q) : undefined
    // Usernames are letters and digits, addresses lowercase letters: any other character matches
    // neither, and no LIKE wildcard ever reaches the pattern.
    const prefix = /^[A-Za-z0-9]+$/.test(q) ? `${q.toLowerCase()}%` : undefined
    query = query.where((eb) => {
      const matches = []
      if (id !== undefined) matches.push(eb('wallets.id', '=', id))
      if (prefix !== undefined) matches.push(eb('wallets.address', 'like', prefix), eb('users.username_key', 'like', prefix))
      return matches.length > 0 ? eb.or(matches) : sql<boolean>`1 = 0`
    })
  }
  const rows = await query
    .orderBy('wallets.id')
    .limit(search.limit + 1)
    .offset(search.offset)
    .execute()
  return { wallets: rows.slice(0, search.limit), more: rows.length > search.limit }
}

/** A user wallet (deleted or not, never `mint`) with its owner and whether it is their primary. */
export async function findWallet(db: Executor, walletId: number) {
  return db
    .selectFrom('wallets')
    .innerJoin('users', 'users.id', 'wallets.user_id')
    .select([
      'wallets.id',
      'wallets.address',
      'wallets.user_id',
      'wallets.created_at',
      'wallets.deleted_at',
      'users.username',
      'users.primary_wallet_id',
    ])
    .where('wallets.id', '=', walletId)
    .where('wallets.id', '<>', MINT_WALLET_ID)
    .executeTakeFirst()
}
