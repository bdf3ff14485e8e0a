import crypto from 'node:crypto'

/**
 * Secrets kept at rest (webhook signing secrets), sealed with AES-256-GCM under the secrets key:
 *
 *   v1:<key id>:<12-byte IV, base64url>:<ciphertext and 16-byte tag, base64url>
 *
 * The key id names a wrong key as such; `context` (the wallet id) is authenticated, so a copy on another row does not open.
 */
export interface SecretsKey {
  id: string
  key: Buffer
}

const PREFIX = 'v1:'

export function secretsKeyFrom(key: Buffer): SecretsKey {
  if (key.length !== 32) throw new Error('a secrets key is 32 bytes')
  return { id: crypto.createHash('sha256').update(key).digest('hex').slice(0, 16), key }
}

export function generateSecretsKey(): SecretsKey {
  return secretsKeyFrom(crypto.randomBytes(32))
}

export function isSealed(stored: string): boolean {
  return stored.startsWith(PREFIX)
}

/** The id of the key a sealed value was sealed with; undefined for a value in clear. */
export function sealedKeyId(stored: string): string | undefined {
  return isSealed(stored) ? stored.split(':')[1] : undefined
}

export function seal(secretsKey: SecretsKey, clear: string, context: string): string {
  const iv = crypto.randomBytes(12)
  const cipher = crypto.createCipheriv('aes-256-gcm', secretsKey.key, iv)
  cipher.setAAD(Buffer.from(context))
  const sealed = Buffer.concat([cipher.update(clear, 'utf8'), cipher.final(), cipher.getAuthTag()])
  return `${PREFIX}${secretsKey.id}:${iv.toString('base64url')}:${sealed.toString('base64url')}`
}

class SecretUnreadableError extends Error {}

/** The clear value (a value still in clear as it is, sealed at the next start); SecretUnreadableError otherwise. */
export function open(secretsKey: SecretsKey, stored: string, context: string): string {
  if (!isSealed(stored)) return stored
  const [, keyId, iv, body] = stored.split(':')
  if (keyId !== secretsKey.id) throw new SecretUnreadableError(`sealed with key ${keyId}, not with this SECRETS_KEY (${secretsKey.id})`)
  try {
    const data = Buffer.from(body, 'base64url')
    const decipher = crypto.createDecipheriv('aes-256-gcm', secretsKey.key, Buffer.from(iv, 'base64url'))
    decipher.setAAD(Buffer.from(context))
    decipher.setAuthTag(data.subarray(data.length - 16))
    return Buffer.concat([decipher.update(data.subarray(0, data.length - 16)), decipher.final()]).toString('utf8')
  } catch {
    throw new SecretUnreadableError('a sealed secret fails its authentication: it was altered or belongs to another row')
  }
}
