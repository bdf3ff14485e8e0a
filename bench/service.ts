import { spawn, type ChildProcess } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { freePort } from './postgres.ts'

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')

/** The Coffer service running as a child process, as `npm start` would run it. */
export interface Service {
  url: string
  pid: number
  logFile: string
  /** SIGTERM (graceful: writes the CPU profile when profiling), SIGKILL after a grace period. */
  stop(): Promise<void>
}

export interface ServiceOptions {
  dataDir: string
  databaseUrl?: string
  adminKey: string
  /** Directory for `--cpu-prof` output; no profiling when undefined. */
  profileDir?: string
  logLevel?: string
  env?: Record<string, string>
  /** Another checkout to run the service from (a build to compare with); this one by default. */
  root?: string
  /**
   * How long the service may take to answer /healthz: `startTimeoutMs`, else `BENCH_START_TIMEOUT`
   * (seconds), else 5 minutes. Generous because on a loaded machine a process that loads its
   * TypeScript and migrates a store can wait long for a core.
   */
  startTimeoutMs?: number
}

const startTimeoutMs = (options: ServiceOptions) => options.startTimeoutMs ?? Number(process.env.BENCH_START_TIMEOUT ?? 300) * 1000

export async function startService(options: ServiceOptions, track: (pid: number) => void): Promise<Service> {
  const port = await freePort()
  fs.mkdirSync(options.dataDir, { recursive: true })
  const logFile = path.join(options.dataDir, 'service.log')
  const log = fs.openSync(logFile, 'a')
  const nodeArgs = options.profileDir ? ['--cpu-prof', '--cpu-prof-dir', options.profileDir] : []
  const root = options.root ?? ROOT
  const child: ChildProcess = spawn(process.execPath, [...nodeArgs, '--import', 'tsx', path.join(root, 'src/main.ts')], {
    cwd: root,
    env: {
      ...process.env,
      ...options.env,
      HOST: '127.0.0.1',
      PORT: String(port),
      DATA_DIR: options.dataDir,
      DATABASE_URL: options.databaseUrl ?? '',
      ADMIN_API_KEY: options.adminKey,
      AUTH_RATE_LIMIT: '0',
      LOG_LEVEL: options.logLevel ?? 'info',
    },
    stdio: ['ignore', log, log],
  })
  fs.closeSync(log)
  if (!child.pid) throw new Error('could not start the service')
  track(child.pid)
  let exited = false
  const exit = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  void exit.then(() => (exited = true))
  const url = `http://127.0.0.1:${port}`

  const stop = async () => {
    if (exited) return
    child.kill('SIGTERM')
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000)
    await exit
    clearTimeout(timer)
  }

  const limit = startTimeoutMs(options)
  const deadline = Date.now() + limit
  for (;;) {
    if (exited) throw new Error(`the service exited during start; see ${logFile}:\n${fs.readFileSync(logFile, 'utf8').slice(-2000)}`)
    try {
      const response = await fetch(`${url}/healthz`)
      if (response.ok) break
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      await stop()
      throw new Error(`the service did not answer /healthz within ${limit / 1000} s (BENCH_START_TIMEOUT); see ${logFile}`)
    }
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  return { url, pid: child.pid, logFile, stop }
}
