import { createPrivateKey, createPublicKey, randomBytes, sign, verify, type KeyObject } from 'node:crypto'
import fs from 'node:fs'
import path from 'node:path'

/**
 * The Ed25519 key that signs checkpoints: SIGNING_KEY (the 32-byte private seed as base64 or hex,
 * or a PKCS#8 PEM Ed25519 private key), else `DATA_DIR/signing-key`, generated on first start with
 * mode 0600 like the admin key. Several instances must share it (SIGNING_KEY or the same file).
 */
export interface SigningKey {
  privateKey: KeyObject
  publicKey: KeyObject
  /** Base64 of the raw 32-byte public key (`GET /journal/key`). */
  publicKeyBase64: string
}

/** DER prefix of a PKCS#8 Ed25519 private key, before its 32-byte seed (RFC 8410). */
const PKCS8_ED25519_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex')

function fromSeed(seed: Buffer): KeyObject {
  return createPrivateKey({ key: Buffer.concat([PKCS8_ED25519_PREFIX, seed]), format: 'der', type: 'pkcs8' })
}

/** The key written in SIGNING_KEY or the key file; undefined when the text is none of the accepted forms. */
export function parseSigningKey(text: string): SigningKey | undefined {
  const trimmed = text.trim()
  let privateKey: KeyObject | undefined
  try {
    if (trimmed.startsWith('-----BEGIN')) privateKey = createPrivateKey({ key: trimmed, format: 'pem' })
    else if (/^[0-9a-fA-F]{64}$/.test(trimmed)) privateKey = fromSeed(Buffer.from(trimmed, 'hex'))
    else if (/^[A-Za-z0-9+/]{43}=$/.test(trimmed)) privateKey = fromSeed(Buffer.from(trimmed, 'base64'))
  } catch {
    return undefined
  }
  if (!privateKey || privateKey.asymmetricKeyType !== 'ed25519') return undefined
  const publicKey = createPublicKey(privateKey)
  const raw = Buffer.from(publicKey.export({ format: 'jwk' }).x as string, 'base64url')
  return { privateKey, publicKey, publicKeyBase64: raw.toString('base64') }
}

export function signingKeyFile(dataDir: string): string {
  return path.join(dataDir, 'signing-key')
}

/** SIGNING_KEY's key when given, else the key file's, created (0600) when there is none yet. */
export function resolveSigningKey(configured: SigningKey | undefined, dataDir: string): SigningKey {
  if (configured) return configured
  const file = signingKeyFile(dataDir)
  fs.mkdirSync(dataDir, { recursive: true })
  try {
    fs.writeFileSync(file, `${randomBytes(32).toString('base64')}\n`, { mode: 0o600, flag: 'wx' })
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
  }
  const key = parseSigningKey(fs.readFileSync(file, 'utf8'))
  if (!key) throw new Error(`${file} does not hold an Ed25519 signing key (a 32-byte seed, base64): restore it, or set SIGNING_KEY`)
  return key
}

/** The UTF-8 text a checkpoint's signature covers. */
function checkpointText(checkpoint: { size: number; root: string; signed_at: string }): string {
  return `coffer-checkpoint/v1\n${checkpoint.size}\n${checkpoint.root}\n${checkpoint.signed_at}\n`
}

/** Base64 Ed25519 signature of the checkpoint's text. */
export function signCheckpoint(key: SigningKey, checkpoint: { size: number; root: string; signed_at: string }): string {
  return sign(null, Buffer.from(checkpointText(checkpoint), 'utf8'), key.privateKey).toString('base64')
}

export function verifyCheckpointSignature(
  publicKey: KeyObject,
  checkpoint: { size: number; root: string; signed_at: string; signature: string },
): boolean {
  return verify(null, Buffer.from(checkpointText(checkpoint), 'utf8'), publicKey, Buffer.from(checkpoint.signature, 'base64'))
}
