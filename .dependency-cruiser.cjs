/**
 * The module order of src/, checked by `npm run check:modules` (in `.ci/run`): a folder (or a file
 * directly in src/) may import only what sits below it here. Drawn in the README's architecture
 * section; a new folder takes its place in LAYERS.
 */
const LAYERS = [
  ['secrets', '^src/secrets/'],
  ['config', '^src/(version|config)[.]ts$'],
  ['telemetry', '^src/telemetry/'],
  ['db', '^src/db/'],
  ['http', '^src/http/'],
  ['accounts', '^src/accounts/'],
  ['wallets', '^src/wallets/'],
  ['ledger', '^src/ledger/'],
  ['journal', '^src/journal/'],
  ['events', '^src/events/'],
  ['monitors', '^src/monitors/'],
  ['schedules', '^src/schedules/'],
  ['operations', '^src/operations/'],
  ['deps', '^src/deps[.]ts$'],
  ['flows', '^src/flows/'],
  ['admin', '^src/admin/'],
  ['app', '^src/(app|cli|main|routes)[.]ts$'],
]

const upward = LAYERS.map(([name, path], index) => ({
  name: `${name}-imports-above`,
  comment: `${name} may import only the layers below it (.dependency-cruiser.cjs LAYERS)`,
  severity: 'error',
  from: { path },
  to: { path: LAYERS.slice(index + 1).map(([, above]) => above) },
}))

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    ...upward.filter((rule) => rule.to.path.length > 0),
    {
      name: 'unplaced-module',
      comment: 'every folder and file of src/ has its place in LAYERS',
      severity: 'error',
      from: { path: '^src/', pathNot: LAYERS.map(([, path]) => path) },
      to: {},
    },
    {
      name: 'no-circular',
      comment: 'no file imports, directly or through others, one that imports it back',
      severity: 'error',
      from: { path: '^src/' },
      to: { circular: true },
    },
    {
      name: 'no-foreign-repository',
      comment: "a folder uses another folder's services and types, never its repositories (SQL stays in its own domain)",
      severity: 'error',
      from: { path: '^src/([^/]+)/' },
      to: { path: '^src/([^/]+)/.+[.]repository[.]ts$', pathNot: '^src/$1/' },
    },
    {
      name: 'routes-only-from-app',
      comment: 'route modules are registered by app.ts alone (the route index in the README lists them)',
      severity: 'error',
      from: { path: '^src/', pathNot: ['^src/app[.]ts$', '[.]plugin[.]ts$'] },
      to: { path: '[.]routes[.]ts$' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    moduleSystems: ['es6'],
  },
}
