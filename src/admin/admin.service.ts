import type { Db } from '../db/database.ts'
import { inTransaction } from '../db/dialect.ts'
import { OPERATOR_SESSION_HOURS } from '../http/auth.ts'
import { AppError } from '../http/errors.ts'
import { createToken, hashToken, sameHash } from '../http/tokens.ts'
import type { HistoryService, JournalQuery } from '../ledger/history.service.ts'
import { verifyLedger } from '../ledger/verify.ts'
import * as wallets from '../wallets/wallets.service.ts'
import * as admin from './admin.repository.ts'

export interface AdminServiceDeps {
  db: Db
  /** SHA-256 of the admin key. */
  adminKeyHash: string
  history: Pick<HistoryService, 'listHoldings' | 'listJournal'>
  /** The ledger's clock (what has expired, what expires within 30 days). */
  clock: () => string
}

/** The operator's sessions and read views. */
export type AdminService = ReturnType<typeof createAdminService>

export function createAdminService({ db, adminKeyHash, history, clock }: AdminServiceDeps) {
  return {
    /**
     * Opens an operator session for the console in exchange for the admin key: returns its token
     * (the cookie's value, shown only here) and when it expires, 12 hours on, never extended.
     * Throws A003 for a wrong key.
     */
    async openOperatorSession(key: string): Promise<{ token: string; expiresAt: string }> {
      if (!sameHash(hashToken(key), adminKeyHash)) throw new AppError('A003')
      const token = createToken('operator')
      const now = new Date()
      const createdAt = now.toISOString()
      const expiresAt = new Date(now.getTime() + OPERATOR_SESSION_HOURS * 3_600_000).toISOString()
      await inTransaction(db, async (trx) => {
        await admin.deleteExpiredOperatorSessions(trx, createdAt)
        await admin.insertOperatorSession(trx, hashToken(token), createdAt, expiresAt)
      })
      return { token, expiresAt }
    },

    /** True when the token (by its SHA-256) is an operator session that has neither ended nor expired. */
    isLiveOperatorSession(tokenHash: string): Promise<boolean> {
      return admin.operatorSessionExists(db, tokenHash, new Date().toISOString())
    },

    /** Ends the operator session of this token; nothing happens when there is none. */
    async endOperatorSession(token: string): Promise<void> {
      await admin.deleteOperatorSession(db, hashToken(token))
    },

    /** GET /admin/overview: counts, and per asset what circulates and how many wallets hold it. */
    async describeOverview() {
      const [counts, assets] = await Promise.all([admin.countRecords(db), admin.listCirculation(db, clock())])
      return { ...counts, assets }
    },

    /** GET /admin/wallets: a page of user wallets matching the search, and whether more exist. */
    async searchWallets(search: admin.WalletSearch) {
      const { wallets, more } = await admin.searchWallets(db, search)
      return {
        wallets: wallets.map((row) => ({
          id: row.id,
          address: row.address,
          user_id: row.user_id as number,
          username: row.username,
          deleted: row.deleted_at !== null,
        })),
        more,
      }
    },

    /** GET /admin/wallets/{id}: the wallet, its owner, assigned users and holdings. Throws W002 for an unknown id or `mint`. */
    async describeWallet(walletId: number) {
      const row = await admin.findWallet(db, walletId)
      if (!row) throw new AppError('W002', `no user wallet ${walletId}`)
      const [users, holdings] = await Promise.all([wallets.listWalletUsers(db, walletId), history.listHoldings(walletId)])
      const owner = { id: row.user_id as number, username: row.username }
      return {
        wallet: {
          id: row.id,
          address: row.address,
          user_id: owner.id,
          username: row.username,
          deleted: row.deleted_at !== null,
          primary: row.primary_wallet_id === row.id,
          created_at: row.created_at,
        },
        owner,
        users,
        holdings,
      }
    },

    /** GET /admin/transactions: a page of the journal (or of one wallet's history) and whether more exist. */
    listJournal(query: JournalQuery) {
      return history.listJournal(query)
    },

    /** GET /admin/verification: `coffer verify`'s check of the whole ledger, in one snapshot. */
    verifyLedgerNow() {
      return verifyLedger(db)
    },
  }
}
