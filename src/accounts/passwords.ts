import { hash, verify } from '@node-rs/argon2'

// OWASP: Argon2id with m = 19 MiB, t = 2, p = 1.
const OPTIONS = { algorithm: 2 /* Argon2id */, memoryCost: 19_456, timeCost: 2, parallelism: 1 }

export function hashPassword(password: string): Promise<string> {
  return hash(password, OPTIONS)
}

export function verifyPassword(passwordHash: string, password: string): Promise<boolean> {
  return verify(passwordHash, password).catch(() => false)
}

/** A fixed hash of a password nobody has, so an unknown username costs one verification like a known one. */
export const DECOY_HASH = '$argon2id$v=19$m=19456,t=2,p=1$M+qr1rHQyFXjah4vKtyytw$PjUDu7CacQ6U76hOLyPlq79N0zL457Rdt7mzSK2P1+Q'

/** Spends the same time as a real check, so an unknown username answers like a wrong password. */
export async function verifyDecoy(password: string): Promise<void> {
  await verifyPassword(DECOY_HASH, password)
}
