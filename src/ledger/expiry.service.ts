import { sql } from 'kysely'
import type { Db, Executor } from '../db/database.ts'
import { inTransaction } from '../db/dialect.ts'
import { MINT_WALLET_ID, type EventWriter } from './ledger.types.ts'
import { findLots, holdingKey, takeWalletTurns } from './moves.repository.ts'
import { applyMove } from './moves.ts'

/**
 * Expiring units (`docs/expiry.md`): at its instant a lot's units that no pending hold reserves
 * return to mint as one Transaction of kind `expiry` per wallet, asset and instant. Reads and
 * spends never count expired units whether or not it has been written (`lots.ts` expiredOf); the
 * job (`hold-expiry.plugin.ts`) writes it within seconds. Each expiry runs in a transaction of its
 * own under the turns of the wallet and mint and measures the lot again there, so two instances
 * expiring one lot write it once: the second finds nothing left to expire.
 */

export interface ExpiryServiceDeps {
  db: Db
  events: EventWriter
  clock: () => string
}

export interface ExpiryService {
  /** Writes the expiry of up to `limit` lots whose instant has passed; answers how many it looked at. */
  expireDue(limit: number): Promise<number>
}

/** Seconds since the instant of the oldest lot whose expired units are not yet returned to mint (0 when none): the job's lag. */
export async function findExpiryLagSeconds(db: Executor, now: string): Promise<number> {
  const { rows } = await sql<{ oldest: string | null }>`
    select min(expires_at) as oldest from lots where quantity > held and expires_at <= ${now}`.execute(db)
  const oldest = rows[0]?.oldest
  return oldest ? Math.max(0, (Date.parse(now) - Date.parse(oldest)) / 1000) : 0
}

export function createExpiryService({ db, events, clock }: ExpiryServiceDeps): ExpiryService {
  const expireLot = (walletId: number, assetId: number, expiresAt: string) =>
    inTransaction(db, async (trx) => {
      await takeWalletTurns(trx, [walletId, MINT_WALLET_ID])
      const now = clock()
      const lot = (await findLots(trx, [{ wallet_id: walletId, asset_id: assetId }], [], now)).lots
        .get(holdingKey(walletId, assetId))
        ?.find((candidate) => candidate.expiresAt === expiresAt)
      const quantity = lot && lot.expiresAt <= now ? lot.quantity - lot.held : 0
      if (quantity <= 0) return
      // A deleted asset's row stays; an asset is never deleted while anything of it is held.
      const asset = await trx.selectFrom('assets').select(['id', 'name', 'value']).where('id', '=', assetId).executeTakeFirstOrThrow()
      await applyMove(
        trx,
        { from: walletId, to: MINT_WALLET_ID, lines: [{ asset, quantity }], memo: 'expired', kind: 'expiry', expire: expiresAt },
        events,
        clock,
      )
    })

  return {
    async expireDue(limit) {
      const { rows } = await sql<{ wallet_id: number; asset_id: number; expires_at: string }>`
        select wallet_id, asset_id, expires_at from lots where quantity > held and expires_at <= ${clock()}
        order by expires_at limit ${limit}`.execute(db)
      for (const row of rows) await expireLot(Number(row.wallet_id), Number(row.asset_id), row.expires_at)
      return rows.length
    },
  }
}
