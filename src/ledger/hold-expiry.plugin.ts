import type { FastifyInstance } from 'fastify'
import type { Config } from '../config.ts'
import type { Ledger } from './ledger.service.ts'

/** Holds expired per transaction-sized pass; a pass that expires this many runs again at once. */
const PASS = 100

/**
 * The job that writes the expiry of holds (`holds.service.ts` expireDueHolds), then of units
 * (`expiry.service.ts`: the released units of a hold past their expiry go in the same run): every
 * `HOLD_EXPIRY_INTERVAL_MS` (1 s by default) it settles the pending holds whose time has come as
 * `expired` and emits their `hold.expired` events. Reads and the write path do not wait for it (a
 * hold past its expiry is never pending or held to them), so it only decides how soon the
 * events go out and the stored status catches up. Every instance runs one; two instances expiring
 * one hold settle it once (the hold's row is locked and found still pending). Started on ready,
 * stopped on close; an error is logged and the next run tries again.
 */
export default async function holdExpiry(app: FastifyInstance, { config, ledger }: { config: Config; ledger: Ledger }): Promise<void> {
  const interval = config.holdExpiryIntervalMs
  if (interval === 0) return
  const log = app.log.child({ component: 'hold-expiry' })
  let timer: NodeJS.Timeout | undefined
  let running: Promise<void> | undefined
  let stopped = false
  const run = async () => {
    try {
      while (!stopped && (await ledger.holds.expireDue(PASS)) === PASS);
      while (!stopped && (await ledger.expiry.expireDue(PASS)) === PASS);
    } catch (error) {
      log.error({ err: error }, 'expiring holds failed; the next run tries again')
    }
  }
  const schedule = () => {
    if (stopped) return
    timer = setTimeout(() => {
      running = run().finally(schedule)
    }, interval)
    timer.unref()
  }
  app.addHook('onReady', async () => schedule())
  app.addHook('onClose', async () => {
    stopped = true
    clearTimeout(timer)
    await running
  })
}
