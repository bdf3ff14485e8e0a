import crypto from 'node:crypto'

/** A random 12-letter address: 26^12 ≈ 9.5 × 10^16 possibilities, so collisions are rare and retried. */
export function randomAddress(): string {
  let out = ''
  while (out.length < 12) {
    for (const byte of crypto.randomBytes(16)) {
      // 234 = 26 * 9: rejecting larger bytes keeps every letter equally likely.
      if (byte < 234 && out.length < 12) out += String.fromCharCode(97 + (byte % 26))
    }
  }
  return out
}
