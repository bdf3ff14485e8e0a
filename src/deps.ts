import type { Config } from './config.ts'
import type { Database } from './db/database.ts'
import type { SecretsKey } from './secrets/secret-box.ts'

/** What the HTTP app is built from; main.ts and the test helper each assemble one. */
export interface Deps {
  config: Config
  database: Database
  /** SHA-256 of the admin key (contract §5). */
  adminKeyHash: string
  /** Seals webhook secrets at rest; checked against the database at start (`events/webhook-secrets.ts`). */
  secretsKey: SecretsKey
}
