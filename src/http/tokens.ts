import crypto from 'node:crypto'
import zlib from 'node:zlib'

/**
 * Tokens: a prefix naming the kind, 178 random bits and a CRC32 checksum, so a scanner tells a real
 * token from a typo without a lookup. Only their SHA-256 is stored.
 */
export const TOKEN_PREFIXES = {
  user: 'cfu_',
  wallet: 'cfw_',
  admin: 'cfa_',
  /** An operator session of the console (`coffer_admin` cookie), opened with the admin key. */
  operator: 'cfo_',
} as const

export type TokenKind = keyof typeof TOKEN_PREFIXES

const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz'
const RANDOM_LENGTH = 30
const CHECKSUM_LENGTH = 6
const TOKEN_PATTERN = /^(cfu|cfw|cfa|cfo)_([0-9A-Za-z]{30})([0-9A-Za-z]{6})$/

function randomBase62(length: number): string {
  let out = ''
  while (out.length < length) {
    for (const byte of crypto.randomBytes(length * 2)) {
      // 248 = 62 * 4: rejecting larger bytes keeps every character equally likely.
      if (byte < 248 && out.length < length) out += ALPHABET[byte % 62]
    }
  }
  return out
}

function checksum(body: string): string {
  let value = zlib.crc32(body)
  let out = ''
  for (let i = 0; i < CHECKSUM_LENGTH; i++) {
    out = ALPHABET[value % 62] + out
    value = Math.floor(value / 62)
  }
  return out
}

export function createToken(kind: TokenKind): string {
  const body = TOKEN_PREFIXES[kind] + randomBase62(RANDOM_LENGTH)
  return body + checksum(body)
}

/** The token's kind when it is well-formed with a valid checksum, else undefined. */
export function tokenKind(token: string): TokenKind | undefined {
  const match = TOKEN_PATTERN.exec(token)
  if (!match) return undefined
  const body = `${match[1]}_${match[2]}`
  if (checksum(body) !== match[3]) return undefined
  return (Object.keys(TOKEN_PREFIXES) as TokenKind[]).find((kind) => TOKEN_PREFIXES[kind] === `${match[1]}_`)
}

/** SHA-256 of the token, in hex; the one-shot `crypto.hash` (Node 20.12+) skips building a Hash object per request. */
export function hashToken(token: string): string {
  return crypto.hash('sha256', token, 'hex')
}

/** Constant-time comparison of two SHA-256 hex digests. */
export function sameHash(a: string, b: string): boolean {
  return a.length === b.length && crypto.timingSafeEqual(Buffer.from(a), Buffer.from(b))
}
