import { hash, verify } from '@node-rs/argon2'

// OWASP: Argon2id with m = 19 MiB, t = 2, p = 1.
const OPTIONS = { algorithm: 2 /* Argon2id */, memoryCost: 19_456, timeCost: 2, parallelism: 1 }

export function hashPassword(password: string): Promise<string> {
  return hash(password, OPTIONS)
}

export function verifyPassword(passwordHash: string, password: string): Promise<boolean> {
  return verify(passwordHash, password).catch(() => false)
}

let decoy: Promise<string> | undefined

/** Spends the same time as a real check, so an unknown username answers like a wrong password. */
export async function verifyDecoy(password: string): Promise<void> {
  decoy ??= hashPassword('decoy password that matches nobody')
  await verifyPassword(await decoy, password)
}
