import { execFile } from 'node:child_process'
import { promisify } from 'node:util'

const run = promisify(execFile)

export interface CofferRun {
  code: number
  stdout: string
  stderr: string
}

/** Runs `coffer …` as an operator would, in a process of its own, with `env` added to this one's. */
export async function runCoffer(env: Record<string, string | undefined>, ...args: string[]): Promise<CofferRun> {
  try {
    const { stdout, stderr } = await run(process.execPath, ['bin/coffer.js', ...args], { env: { ...process.env, ...env }, timeout: 60_000 })
    return { code: 0, stdout, stderr }
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string }
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr }
  }
}
