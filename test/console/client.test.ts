import assert from 'node:assert/strict'
import fs from 'node:fs'
import { after, before, describe, it } from 'node:test'
import { fetchDocument, generateTypes, TYPES_FILE } from '../../scripts/client-types.ts'
import { buildTestApp, type TestApp } from '../helpers/app.ts'

/**
 * The typed client's types (client/openapi.d.ts) are what openapi-typescript makes of the running
 * service's /openapi.json: a route or shape changed without `npm run client:generate` fails here.
 */
describe('the typed client', () => {
  let t: TestApp
  let baseUrl: string
  before(async () => {
    t = await buildTestApp()
    baseUrl = await t.app.listen({ port: 0, host: '127.0.0.1' })
  })
  after(() => t.close())

  it('client/openapi.d.ts matches what the running service documents (else run `npm run client:generate`)', async () => {
    const expected = await generateTypes(await fetchDocument(baseUrl))
    const actual = fs.readFileSync(TYPES_FILE, 'utf8')
    if (actual !== expected) {
      const a = actual.split('\n')
      const e = expected.split('\n')
      const line = a.findIndex((text, index) => text !== e[index])
      assert.fail(
        `client/openapi.d.ts differs from the service's /openapi.json from line ${line + 1}:\n  file:    ${a[line]}\n  service: ${e[line]}\nrun \`npm run client:generate\``,
      )
    }
  })

  it('knows every error code of the service', async () => {
    const { ERRORS } = await import('../../src/http/errors.ts')
    const types = fs.readFileSync(TYPES_FILE, 'utf8')
    for (const code of Object.keys(ERRORS)) assert.ok(types.includes(`"${code}"`), `${code} missing from the client's types`)
  })
})
