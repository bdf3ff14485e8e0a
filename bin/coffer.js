#!/usr/bin/env node
// The `coffer` command. In a development checkout (tsx installed) it runs the TypeScript sources,
// so `npx coffer …` works right after `npm ci` without a build step; in a production install
// (`npm ci --omit=dev` on a built tree, no tsx) it runs the compiled build in dist/.
import fs from 'node:fs'

const dev = await import('tsx/esm/api').catch(() => undefined)
let cli
if (dev) {
  dev.register()
  cli = await import('../src/cli.ts')
} else if (fs.existsSync(new URL('../dist/cli.js', import.meta.url))) {
  cli = await import('../dist/cli.js')
} else {
  console.error('coffer: there is no build (dist/) and no tsx to run the sources: run `npm ci && npm run build` first')
  process.exit(2)
}
process.exitCode = await cli.main(process.argv.slice(2))
