/**
 * A ledger store a bench run left on disk (`ledger-size --keep`), described well enough for
 * another run to start a service on it and read what the first one read.
 */
export interface KeptStore {
  storage: 'sqlite' | 'postgres'
  transactions: number
  /** The service's data directory (SQLite's file, the signing key). */
  dataDir: string
  /** PostgreSQL: the server's data directory and the store's database on it. */
  postgresDir?: string
  database?: string
  adminKey: string
  /** The busy wallet's key: its history and balances are the reads measured. */
  busyKey: string
  /** The id a deep history page starts before, and the instant of `as_of` (the start of the build). */
  deepBefore: number
  asOf: string
}
