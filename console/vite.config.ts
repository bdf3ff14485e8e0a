import { defineConfig } from 'vite'

/**
 * The console: a Preact app under /console/, built into console/dist, which the service serves
 * (src/http/console.ts). Every script is a file of its own origin: the page's CSP allows no inline
 * script, so nothing is inlined, and no module preload polyfill is injected.
 */
export default defineConfig({
  root: import.meta.dirname,
  base: '/console/',
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    target: 'es2022',
    reportCompressedSize: true,
  },
  server: { proxy: { '^/(?!console/)': 'http://127.0.0.1:8080' } },
})
