/**
 * What handing a group commit to a thread of its own would cost the main thread
 * (`npx tsx bench/experiments/thread-handoff.ts [--transfers=500] [--rounds=400]`).
 *
 * A commit of `--transfers` batch members (as the ledger's `Move`) goes to a worker and their
 * Transactions (as the API answers them) come back, four ways: a structured clone of both (no
 * thread), a worker's round trip of the objects, JSON text both ways, and a compact form (the
 * numbers in a moved Float64Array, memo and metadata as one string; back, an id and two balances a
 * transfer in another). Prints per way the main thread's CPU a transfer (from /proc), the process's
 * (both threads) and the wall time. Nothing here asserts a time.
 */
import { parseArgs } from 'node:util'
import { Worker } from 'node:worker_threads'
import type { Metadata, Transaction } from '../../src/ledger/ledger.types.ts'
import type { Move } from '../../src/ledger/moves.ts'
import { threadCpuMs } from '../cpu.ts'

const { values } = parseArgs({ options: { transfers: { type: 'string', default: '500' }, rounds: { type: 'string', default: '400' } } })
const size = Number(values.transfers)
const rounds = Number(values.rounds)

const gold = { id: 3, name: 'gold', value: 1 }
const members: Move[] = Array.from({ length: size }, (_, i) => ({
  from: 1000 + (i % 100),
  to: 2000 + ((i * 7) % 100),
  lines: [{ asset: gold, quantity: 1 + i }],
  memo: i % 3 ? 'season reward' : '',
  kind: 'transfer',
  metadata: (i % 5 ? { order: `A-${i}` } : {}) as Metadata,
}))
const answers: Transaction[] = members.map((member, i) => ({
  id: 5_000_000 + i,
  sending_wallet_id: member.from,
  receiving_wallet_id: member.to,
  sending_wallet_address: 'a'.repeat(26),
  receiving_wallet_address: 'b'.repeat(26),
  sending_username: `player${i % 100}`,
  receiving_username: `member${i % 100}`,
  created_at: '2026-12-02T01:00:00.000Z',
  memo: member.memo,
  assets: member.lines.map((line) => ({ quantity: line.quantity, asset: line.asset })),
  kind: 'transfer',
  metadata: member.metadata ?? {},
  position: null,
  hash: null,
}))

const answersText = JSON.stringify(answers)

// The worker answers each message with its `answer`, moving the buffers it names.
const worker = new Worker(
  `const { parentPort } = require('node:worker_threads')
   parentPort.on('message', (message) => parentPort.postMessage(message.answer, message.moved))`,
  { eval: true },
)

function roundTrip<T>(message: { answer: T; request?: unknown; moved?: ArrayBuffer[] }): Promise<T> {
  return new Promise((resolve) => {
    worker.once('message', resolve)
    worker.postMessage(message, message.moved ?? [])
  })
}

/** The compact form: four numbers a member in a moved buffer, the texts joined; back, three numbers a transfer. */
async function compact(): Promise<number> {
  const numbers = new Float64Array(size * 4)
  const texts: string[] = []
  for (let i = 0; i < size; i++) {
    const member = members[i]
    numbers.set([member.from, member.to, member.lines[0].asset.id, member.lines[0].quantity], i * 4)
    texts.push(member.memo, JSON.stringify(member.metadata))
  }
  const back = new Float64Array(size * 3)
  const answer = await roundTrip({ answer: back, request: { numbers, texts: texts.join('\u0000') }, moved: [numbers.buffer, back.buffer] })
  let ids = 0
  for (let i = 0; i < size; i++) ids += answer[i * 3]
  return ids
}

const ways: [string, () => unknown][] = [
  ['structured clone, no thread', () => [structuredClone(members), structuredClone(answers)]],
  ['a worker, objects both ways', () => roundTrip({ answer: answers, request: members })],
  // The main thread's half of JSON both ways: the members written, the answers read.
  ["JSON text, the main thread's half", () => [JSON.stringify(members), JSON.parse(answersText)]],
  ['a worker, compact', compact],
  ['a worker, an empty round trip', () => roundTrip({ answer: 0 })],
]

console.log(`a commit of ${size}: JSON bytes a member ${JSON.stringify(members).length / size}, a Transaction ${answersText.length / size}`)
for (const [name, step] of ways) {
  for (let i = 0; i < 50; i++) await step()
  const mainBefore = threadCpuMs(process.pid)
  const before = process.cpuUsage()
  const wall0 = performance.now()
  for (let i = 0; i < rounds; i++) await step()
  const used = process.cpuUsage(before)
  const perTransfer = (micros: number) => (micros / rounds / size).toFixed(2)
  const main = (threadCpuMs(process.pid) - mainBefore) * 1000
  console.log(
    `${name.padEnd(34)} main thread ${perTransfer(main)} µs a transfer, CPU ${perTransfer(used.user + used.system)}, ` +
      `wall ${perTransfer((performance.now() - wall0) * 1000)}`,
  )
}
await worker.terminate()
