import { findUserById } from '../accounts/accounts.service.ts'
import type { Db } from '../db/database.ts'
import { inTransaction } from '../db/dialect.ts'
import { removeWebhookIn } from '../events/webhooks.service.ts'
import type { UserAuth } from '../http/auth.ts'
import { takeWalletTurns, type Ledger } from '../ledger/ledger.service.ts'
import { cancelSchedulesOf } from '../schedules/schedules.service.ts'
import { finishWalletDeletion, lockWalletForDeletion } from '../wallets/wallets.service.ts'

/**
 * DELETE /wallet: deletes the active wallet in one database transaction. Its pending holds, sent
 * and received, are voided (or expired, past their expiry); then its positive holdings go
 * to the caller's primary wallet as one Transaction (memo "wallet deleted"); its keys, webhook
 * (pending deliveries cancelled) and assignments are removed; sessions that had it active move to
 * their user's primary wallet. The row stays, marked deleted, so history keeps its address and
 * the address is never reused. Throws, in this order: W000, W006, W008 (primary wallet), C001 (it
 * owes on credit), and I003
 * when a holding of the primary wallet would overflow (nothing is deleted then).
 */
export async function deleteWallet(db: Db, ledger: Ledger, auth: UserAuth): Promise<void> {
  await inTransaction(db, async (trx) => {
    // The turns of both wallets of the sweep first, as every move takes them: a transfer of either
    // in progress finishes first, and none can then wait on this wallet's row while holding them.
    // With them the turns of the wallets on the other side of its holds, which are settled below.
    const primary = (await findUserById(trx, auth.userId))?.primary_wallet_id
    const counterparties = await ledger.holds.findCounterparties(trx, auth.walletId)
    await takeWalletTurns(trx, [auth.walletId, ...(primary ? [primary] : []), ...counterparties])
    const { walletId, primaryWalletId } = await lockWalletForDeletion(trx, auth)
    // A wallet that owes on credit cannot walk away from its debt.
    await ledger.credit.refuseDebt(trx, walletId)
    // The webhook goes first so that the holds' events and the sweep below queue no delivery to it.
    await removeWebhookIn(trx, walletId)
    // Its pending holds, both directions, are voided first: the sweep then moves everything.
    await ledger.holds.settleAllOf(trx, walletId)
    await ledger.transfers.sweep(trx, walletId, primaryWalletId, 'wallet deleted')
    await cancelSchedulesOf(trx, walletId)
    await finishWalletDeletion(trx, walletId)
  })
}
