import assert from 'node:assert/strict'
import fs from 'node:fs'
import { after, before, describe, it } from 'node:test'
import { ERRORS } from '../../src/http/errors.ts'
import { routeErrorCodes, ROUTES } from '../../src/routes.ts'
import { buildTestApp, type TestApp } from '../helpers/app.ts'

type Operation = { summary?: string; description?: string; responses: Record<string, { description?: string }> }

/** `/wallets/{walletid}/assets` → `/wallets/:walletid/assets`, as the index writes paths. */
const fastifyPath = (path: string) => path.replace(/\{(\w+)\}/g, ':$1')

describe('the route index (src/routes.ts) and the API reference', () => {
  let t: TestApp
  let operations: { key: string; operation: Operation }[]

  before(async () => {
    t = await buildTestApp()
    const spec = (await t.app.inject({ method: 'GET', url: '/openapi.json' })).json() as {
      paths: Record<string, Record<string, Operation>>
    }
    operations = Object.entries(spec.paths).flatMap(([path, byMethod]) =>
      Object.entries(byMethod).map(([method, operation]) => ({ key: `${method.toUpperCase()} ${fastifyPath(path)}`, operation })),
    )
  })
  after(async () => {
    await t.close()
  })

  it('lists every documented operation, and documents every route it lists', () => {
    const documented = operations.map(({ key }) => key).sort()
    assert.deepEqual(documented, Object.keys(ROUTES).sort())
  })

  it('gives every operation a summary, a description and each error code it may answer, with its meaning', () => {
    for (const { key, operation } of operations) {
      assert.ok(operation.summary, `${key} has a summary`)
      assert.ok(operation.description, `${key} has a description`)
      const [method] = key.split(' ')
      for (const code of routeErrorCodes(ROUTES[key], method, {})) {
        const response = operation.responses[String(ERRORS[code].status)]
        assert.ok(
          response?.description?.includes(`\`${code}\` ${ERRORS[code].message}: `),
          `${key} documents ${code} under ${ERRORS[code].status}`,
        )
      }
      for (const [status, response] of Object.entries(operation.responses)) {
        assert.doesNotMatch(response.description ?? '', /contract/i, `${key} ${status} stands alone`)
      }
    }
  })

  it('names the guard each route really has: without credentials, what its auth says', async () => {
    for (const [key, doc] of Object.entries(ROUTES)) {
      const [method, path] = key.split(' ')
      const url = path.replace(/:\w+/g, '1')
      const response = await t.app.inject({
        method: method as 'GET',
        url,
        headers: { 'content-type': 'application/json' },
        payload: method === 'GET' || method === 'DELETE' ? undefined : '{}',
      })
      const code = response.headers['content-type']?.toString().startsWith('application/json') ? response.json().code : undefined
      const expected = { none: undefined, user: 'A000', wallet: 'A000', any: 'A000', admin: 'A003' }[doc.auth]
      if (expected) assert.equal(code, expected, `${key} refuses a caller without credentials with ${expected}`)
      else assert.ok(!['A000', 'A001', 'A003'].includes(code), `${key} takes callers without credentials (got ${code})`)
    }
  })

  it('names files that exist, and the README lists every route with its file', () => {
    const readme = fs.readFileSync('README.md', 'utf8')
    for (const [key, doc] of Object.entries(ROUTES)) {
      assert.ok(fs.existsSync(doc.file), `${key}: ${doc.file} exists`)
      const [method, path] = key.split(' ')
      // Cells are compared trimmed: a formatter may pad the table's columns.
      const row = readme.split('\n').find((line) => {
        const cells = line.split('|').map((cell) => cell.trim())
        return cells[1] === method && cells[2] === `\`${path}\``
      })
      assert.ok(row, `the README's route index lists ${key}`)
      assert.ok(row.includes(doc.file), `the README names ${doc.file} for ${key}`)
    }
  })
})

describe('the docs stand alone', () => {
  it('cite project files, never the outside contract or the lab log by item number', () => {
    const files = [
      'README.md',
      ...['src', 'docs', 'test', 'bench', 'scripts'].flatMap((dir) =>
        fs.readdirSync(dir, { recursive: true, encoding: 'utf8' }).map((file) => `${dir}/${file}`),
      ),
    ].filter((file) => /\.(ts|md|js)$/.test(file) && fs.statSync(file).isFile())
    for (const file of files) {
      const text = fs.readFileSync(file, 'utf8')
      assert.doesNotMatch(text, /contract \u00a7|\u00a7\s?\d/, `${file} cites the contract`)
      assert.doesNotMatch(text, /performance\.md, item \d/, `${file} cites the lab log by item number`)
    }
  })
})
