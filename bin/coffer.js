#!/usr/bin/env node
// The `coffer` command. Runs the TypeScript sources directly through tsx, so `npx coffer …`
// works right after `npm ci` without a build step.
import { register } from 'tsx/esm/api'

register()
const { main } = await import('../src/cli.ts')
process.exitCode = await main(process.argv.slice(2))
