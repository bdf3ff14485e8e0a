/**
 * A tip bot: holds a wallet key, follows the wallet's events, and answers every transfer it
 * receives by sending the sender a tip back (by default 1 unit of each asset received) with a memo.
 * It also checks that every transfer it received is in the service's journal: the inclusion proof
 * against a checkpoint signed by the journal's key, and that each checkpoint extends the last one it
 * trusted (`client/journal.ts`), so a journal rewritten behind its back is caught.
 *
 *   COFFER_URL=http://localhost:8080 COFFER_KEY=cfw_… npx tsx examples/tip-bot/tip-bot.ts
 *
 * Events arrive at least once: the tip's Idempotency-Key is derived from the event id, so a
 * redelivered event is answered by the service's stored reply instead of paying twice.
 */
import { fileURLToPath } from 'node:url'
import { call, CofferError, createCofferClient, followEvents, type WalletEvent } from '../../client/index.ts'
import { createJournalVerifier, JournalCheckError, type Checkpoint, type JournalVerifier } from '../../client/journal.ts'

export interface TipBotOptions {
  baseUrl: string
  /** A wallet key (`cfw_…`) of the bot's wallet. */
  key: string
  /** Units of each received asset sent back. */
  tip?: number
  signal?: AbortSignal
  /** Where the bot says what it did. */
  log?: (line: string) => void
  /** The journal's public key (base64) the bot trusts; fetched from the service when not given. */
  publicKey?: string
  /** A checkpoint trusted on an earlier run, so that a journal rewritten in between is caught. */
  trusted?: Checkpoint
  /** Called with each checkpoint newly trusted (to keep for the next run). */
  onTrusted?: (checkpoint: Checkpoint) => void
  /** The longest wait for a checkpoint to cover a received transaction before its check is given up. */
  proofWaitMs?: number
}

/** A received transaction's proof: fetched once a checkpoint covers it (J000 until then), then checked. */
async function checkReceived(verifier: JournalVerifier, id: number, options: TipBotOptions, log: (line: string) => void): Promise<void> {
  const giveUpAt = Date.now() + (options.proofWaitMs ?? 60_000)
  const before = verifier.trusted?.size
  for (;;) {
    try {
      const proof = await verifier.checkTransaction(id)
      log(
        `transaction ${id} is at position ${proof.leaf_index + 1} of the journal (checkpoint ${proof.checkpoint.size}, signature checked)`,
      )
      if (verifier.trusted && verifier.trusted.size !== before) options.onTrusted?.(verifier.trusted)
      return
    } catch (error) {
      if (error instanceof JournalCheckError) return log(`PROOF FAILED for transaction ${id}: ${error.message}`)
      // J000: no checkpoint covers it yet (one is signed every few seconds while the journal grows).
      const waiting = error instanceof CofferError && error.code === 'J000'
      if (!waiting && !(error instanceof CofferError && error.status === 503)) throw error
      if (Date.now() > giveUpAt || options.signal?.aborted) return log(`could not check transaction ${id}: ${error.message}`)
      await new Promise((resolve) => setTimeout(resolve, 1_000))
    }
  }
}

/** Runs until `signal` aborts or the service refuses the key (revoked: the promise then resolves). */
export async function runTipBot(options: TipBotOptions): Promise<void> {
  const log = options.log ?? console.log
  const tip = options.tip ?? 1
  const coffer = createCofferClient({ baseUrl: options.baseUrl, token: options.key })
  const verifier = await createJournalVerifier(coffer, { publicKey: options.publicKey, trusted: options.trusted })
  // Proofs are checked one after another, beside the tips (a proof waits for the next checkpoint).
  let checks = Promise.resolve()
  const check = (id: number) => {
    checks = checks
      .then(() => checkReceived(verifier, id, options, log))
      .catch((error) => log(`could not check transaction ${id}: ${error}`))
  }
  await followEvents(
    {
      baseUrl: options.baseUrl,
      token: options.key,
      signal: options.signal,
      onStatus: (status) => log(status === 'live' ? 'listening for transfers' : 'connection lost, reconnecting'),
      onRefused: (status, body) =>
        log(`the service refused the key (${status} ${(body as { code?: string } | undefined)?.code ?? ''}): stopping`),
    },
    async (event: WalletEvent) => {
      const transfer = event.data
      // Issuance comes from mint, which has no one to thank.
      if (event.type !== 'transaction.received') return
      check(transfer.id)
      if (transfer.sending_wallet_address === 'mint') return
      const assets = Object.fromEntries(transfer.assets.map((line) => [line.asset.name, tip]))
      const from = transfer.sending_username ?? transfer.sending_wallet_address
      try {
        await call(
          coffer.POST('/wallet/transactions', {
            body: {
              recipient: transfer.sending_wallet_address,
              type: 1,
              assets,
              memo: `thanks for transaction ${transfer.id}`.slice(0, 64),
            },
            params: { header: { 'idempotency-key': `tip-${event.id}` } },
          }),
        )
        log(`tipped ${from} for transaction ${transfer.id}`)
      } catch (error) {
        // A refused tip (the wallet ran out, the sender's wallet was deleted) is reported, not retried.
        if (error instanceof CofferError) log(`could not tip ${from} for transaction ${transfer.id}: ${error.code} ${error.message}`)
        else throw error
      }
    },
  )
  await checks
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const baseUrl = process.env.COFFER_URL ?? 'http://localhost:8080'
  const key = process.env.COFFER_KEY
  if (!key) {
    console.error('set COFFER_KEY to a wallet key (create one in the console under Keys)')
    process.exit(2)
  }
  const controller = new AbortController()
  process.once('SIGINT', () => controller.abort())
  process.once('SIGTERM', () => controller.abort())
  await runTipBot({ baseUrl, key, tip: Number(process.env.TIP ?? 1), signal: controller.signal })
}
