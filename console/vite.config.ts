import fs from 'node:fs'
import path from 'node:path'
import zlib from 'node:zlib'
import { defineConfig, type Plugin } from 'vite'

/**
 * Writes a brotli (`.br`) and a gzip (`.gz`) copy beside every text file of the build, at the
 * strongest settings: compressed once here, the service sends them as they are (`preCompressed`).
 */
function precompress(): Plugin {
  let outDir = ''
  return {
    name: 'coffer-precompress',
    apply: 'build',
    configResolved(config) {
      outDir = path.resolve(config.root, config.build.outDir)
    },
    closeBundle() {
      for (const file of fs.readdirSync(outDir, { recursive: true, encoding: 'utf8' })) {
        if (!/\.(js|css|html|svg)$/.test(file)) continue
        const full = path.join(outDir, file)
        const data = fs.readFileSync(full)
        const brotli = { [zlib.constants.BROTLI_PARAM_QUALITY]: 11, [zlib.constants.BROTLI_PARAM_SIZE_HINT]: data.length }
        fs.writeFileSync(`${full}.br`, zlib.brotliCompressSync(data, { params: brotli }))
        fs.writeFileSync(`${full}.gz`, zlib.gzipSync(data, { level: 9 }))
      }
    },
  }
}

/**
 * The console: a Preact app under /console/, built into console/dist, which the service serves
 * (src/http/console.ts). Every script is a file of its own origin: the page's CSP allows no inline
 * script, so nothing is inlined, and no module preload polyfill is injected.
 */
export default defineConfig({
  root: import.meta.dirname,
  base: '/console/',
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  plugins: [precompress()],
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
