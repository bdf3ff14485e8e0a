import path from 'node:path'
import SQLite from 'better-sqlite3'
import pg from 'pg'

/** A user seeded through the API: a session token and the primary wallet. */
export interface BenchUser {
  username: string
  token: string
  walletId: number
}

export interface Seeded {
  asset: { id: number; name: string }
  /** The wallets that trade in scenarios (a)-(c). */
  traders: BenchUser[]
  /** Wallets with a short and a long history for scenario (d), and their counterpart. */
  shortHistory: BenchUser
  longHistory: BenchUser
  historyPartner: BenchUser
}

const PASSWORD = 'bench password 1234'

async function call(base: string, method: string, url: string, body: unknown, token?: string): Promise<unknown> {
  const headers: Record<string, string> = { 'content-type': 'application/json' }
  if (token) headers.authorization = `Bearer ${token}`
  const response = await fetch(base + url, { method, headers, body: JSON.stringify(body) })
  const text = await response.text()
  if (response.status >= 300) throw new Error(`${method} ${url} answered ${response.status}: ${text}`)
  return text === '' ? undefined : JSON.parse(text)
}

/** Runs `work` over `items` with at most `limit` at a time, preserving order of results. */
async function pool<T, R>(items: T[], limit: number, work: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length)
  let next = 0
  const worker = async () => {
    while (next < items.length) {
      const index = next++
      results[index] = await work(items[index], index)
    }
  }
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker))
  return results
}

/** Registers a user (POST /users) and logs in for a token (POST /users/{u}/sessions). */
async function createUser(base: string, username: string): Promise<BenchUser> {
  const user = (await call(base, 'POST', '/users', { username, password: PASSWORD })) as { primary_wallet_id: number }
  const session = (await call(base, 'POST', `/users/${username}/sessions`, { password: PASSWORD, return_token: true })) as { token: string }
  return { username, token: session.token, walletId: user.primary_wallet_id }
}

/**
 * Seeds through the HTTP API: `traders` users with their primary wallets, the asset `gold`, and
 * an issuance to every wallet, so that transfers of 1 gold never run short during the bench.
 * Registration and login each cost one Argon2id hash, which bounds how fast this goes.
 */
export async function seedThroughApi(base: string, adminKey: string, traders: number, onProgress?: (done: number) => void): Promise<Seeded> {
  const asset = (await call(base, 'POST', '/assets', { name: 'gold', value: 1 }, adminKey)) as { id: number; name: string }
  const names = Array.from({ length: traders }, (_, index) => `trader${index}`)
  let done = 0
  const users = await pool(names, 8, async (name) => {
    const user = await createUser(base, name)
    // Scenario (c) sends everything from trader0: give it enough for any run.
    await call(base, 'POST', `/wallets/${user.walletId}/assets`, { id: asset.id, quantity: name === 'trader0' ? 1_000_000_000_000 : 1_000_000_000 }, adminKey)
    done += 1
    if (done % 100 === 0) onProgress?.(done)
    return user
  })
  const shortHistory = await createUser(base, 'historyshort')
  const longHistory = await createUser(base, 'historylong')
  const historyPartner = await createUser(base, 'historypartner')
  for (const user of [shortHistory, longHistory, historyPartner]) {
    await call(base, 'POST', `/wallets/${user.walletId}/assets`, { id: asset.id, quantity: 1_000_000 }, adminKey)
  }
  return { asset, traders: users, shortHistory, longHistory, historyPartner }
}

/** `count` transfers of 1 unit between `user` and `partner` through the API, alternating direction. */
export async function seedHistoryThroughApi(base: string, user: BenchUser, partner: BenchUser, asset: string, count: number): Promise<void> {
  for (let index = 0; index < count; index++) {
    const [from, to] = index % 2 === 0 ? [user, partner] : [partner, user]
    await call(base, 'POST', '/wallet/transactions', { recipient: to.username, assets: { [asset]: 1 }, memo: 'history' }, from.token)
  }
}

/**
 * Writes `count` transactions of 1 unit between two wallets straight into the service's
 * database, alternating direction. `count` is even, so every holding ends where it started and
 * the ledger still verifies (each holding equals its journal sum and its last running balance).
 * No events: the outbox only matters for new transfers.
 */
export async function seedHistoryDirectly(
  storage: { dataDir: string } | { databaseUrl: string },
  walletId: number,
  partnerId: number,
  assetId: number,
  count: number,
): Promise<void> {
  if (count % 2 !== 0) throw new Error('history length must be even to keep holdings unchanged')
  const createdAt = new Date().toISOString()
  if ('dataDir' in storage) {
    const db = new SQLite(path.join(storage.dataDir, 'coffer.sqlite'))
    db.pragma('busy_timeout = 10000')
    try {
      const insertTransaction = db.prepare('insert into transactions (sending_wallet_id, receiving_wallet_id, memo, created_at) values (?, ?, ?, ?)')
      const insertLine = db.prepare('insert into transaction_assets (transaction_id, asset_id, quantity) values (?, ?, 1)')
      const insertBalance = db.prepare('insert into running_balances (wallet_id, asset_id, created_at, transaction_id, quantity) values (?, ?, ?, ?, ?)')
      const holding = db.prepare<[number, number], { quantity: number }>('select quantity from holdings where wallet_id = ? and asset_id = ?')
      db.transaction(() => {
        // Balances in time: each side's holding after each transaction, from where it stands now.
        const balances = new Map([walletId, partnerId].map((id) => [id, holding.get(id, assetId)?.quantity ?? 0]))
        for (let index = 0; index < count; index++) {
          const [from, to] = index % 2 === 0 ? [walletId, partnerId] : [partnerId, walletId]
          const { lastInsertRowid } = insertTransaction.run(from, to, 'history', createdAt)
          insertLine.run(lastInsertRowid, assetId)
          for (const [side, delta] of [[from, -1], [to, 1]] as const) {
            balances.set(side, (balances.get(side) ?? 0) + delta)
            insertBalance.run(side, assetId, createdAt, lastInsertRowid, balances.get(side))
          }
        }
      })()
    } finally {
      db.close()
    }
    return
  }
  const client = new pg.Client({ connectionString: storage.databaseUrl })
  await client.connect()
  try {
    await client.query(
      `with inserted as (
         insert into transactions (sending_wallet_id, receiving_wallet_id, memo, created_at)
         select case when g % 2 = 1 then $1::bigint else $2::bigint end, case when g % 2 = 1 then $2::bigint else $1::bigint end, 'history', $3
         from generate_series(1, $4::int) as g order by g
         returning id, sending_wallet_id, receiving_wallet_id),
       lines as (insert into transaction_assets (transaction_id, asset_id, quantity) select id, $5, 1 from inserted)
       -- Balances in time: each side's holding after each transaction, from where it stands now.
       insert into running_balances (wallet_id, asset_id, created_at, transaction_id, quantity)
       select sides.wallet_id, $5, $3, sides.id,
         coalesce((select quantity from holdings where holdings.wallet_id = sides.wallet_id and holdings.asset_id = $5), 0)
           + sum(sides.delta) over (partition by sides.wallet_id order by sides.id rows unbounded preceding)
       from (select sending_wallet_id as wallet_id, id, -1 as delta from inserted
             union all select receiving_wallet_id, id, 1 from inserted) as sides`,
      [walletId, partnerId, createdAt, count, assetId],
    )
    // What autovacuum would do within a minute of such an insert; done now so that it does not
    // run during the scenarios that follow.
    await client.query('vacuum analyze transactions, transaction_assets, running_balances')
  } finally {
    await client.end()
  }
}
