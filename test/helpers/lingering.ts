/**
 * Preloaded into each test file's process by `scripts/test.ts`. A file whose process outlives its
 * tests by minutes is held by something not closed; this names what holds it (socket, timer, child
 * process kinds) on stderr every 30 s past 4 minutes, so that a file that times out says why.
 * The runner's own process (no `NODE_TEST_CONTEXT`) lives as long as the suite, and is left alone.
 */
const AFTER_MS = 240_000
const EVERY_MS = 30_000

if (process.env.NODE_TEST_CONTEXT) {
  setTimeout(function report() {
    const held = process.getActiveResourcesInfo().join(', ')
    process.stderr.write(`${process.argv[1]}: still running after ${Math.round(process.uptime())} s, held by ${held}\n`)
    setTimeout(report, EVERY_MS).unref()
  }, AFTER_MS).unref()
}
