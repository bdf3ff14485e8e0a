import path from 'node:path'
import SQLite from 'better-sqlite3'
import pg from 'pg'
import { sql, type RawBuilder } from 'kysely'
import { loadConfig } from '../src/config.ts'
import type { Database } from '../src/db/database.ts'
import { inTransaction, rowsWrite, runWrites } from '../src/db/dialect.ts'
import { hasUnpositioned } from '../src/journal/journal.repository.ts'
import { JournalSequencer } from '../src/journal/sequencer.ts'
import { MINT_WALLET_ID, type EventWriter, type WalletLabel } from '../src/ledger/ledger.types.ts'
import { applyMoves, type Move } from '../src/ledger/moves.ts'
import { LEDGER_COLUMNS } from '../src/ledger/moves.repository.ts'
import { toTransaction } from '../src/ledger/transactions.shape.ts'
import { resolveSigningKey } from '../src/secrets/signing-key.ts'

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
  /** The keyed wallets' load, once `seedKeyedWallets` has made it. */
  keyed?: KeyedLoad
}

const PASSWORD = 'bench password 1234'

/**
 * One JSON request; a status of 300 or more throws with the answer. A `503 S001` (the storage did
 * not answer in time, as on a loaded machine) is retried after its Retry-After, a few times, with a
 * line on stderr: the seeding requests write nothing when they are refused that way.
 */
export async function call(base: string, method: string, url: string, body?: unknown, token?: string): Promise<unknown> {
  const headers: Record<string, string> = { 'content-type': 'application/json' }
  if (token) headers.authorization = `Bearer ${token}`
  for (let attempt = 1; ; attempt++) {
    const response = await fetch(base + url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) })
    const text = await response.text()
    if (response.status === 503 && attempt < 5) {
      console.error(`${method} ${url} answered 503 (${text}); retrying`)
      await new Promise((resolve) => setTimeout(resolve, Number(response.headers.get('retry-after') ?? 1) * 1000))
      continue
    }
    if (response.status >= 300) throw new Error(`${method} ${url} answered ${response.status}: ${text}`)
    return text === '' ? undefined : JSON.parse(text)
  }
}

