import fs from 'node:fs'
import path from 'node:path'
import { makeDataDirectory, writePrivateFile } from './private-files.ts'
import { generateSecretsKey, secretsKeyFrom, type SecretsKey } from './secret-box.ts'

/** SECRETS_KEY, else `DATA_DIR/secrets-key`; never in the database, so a dump alone cannot sign a delivery. */
export interface KeySource {
  secretsKey: Buffer | undefined
  dataDir: string
}

export interface LoadedKey extends SecretsKey {
  /** The file it was read from; undefined when it comes from SECRETS_KEY. */
  file: string | undefined
}

export function secretsKeyFile(source: KeySource): string {
  return path.join(source.dataDir, 'secrets-key')
}

/** The file a rotation writes the new key to before the database switches to it (`rotate-secrets-key`). */
function nextSecretsKeyFile(source: KeySource): string {
  return `${secretsKeyFile(source)}.next`
}

/** Decodes a key as written in SECRETS_KEY or a key file: 32 bytes as base64 (44 characters) or hex (64). */
export function decodeSecretsKey(text: string): Buffer | undefined {
  const trimmed = text.trim()
  if (/^[0-9a-fA-F]{64}$/.test(trimmed)) return Buffer.from(trimmed, 'hex')
  if (/^[A-Za-z0-9+/_-]{43}=?$/.test(trimmed)) {
    const key = Buffer.from(trimmed.replace(/-/g, '+').replace(/_/g, '/'), 'base64')
    if (key.length === 32) return key
  }
  return undefined
}

function encodeSecretsKey(key: SecretsKey): string {
  return key.key.toString('base64')
}

export class SecretsKeyError extends Error {}

function readKeyFile(file: string): SecretsKey | undefined {
  let text: string
  try {
    text = fs.readFileSync(file, 'utf8')
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined
    throw error
  }
  const key = decodeSecretsKey(text)
  if (!key) throw new SecretsKeyError(`${file} does not hold a secrets key (32 bytes, base64): restore it, or set SECRETS_KEY`)
  return secretsKeyFrom(key)
}

/** The configured key, or undefined when neither SECRETS_KEY nor the key file exists yet. */
export function loadSecretsKey(source: KeySource): LoadedKey | undefined {
  if (source.secretsKey) return { ...secretsKeyFrom(source.secretsKey), file: undefined }
  const file = secretsKeyFile(source)
  const key = readKeyFile(file)
  return key && { ...key, file }
}

/** The key a rotation left in `secrets-key.next`, if one was interrupted after writing it. */
export function loadNextSecretsKey(source: KeySource): SecretsKey | undefined {
  return source.secretsKey ? undefined : readKeyFile(nextSecretsKeyFile(source))
}

/** Generates the key file (mode 0600); an existing one is kept. */
export function createSecretsKeyFile(source: KeySource): LoadedKey {
  const file = secretsKeyFile(source)
  makeDataDirectory(source.dataDir)
  try {
    writePrivateFile(file, `${encodeSecretsKey(generateSecretsKey())}\n`)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
  }
  return loadSecretsKey(source) as LoadedKey
}

/** Writes a new key where a rotation keeps it until the database has switched (mode 0600). */
export function writeNextSecretsKeyFile(source: KeySource, key: SecretsKey): void {
  writePrivateFile(nextSecretsKeyFile(source), `${encodeSecretsKey(key)}\n`, 'w')
}

/** Makes the rotated key the key file (after the database switched to it). */
export function promoteNextSecretsKeyFile(source: KeySource): void {
  fs.renameSync(nextSecretsKeyFile(source), secretsKeyFile(source))
}
