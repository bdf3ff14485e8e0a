#!/usr/bin/env node
/**
 * `npm start`: runs the compiled service (dist/main.js), building it first when the build is
 * missing or older than its sources, so that `npm ci && npm start` still does everything.
 *
 *   node scripts/start.js           start (building first when needed)
 *   node scripts/start.js --stamp   record that the build is current (`npm run build` ends with it)
 *
 * Plain JavaScript on purpose: a production tree (`npm ci --omit=dev` on a built checkout) has no
 * TypeScript, no tsx and no Vite. There a stale build is run as it is, with a warning, and a
 * missing one is an error that says what to run.
 */
import { spawnSync } from 'node:child_process'
import crypto from 'node:crypto'
import fs from 'node:fs'
import { createRequire } from 'node:module'
import path from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const STAMP = path.join(ROOT, 'dist', '.build-stamp')
const ENTRY = path.join(ROOT, 'dist', 'main.js')

/**
 * What a build is made from: a change to any of these makes the build stale. Folders are walked
 * whole, except build output and installed packages.
 */
const INPUTS = ['src', 'console', 'tsconfig.json', 'tsconfig.build.json', 'package-lock.json']
const SKIPPED = new Set(['dist', 'node_modules'])

function listFiles(entry) {
  const full = path.join(ROOT, entry)
  if (!fs.existsSync(full)) return []
  if (!fs.statSync(full).isDirectory()) return [entry]
  return fs
    .readdirSync(full, { withFileTypes: true })
    .filter((child) => !SKIPPED.has(child.name))
    .flatMap((child) => listFiles(path.join(entry, child.name)))
}

/** A hash of every input's path and content: equal hashes mean the build is current. */
function sourceFingerprint() {
  const hash = crypto.createHash('sha256')
  for (const file of INPUTS.flatMap(listFiles).sort()) {
    hash.update(`${file}\0`)
    hash.update(fs.readFileSync(path.join(ROOT, file)))
    hash.update('\0')
  }
  return hash.digest('hex')
}

function canBuild() {
  const require = createRequire(path.join(ROOT, 'package.json'))
  try {
    require.resolve('typescript/package.json')
    require.resolve('vite/package.json')
    return true
  } catch {
    return false
  }
}

if (process.argv.includes('--stamp')) {
  fs.mkdirSync(path.dirname(STAMP), { recursive: true })
  fs.writeFileSync(STAMP, `${sourceFingerprint()}\n`)
  process.exit(0)
}

const built = fs.existsSync(ENTRY)
const current = built && fs.existsSync(STAMP) && fs.readFileSync(STAMP, 'utf8').trim() === sourceFingerprint()
if (!current) {
  if (canBuild()) {
    console.log(built ? 'The sources changed since the last build: building (npm run build)…' : 'No build yet: building (npm run build)…')
    const npm = process.env.npm_execpath
    const result = npm
      ? spawnSync(process.execPath, [npm, 'run', 'build'], { cwd: ROOT, stdio: 'inherit' })
      : spawnSync('npm', ['run', 'build'], { cwd: ROOT, stdio: 'inherit', shell: process.platform === 'win32' })
    if (result.status !== 0) {
      console.error('Coffer failed to start: the build failed (see above)')
      process.exit(1)
    }
  } else if (built) {
    console.warn(
      'warning: the sources changed since the last build, and the build tools are not installed (a production install); running the existing build',
    )
  } else {
    console.error(
      'Coffer failed to start: there is no build (dist/), and the build tools are not installed. Run `npm ci && npm run build` first (then `npm prune --omit=dev` if you like).',
    )
    process.exit(1)
  }
}

const { start } = await import(pathToFileURL(ENTRY).href)
start()