/** Runs `work` over `items` with at most `limit` at a time, preserving order of results. */
export async function pool<T, R>(items: T[], limit: number, work: (item: T, index: number) => Promise<R>): Promise<R[]> {
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
export async function seedThroughApi(
  base: string,
  adminKey: string,
  traders: number,
  onProgress?: (done: number) => void,
): Promise<Seeded> {
  const asset = (await call(base, 'POST', '/assets', { name: 'gold', value: 1 }, adminKey)) as { id: number; name: string }
  const names = Array.from({ length: traders }, (_, index) => `trader${index}`)
  let done = 0
  const users = await pool(names, 8, async (name) => {
    const user = await createUser(base, name)
    // Scenario (c) sends everything from trader0: give it enough for any run.
    await call(
      base,
      'POST',
      `/wallets/${user.walletId}/assets`,
      { id: asset.id, quantity: name === 'trader0' ? 1_000_000_000_000 : 1_000_000_000 },
      adminKey,
    )
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

/** A wallet and a wallet key for it (`POST /wallet/sessions`): what the keyed load sends with. */
export interface KeyedWallet {
  walletId: number
  key: string
}

/** The keyed load: wallets with a key each, several users each, holding several assets. */
export interface KeyedLoad {
  wallets: KeyedWallet[]
  /** Names of the assets every wallet holds (`gold` first). */
  assets: string[]
  assetIds: number[]
}

/** The assets of the keyed load besides `gold`, so that transactions carry 1 to 3 of them. */
const MORE_ASSETS = ['silver', 'bronze']

/**
 * Turns already seeded users into the keyed load through the API: each user's primary wallet (so
 * that every transaction in its history names both users) gets `usersPerWallet - 1` other users
 * assigned (`POST /wallet/users`), a wallet key (`POST /wallet/sessions`), and an issuance of
 * silver and bronze besides its gold.
 */
export async function seedKeyedWallets(
  base: string,
  adminKey: string,
  seeded: Seeded,
  owners: BenchUser[],
  usersPerWallet: number,
): Promise<KeyedLoad> {
  if (usersPerWallet > seeded.traders.length) throw new Error(`${usersPerWallet} users per wallet need as many traders`)
  const assets = [seeded.asset]
  for (const name of MORE_ASSETS)
    assets.push((await call(base, 'POST', '/assets', { name, value: 1 }, adminKey)) as { id: number; name: string })
  const wallets = await pool(owners, 8, async (owner, index) => {
    for (const asset of assets.slice(1))
      await call(base, 'POST', `/wallets/${owner.walletId}/assets`, { id: asset.id, quantity: 1_000_000_000 }, adminKey)
    // The next traders after this one (wrapping round): every wallet has its own set of users.
    for (let step = 1; step < usersPerWallet; step++) {
      const user = seeded.traders[(index + step) % seeded.traders.length]
      await call(base, 'POST', '/wallet/users', { username: user.username }, owner.token)
    }
    const session = (await call(base, 'POST', '/wallet/sessions', { name: 'bench' }, owner.token)) as { token: string }
    return { walletId: owner.walletId, key: session.token }
  })
  return { wallets, assets: assets.map((asset) => asset.name), assetIds: assets.map((asset) => asset.id) }
}

/**
 * About `perWallet` transactions in each wallet's history through the API: transfers with the
 * wallets' keys to other wallets by id (`type: 2`), of 1 unit of 1 to 3 of the load's assets.
 */
export async function seedKeyedHistoryThroughApi(base: string, load: KeyedLoad, perWallet: number): Promise<void> {
  const { wallets } = load
  const count = Math.round((perWallet * wallets.length) / 2)
  const transfers = Array.from({ length: count }, (_, index) => index)
  await pool(transfers, 32, async (index) => {
    const from = wallets[index % wallets.length]
    const to = wallets[(index + 1 + (Math.floor(index / wallets.length) % (wallets.length - 1))) % wallets.length]
    const assets = Object.fromEntries(load.assets.slice(0, 1 + (index % load.assets.length)).map((name) => [name, 1]))
    await call(base, 'POST', '/wallet/transactions', { recipient: String(to.walletId), type: 2, assets, memo: 'history' }, from.key)
  })
}

/** `count` transfers of 1 unit between `user` and `partner` through the API, alternating direction. */
export async function seedHistoryThroughApi(
  base: string,
  user: BenchUser,
  partner: BenchUser,
  asset: string,
  count: number,
): Promise<void> {
  for (let index = 0; index < count; index++) {
    const [from, to] = index % 2 === 0 ? [user, partner] : [partner, user]
    await call(base, 'POST', '/wallet/transactions', { recipient: to.username, assets: { [asset]: 1 }, memo: 'history' }, from.token)
  }
}

/** Transactions written per database transaction by `seedHistoryDirectly` (an even number). */
const CHUNK = 100_000

/**
 * The wallets of the `index`-th pair of transactions `seedHistoryDirectly` writes: every wallet in
 * turn, with a partner further along that moves on each round, so that histories mix partners.
 */
function pairOf(wallets: number[], index: number): [number, number] {
  const first = index % wallets.length
  const step = 1 + (Math.floor(index / wallets.length) % (wallets.length - 1))
  return [wallets[first], wallets[(first + step) % wallets.length]]
}

/**
 * Writes `count` transactions straight into the service's database: in pairs, one way then back,
 * between the wallets of `pairOf`, each carrying 1 unit of 1 to `assetIds.length` assets (the
 * number decided by the two wallets). Every holding ends where it started, so the ledger still
 * verifies (each holding equals its journal sum and its last running balance). `count` is even.
 * With two wallets every transaction is in both histories; with n, each wallet gets about
 * `4 × count / (2n)`, i.e. `count = perWallet × n / 2`.
 * No events: the outbox only matters for new transfers.
 */
export async function seedHistoryDirectly(
  storage: { dataDir: string } | { databaseUrl: string },
  wallets: number[],
  assetIds: number[],
  count: number,
): Promise<void> {
  if (count % 2 !== 0) throw new Error('history length must be even to keep holdings unchanged')
  if (wallets.length < 2) throw new Error('history needs two wallets or more')
  const createdAt = new Date().toISOString()
  const assetsOf = (from: number, to: number) => assetIds.slice(0, 1 + ((from + to) % assetIds.length))
  if ('dataDir' in storage) {
    const db = new SQLite(path.join(storage.dataDir, 'coffer.sqlite'))
    db.pragma('busy_timeout = 10000')
    // Bench data, not money: no fsync per commit, and a cache that holds the indexes being filled
    // (several times faster for millions of rows).
    db.pragma('synchronous = OFF')
    db.pragma('cache_size = -1000000')
    try {
      const insertTransaction = db.prepare(
        'insert into transactions (sending_wallet_id, receiving_wallet_id, memo, created_at) values (?, ?, ?, ?)',
      )
      const insertLine = db.prepare('insert into transaction_assets (transaction_id, asset_id, quantity) values (?, ?, 1)')
      const insertBalance = db.prepare(
        'insert into running_balances (wallet_id, asset_id, created_at, transaction_id, quantity) values (?, ?, ?, ?, ?)',
      )
      const holding = db.prepare<[number, number], { quantity: number }>(
        'select quantity from holdings where wallet_id = ? and asset_id = ?',
      )
      // Balances in time: each side's holding after each transaction, from where it stands now.
      const balances = new Map<string, number>()
      for (const wallet of wallets)
        for (const asset of assetIds) balances.set(`${wallet} ${asset}`, holding.get(wallet, asset)?.quantity ?? 0)
      // In chunks, so that the service's own writers (background work) wait at most one chunk.
      const write = db.transaction((start: number, end: number) => {
        for (let index = start; index < end; index++) {
          const [one, other] = pairOf(wallets, index >> 1)
          const [from, to] = index % 2 === 0 ? [one, other] : [other, one]
          const { lastInsertRowid } = insertTransaction.run(from, to, 'history', createdAt)
          for (const asset of assetsOf(from, to)) {
            insertLine.run(lastInsertRowid, asset)
            for (const [side, delta] of [
              [from, -1],
              [to, 1],
            ] as const) {
              const key = `${side} ${asset}`
              const balance = (balances.get(key) ?? 0) + delta
              balances.set(key, balance)
              insertBalance.run(side, asset, createdAt, lastInsertRowid, balance)
            }
          }
        }
      })
      for (let start = 0; start < count; start += CHUNK) write(start, Math.min(count, start + CHUNK))
    } finally {
      db.close()
    }
    return
  }
  const client = new pg.Client({ connectionString: storage.databaseUrl })
  await client.connect()
  try {
    // Bench data, not money: no waiting for each chunk's commit to reach the disk.
    await client.query('set synchronous_commit = off')
    // The same pairs and asset sets as above, in SQL ($1 wallets, $2 assets, both 1-based arrays),
    // transactions $5 to $5 + $4 - 1 (each chunk starts with every holding as it stands).
    for (let start = 0; start < count; start += CHUNK) {
      await client.query(
        `with pairs as (
           select g, ((g / 2) % n) + 1 as first, (((g / 2) % n) + 1 + ((g / 2) / n) % (n - 1)) % n + 1 as second
           from generate_series($5::int, $5::int + $4::int - 1) as g, (select cardinality($1::bigint[]) as n) as size),
         sides as (
           select g, case when g % 2 = 0 then $1[first] else $1[second] end as sender, case when g % 2 = 0 then $1[second] else $1[first] end as receiver
           from pairs),
         inserted as (
           insert into transactions (sending_wallet_id, receiving_wallet_id, memo, created_at)
           select sender, receiver, 'history', $3 from sides order by g
           returning id, sending_wallet_id, receiving_wallet_id),
         lines as (
           select inserted.*, $2[k] as asset_id from inserted,
             generate_series(1, 1 + ((sending_wallet_id + receiving_wallet_id) % cardinality($2::bigint[]))::int) as k),
         written as (insert into transaction_assets (transaction_id, asset_id, quantity) select id, asset_id, 1 from lines)
         -- Balances in time: each side's holding after each transaction, from where it stands now.
         insert into running_balances (wallet_id, asset_id, created_at, transaction_id, quantity)
         select moves.wallet_id, moves.asset_id, $3, moves.id,
           coalesce((select quantity from holdings where holdings.wallet_id = moves.wallet_id and holdings.asset_id = moves.asset_id), 0)
             + sum(moves.delta) over (partition by moves.wallet_id, moves.asset_id order by moves.id rows unbounded preceding)
         from (select sending_wallet_id as wallet_id, asset_id, id, -1 as delta from lines
               union all select receiving_wallet_id, asset_id, id, 1 from lines) as moves`,
        [wallets, assetIds, createdAt, Math.min(CHUNK, count - start), start],
      )
    }
    // What autovacuum would do within a minute of such an insert; done now so that it does not
    // run during the scenarios that follow.
    await client.query('vacuum analyze transactions, transaction_assets, running_balances')
  } finally {
    await client.end()
  }
}

/** A step of the ten-million ledger (`ledger-size`): a batch of transfers from one wallet, or an issuance to all. */
export type LedgerStep = { kind: 'batch'; sender: number; recipients: number[] } | { kind: 'issuance' }

/**
 * The `index`-th step of the ledger `ledger-size` builds, as indexes into its wallets: after every
 * 99 batches an issuance to every wallet; otherwise a batch of 100 transfers to random other
 * wallets, sent by the busy wallet (index 0) one time in ten, else by a random other one. The
 * randomness is seeded by the index, so the API and the direct writes build the same ledger.
 */
export function ledgerStep(index: number, wallets: number): LedgerStep {
  if (index % 100 === 99) return { kind: 'issuance' }
  // mulberry32, seeded by the step's index.
  let state = (index * 0x9e3779b1) | 0
  const random = () => {
    state = (state + 0x6d2b79f5) | 0
    let t = Math.imul(state ^ (state >>> 15), 1 | state)
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  const sender = index % 10 === 0 ? 0 : 1 + Math.floor(random() * (wallets - 1))
  const recipients = Array.from({ length: 100 }, () => {
    const recipient = Math.floor(random() * (wallets - 1))
    return recipient >= sender ? recipient + 1 : recipient
  })
  return { kind: 'batch', sender, recipients }
}

/** An event writer that writes none: for history written straight into a store, where nothing reads events. */
export const noEvents: EventWriter = {
  eventWrites: () => [],
  holdEventWrites: () => [],
  recordEvents: async () => undefined,
}

/** Steps of the ledger written per statement (about 10,000 transactions) and per database transaction by `writeStepsDirectly`. */
const STEPS_PER_WRITE = 100
const STEPS_PER_COMMIT = 1_000

/** Columns of the rows `writeStepsDirectly` writes, as the write path writes them; of a transaction the first seven. */
const TRANSACTION_COLUMNS = LEDGER_COLUMNS.transactions.slice(0, 7)
const { lines: LINE_COLUMNS, balances: BALANCE_COLUMNS } = LEDGER_COLUMNS
const HOLDING_COLUMNS = [
  ['wallet_id', 'bigint'],
  ['asset_id', 'bigint'],
  ['quantity', 'bigint'],
] as const

/**
 * Writes `steps` steps of `ledgerStep` from `first` on straight into the store, set-based: each
 * batch an atomic unit of transfers of 1 gold, each issuance one of 1 gold from mint to every
 * wallet. The rows are those the write path writes for such moves (the transaction with its stored
 * answer, its line, the running balance of each side; no events, no idempotency rows), written
 * `STEPS_PER_WRITE` steps per statement and `STEPS_PER_COMMIT` per database transaction, with the
 * write path's rules checked in memory (live wallets, no balance below zero but mint's). Then the
 * journal's own sequencer positions them, in process, in large rounds, so `coffer verify` checks
 * what was written. The service must not run meanwhile. Throws on the first move the rules refuse.
 */
export async function writeStepsDirectly(
  database: Database,
  plan: { walletIds: number[]; assetId: number; first: number; steps: number; dataDir: string; onProgress?: (message: string) => void },
): Promise<void> {
  const asset = await database.db
    .selectFrom('assets')
    .select(['id', 'name', 'value'])
    .where('id', '=', plan.assetId)
    .executeTakeFirstOrThrow()
  const { walletIds } = plan
  const everyWallet = [MINT_WALLET_ID, ...walletIds]
  const walletRows = await database.db
    .selectFrom('wallets')
    .select((eb) => [
      'wallets.id',
      'wallets.address',
      'wallets.deleted_at',
      eb.selectFrom('users').select('users.username').whereRef('users.primary_wallet_id', '=', 'wallets.id').as('username'),
    ])
    .where('wallets.id', 'in', everyWallet)
    .execute()
  const labels = new Map<number, WalletLabel>()
  for (const row of walletRows) {
    if (row.deleted_at !== null) throw new Error(`wallet ${row.id} is deleted`)
    labels.set(Number(row.id), row.username ? { address: row.address, username: row.username } : { address: row.address })
  }
  // Each holding as it stands: the running balances follow from it, and no wallet but mint may go below zero.
  const balances = new Map<number, number>()
  const holdingRows = await database.db
    .selectFrom('holdings')
    .select(['wallet_id', 'quantity', 'held', 'credit_limit'])
    .where('asset_id', '=', asset.id)
    .where('wallet_id', 'in', everyWallet)
    .execute()
  for (const row of holdingRows) {
    if (Number(row.held) !== 0 || Number(row.credit_limit) !== 0)
      throw new Error(`wallet ${row.wallet_id}: holds or credit are not written directly`)
    balances.set(Number(row.wallet_id), Number(row.quantity))
  }
  for (const id of everyWallet) if (!balances.has(id)) throw new Error(`wallet ${id} has no gold holding`)
  const last = await database.db
    .selectFrom('transactions')
    .select((eb) => eb.fn.max('id').as('id'))
    .executeTakeFirst()
  const firstId = Number(last?.id ?? 0) + 1
  let nextId = firstId
  const lines = [{ asset, quantity: 1 }]
  const end = plan.first + plan.steps
  /** The rows of steps `start` to `stop`, their balances moved on in `balances`: one instant, as the write path has one per batch. */
  const rowsOf = (start: number, stop: number): Rows => {
    const createdAt = new Date().toISOString()
    const rows: Rows = { transactions: [], lines: [], balances: [] }
    for (let index = start; index < stop; index++) {
      const step = ledgerStep(index, walletIds.length)
      const kind = step.kind === 'issuance' ? 'issuance' : 'transfer'
      const memo = kind === 'issuance' ? 'issue' : ''
      const moves: [number, number][] =
        step.kind === 'issuance'
          ? walletIds.map((to) => [MINT_WALLET_ID, to])
          : step.recipients.map((recipient) => [walletIds[step.sender], walletIds[recipient]])
      // An atomic unit: checked whole before anything of it is kept.
      const sender = moves[0][0]
      if (sender !== MINT_WALLET_ID && (balances.get(sender) as number) < moves.length)
        throw new Error(`the ledger would refuse step ${index}: wallet ${sender} holds too little gold`)
      for (const [from, to] of moves) {
        const id = nextId++
        const fields = { id, sending_wallet_id: from, receiving_wallet_id: to, memo, created_at: createdAt, kind } as const
        const body = JSON.stringify(toTransaction({ ...fields, reverses: null, hold_id: null, metadata: {} }, lines, labels))
        rows.transactions.push([id, from, to, memo, createdAt, body, kind])
        rows.lines.push([id, asset.id, 1])
        balances.set(from, (balances.get(from) as number) - 1)
        balances.set(to, (balances.get(to) as number) + 1)
        // Each side's holding after the move, in wallet order as the write path lists them.
        for (const wallet of from < to ? [from, to] : [to, from])
          rows.balances.push([wallet, asset.id, createdAt, id, balances.get(wallet)])
      }
    }
    return rows
  }
  const holdings = () => everyWallet.map((wallet) => [wallet, asset.id, balances.get(wallet) as number])
  const started = Date.now()
  const cpuAt = process.cpuUsage()
  const sink = database.dialect === 'postgres' ? postgresSink(database) : sqliteSink(plan.dataDir)
  try {
    for (let commit = plan.first; commit < end; commit += STEPS_PER_COMMIT) {
      const stop = Math.min(end, commit + STEPS_PER_COMMIT)
      await sink.commit(function* () {
        for (let start = commit; start < stop; start += STEPS_PER_WRITE) yield rowsOf(start, Math.min(stop, start + STEPS_PER_WRITE))
      }, holdings)
      const done = stop - plan.first
      if (done % 10_000 === 0)
        plan.onProgress?.(`${done * 100} transactions written (${((done * 100) / ((Date.now() - started) / 1000)).toFixed(0)}/s)`)
    }
  } finally {
    sink.close()
  }
  const cpu = process.cpuUsage(cpuAt)
  plan.onProgress?.(`CPU per transaction written: ${((cpu.user + cpu.system) / (nextId - firstId)).toFixed(1)} µs`)
  plan.onProgress?.(`${(nextId - firstId).toLocaleString('en')} transactions written in ${((Date.now() - started) / 1000).toFixed(1)} s`)
  // PostgreSQL: the ids the write path draws next follow the written ones.
  if (database.dialect === 'postgres') await sql`select setval('transactions_id_seq', ${nextId - 1})`.execute(database.db)
  await positionJournal(database, plan.dataDir, plan.onProgress)
}

/** Rows of the tables a transfer writes, as `writeStepsDirectly` makes them. */
interface Rows {
  transactions: unknown[][]
  lines: unknown[][]
  balances: unknown[][]
}

/** Where `writeStepsDirectly` writes: one database transaction per `commit` (chunks of rows, then every holding as it stands). */
interface Sink {
  commit(chunks: () => Iterable<Rows>, holdings: () => number[][]): Promise<void>
  close(): void
}

/** PostgreSQL: each chunk's rows as one statement (`rowsWrite`: `unnest` of arrays, a CTE per table). */
function postgresSink(database: Database): Sink {
  return {
    commit: (chunks, holdings) =>
      inTransaction(database, async (trx) => {
        for (const rows of chunks())
          await runWrites(trx, [
            rowsWrite(trx, TRANSACTION_COLUMNS, rows.transactions, (r) => insertFrom('transactions', TRANSACTION_COLUMNS, r)),
            rowsWrite(trx, LINE_COLUMNS, rows.lines, (r) => insertFrom('transaction_assets', LINE_COLUMNS, r)),
            rowsWrite(trx, BALANCE_COLUMNS, rows.balances, (r) => insertFrom('running_balances', BALANCE_COLUMNS, r)),
          ])
        await runWrites(trx, [
          rowsWrite(
            trx,
            HOLDING_COLUMNS,
            holdings(),
            (r) =>
              sql`update holdings set quantity = r.quantity from ${r} where holdings.wallet_id = r.wallet_id and holdings.asset_id = r.asset_id`,
          ),
        ])
      }),
    close: () => undefined,
  }
}

/** Rows per multi-row insert on SQLite. */
const SQLITE_ROWS = 100

/**
 * SQLite: a connection of its own, prepared multi-row inserts of `SQLITE_ROWS` rows, and no fsync
 * per commit (bench data: the store is synced when the connection closes and the service checkpoints).
 */
function sqliteSink(dataDir: string): Sink {
  const db = new SQLite(path.join(dataDir, 'coffer.sqlite'))
  db.pragma('busy_timeout = 10000')
  db.pragma('foreign_keys = ON')
  db.pragma('synchronous = OFF')
  db.pragma('cache_size = -1000000')
  const inserter = (table: string, columns: readonly (readonly [string, string])[]) => {
    const names = columns.map(([name]) => name).join(', ')
    const tuple = `(${columns.map(() => '?').join(', ')})`
    const prepare = (count: number) => db.prepare(`insert into ${table} (${names}) values ${Array<string>(count).fill(tuple).join(', ')}`)
    const many = prepare(SQLITE_ROWS)
    const one = prepare(1)
    return (rows: unknown[][]) => {
      let at = 0
      for (; at + SQLITE_ROWS <= rows.length; at += SQLITE_ROWS) many.run(rows.slice(at, at + SQLITE_ROWS).flat())
      for (; at < rows.length; at++) one.run(rows[at])
    }
  }
  const insertTransactions = inserter('transactions', TRANSACTION_COLUMNS)
  const insertLines = inserter('transaction_assets', LINE_COLUMNS)
  const insertBalances = inserter('running_balances', BALANCE_COLUMNS)
  const setHolding = db.prepare('update holdings set quantity = ? where wallet_id = ? and asset_id = ?')
  const commit = db.transaction((chunks: () => Iterable<Rows>, holdings: () => number[][]) => {
    for (const rows of chunks()) {
      insertTransactions(rows.transactions)
      insertLines(rows.lines)
      insertBalances(rows.balances)
    }
    for (const [walletId, assetId, quantity] of holdings()) setHolding.run(quantity, walletId, assetId)
  })
  return {
    commit: async (chunks, holdings) => commit(chunks, holdings),
    close: () => db.close(),
  }
}

const insertFrom = (table: string, columns: readonly (readonly [string, string])[], from: RawBuilder<unknown>) => {
  const names = sql.raw(columns.map(([name]) => name).join(', '))
  return sql`insert into ${sql.raw(table)} (${names}) select ${names} from ${from}`
}

/** Most transactions the sequencer positions per round when the bench runs it over a history written directly. */
const SEQUENCER_ROUND = 20_000

/**
 * Positions every transaction without a position by the journal's own sequencer (chain, Merkle
 * tree, checkpoint), run in process in rounds of `SEQUENCER_ROUND`, with the store's signing key.
 */
async function positionJournal(database: Database, dataDir: string, onProgress?: (message: string) => void): Promise<void> {
  const config = loadConfig({ ...process.env, DATA_DIR: dataDir, LOG_LEVEL: 'silent' })
  let failure: unknown
  const started = Date.now()
  const sequencer = new JournalSequencer({
    database,
    key: resolveSigningKey(config.signingKey, dataDir),
    checkpointIntervalMs: config.checkpointIntervalMs,
    batch: SEQUENCER_ROUND,
    onProgress: (_, size) => onProgress?.(`journal: ${size} positioned (${(size / ((Date.now() - started) / 1000)).toFixed(0)}/s)`),
    onError: (error) => (failure = error),
  })
  sequencer.start()
  try {
    while ((await hasUnpositioned(database.db)) && failure === undefined) await new Promise((resolve) => setTimeout(resolve, 500))
  } finally {
    await sequencer.stop()
  }
  if (failure !== undefined) throw failure
}

/** An asset `gold` and 100 wallets named `<prefix>0`… written straight into a fresh store, for ledgers built in process. */
export async function goldAndWallets(
  database: Database,
  prefix: string,
): Promise<{ asset: { id: number; name: string; value: number }; walletIds: number[] }> {
  const now = new Date().toISOString()
  const gold = await database.db
    .insertInto('assets')
    .values({ name: 'gold', name_key: 'gold', value: 1, created_at: now, deleted_at: null })
    .returning('id')
    .executeTakeFirstOrThrow()
  const walletIds: number[] = []
  for (let i = 0; i < 100; i++) {
    const wallet = await database.db
      .insertInto('wallets')
      .values({ address: `${prefix}${i}`, user_id: null, created_at: now, deleted_at: null })
      .returning('id')
      .executeTakeFirstOrThrow()
    walletIds.push(wallet.id)
  }
  return { asset: { id: gold.id, name: 'gold', value: 1 }, walletIds }
}

/**
 * A history written through the ledger's write path (500 moves a database transaction, no events):
 * an issuance of gold to each wallet, then transfers of 1 among them up to `transactions` in all.
 */
export async function writeHistory(
  database: Database,
  asset: { id: number; name: string; value: number },
  walletIds: number[],
  transactions: number,
): Promise<void> {
  await inTransaction(database, (trx) =>
    applyMoves(
      trx,
      walletIds.map((to): Move => ({ from: 1, to, kind: 'issuance', lines: [{ asset, quantity: 1_000_000_000 }], memo: 'issue' })),
      noEvents,
    ),
  )
  for (let done = walletIds.length; done < transactions; done += 500) {
    const moves = Array.from({ length: Math.min(500, transactions - done) }, (_, i): Move => {
      const k = done + i
      const n = walletIds.length
      return {
        from: walletIds[k % n],
        to: walletIds[(k + 1 + (k % (n - 1))) % n],
        kind: 'transfer',
        lines: [{ asset, quantity: 1 }],
        memo: 'history',
      }
    })
    await inTransaction(database, (trx) => applyMoves(trx, moves, noEvents))
  }
}
