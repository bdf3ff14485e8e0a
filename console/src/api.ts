import { createCofferClient } from '../../client/index.ts'

/** The console's only way to the service: the typed client, on the page's own origin, with the browser's cookies. */
export const coffer = createCofferClient({ baseUrl: location.origin })

export {
  call,
  callPage,
  CofferError,
  dryRun,
  followEvents,
  type Asset,
  type ErrorCode,
  type Holding,
  type paths,
  type Transaction,
  type WalletEvent,
} from '../../client/index.ts'

/**
 * An Idempotency-Key for one attempt at a payment (or a capture, refund, batch): random, made
 * without crypto.randomUUID (which needs HTTPS off localhost). Kept while the form is unchanged,
 * so a retry after a lost answer or a second click never moves anything twice.
 */
export function newAttemptKey(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16))
  return `console-${Array.from(bytes, (byte) => byte.toString(16).padStart(2, '0')).join('')}`
}

export {
  createJournalVerifier,
  importJournalKey,
  JournalCheckError,
  verifyCheckpoint,
  type Checkpoint,
  type JournalVerifier,
} from '../../client/journal.ts'
