import type { Db, Executor } from '../db/database.ts'
import { inTransaction } from '../db/dialect.ts'
import { isSealed, open, seal, sealedKeyId, type SecretsKey } from '../secrets/secret-box.ts'
import {
  createSecretsKeyFile,
  loadNextSecretsKey,
  loadSecretsKey,
  promoteNextSecretsKeyFile,
  SecretsKeyError,
  type KeySource,
} from '../secrets/secrets-key.ts'
import * as repo from './webhooks.repository.ts'

/** What a sealed webhook secret is bound to: its wallet, so it does not open on another row. */
function context(walletId: number): string {
  return `webhook:${walletId}`
}

export function sealWebhookSecret(key: SecretsKey, walletId: number, secret: string): string {
  return seal(key, secret, context(walletId))
}

/** The signing secret of a wallet's webhook as stored; throws SecretUnreadableError under another key. */
export function openWebhookSecret(key: SecretsKey, walletId: number, stored: string): string {
  return open(key, stored, context(walletId))
}

/** Ids of the keys the stored webhook secrets are sealed with (normally one, none when there are none). */
export async function findSecretsKeyIds(db: Executor): Promise<string[]> {
  const ids = new Set<string>()
  for (const { secret } of await repo.listWebhookSecrets(db)) {
    const id = sealedKeyId(secret)
    if (id) ids.add(id)
  }
  return [...ids].sort()
}

/**
 * Run at start, before anything is served: finds the secrets key (generating the key file on a
 * first start), checks it against the sealed webhook secrets, seals any still in clear, and
 * finishes an interrupted rotation. Throws SecretsKeyError, changing nothing, when the key is
 * missing or not the one the secrets are sealed with.
 */
export async function prepareWebhookSecrets(db: Db, source: KeySource): Promise<SecretsKey> {
  const sealedWith = await findSecretsKeyIds(db)
  let key = loadSecretsKey(source)
  const next = loadNextSecretsKey(source)
  if (next && sealedWith.includes(next.id) && !(key && sealedWith.includes(key.id))) {
    promoteNextSecretsKeyFile(source)
    key = loadSecretsKey(source)
  }
  if (!key) {
    if (sealedWith.length > 0) {
      throw new SecretsKeyError(
        `the webhook secrets in the database are encrypted with key ${sealedWith[0]}, ` +
          `but no SECRETS_KEY is set and ${source.dataDir} has no secrets-key file: set SECRETS_KEY to that key`,
      )
    }
    key = createSecretsKeyFile(source)
  }
  const foreign = sealedWith.find((id) => id !== key.id)
  if (foreign) {
    const from = key.file ? `the key in ${key.file}` : 'SECRETS_KEY'
    throw new SecretsKeyError(
      `SECRETS_KEY is wrong: the webhook secrets in the database are encrypted with key ${foreign}, ${from} is key ${key.id}; ` +
        'set SECRETS_KEY to the key they were encrypted with (nothing was changed)',
    )
  }
  await sealClearSecrets(db, key)
  return { id: key.id, key: key.key }
}

async function sealClearSecrets(db: Db, key: SecretsKey): Promise<void> {
  await inTransaction(db, async (trx) => {
    for (const row of await repo.listWebhookSecrets(trx)) {
      if (!isSealed(row.secret))
        await repo.replaceWebhookSecret(trx, row.wallet_id, row.secret, sealWebhookSecret(key, row.wallet_id, row.secret))
    }
  })
}

/**
 * Re-seals every webhook secret from one key to another in one database transaction; the secrets
 * themselves (what receivers verify with) do not change. Returns how many were re-sealed. Throws
 * SecretsKeyError, changing nothing, when a secret does not open with `from`.
 */
export async function resealWebhookSecrets(db: Db, from: SecretsKey, to: SecretsKey): Promise<number> {
  return inTransaction(db, async (trx) => {
    const rows = await repo.listWebhookSecrets(trx)
    for (const row of rows) {
      let clear: string
      try {
        clear = openWebhookSecret(from, row.wallet_id, row.secret)
      } catch (error) {
        throw new SecretsKeyError(
          `the webhook secret of wallet ${row.wallet_id} does not open with the current SECRETS_KEY ` +
            `(${(error as Error).message}); nothing was changed`,
        )
      }
      await repo.replaceWebhookSecret(trx, row.wallet_id, row.secret, sealWebhookSecret(to, row.wallet_id, clear))
    }
    return rows.length
  })
}
