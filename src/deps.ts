import type { SessionEndings } from './accounts/session-endings.ts'
import type { Tracing } from './telemetry/tracing.ts'
import type { Config } from './config.ts'
import type { Database } from './db/database.ts'
import type { WebhooksService } from './events/webhooks.service.ts'
import type { AttemptLimiter } from './http/rate-limit.ts'
import type { JournalSequencer } from './journal/sequencer.ts'
import type { SigningKey } from './secrets/signing-key.ts'
import type { Ledger } from './ledger/ledger.service.ts'
import type { SecretsKey } from './secrets/secret-box.ts'

/** What `buildApp` is given; main.ts and the test helper each assemble one. */
export interface AppOptions {
  config: Config
  database: Database
  /** SHA-256 of the admin key (`http/admin-key.ts`). */
  adminKeyHash: string
  /** Seals webhook secrets at rest; checked against the database at start (`events/webhook-secrets.ts`). */
  secretsKey: SecretsKey
  /** Where the JSON log lines go; standard output by default. */
  logStream?: { write(line: string): void }
  /** OpenTelemetry traces, when the `OTEL_*` variables ask for them (`telemetry/sdk.ts`); none otherwise. */
  tracing?: Tracing
  /** The ledger's clock, now as a stored timestamp; the system clock unless given (tests move it past expiries). */
  clock?: () => string
}

/**
 * What the app's parts are built from: the options, and the long-lived parts `buildApp` makes
 * from them (and closes with the app). Each route module takes the part of it that it uses.
 */
export interface Deps extends AppOptions {
  ledger: Ledger
  webhooks: WebhooksService
  /** Login, registration and admin-key attempts, shared by instances on PostgreSQL (`http/rate-limit.ts`). */
  limiter: AttemptLimiter
  /** Positions committed transactions and signs checkpoints (`journal/sequencer.ts`). */
  sequencer: JournalSequencer
  /** Signs the journal's checkpoints (SIGNING_KEY or the data directory's key file). */
  signingKey: SigningKey
  /** User sessions ended by this instance, announced to its open event streams. */
  sessionEndings: SessionEndings
}
