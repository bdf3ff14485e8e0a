/**
 * A tip bot: holds a wallet key, follows the wallet's events, and answers every transfer it
 * receives by sending the sender a tip back (by default 1 unit of each asset received) with a memo.
 * It also checks that every transfer it received is in the service's journal: the inclusion proof
 * against a checkpoint signed by the journal's key, and that each checkpoint extends the last one it
 * trusted (`client/journal.ts`), so a journal rewritten behind its back is caught.
 *
 *   COFFER_URL=http://localhost:8080 COFFER_KEY=cfw_… npx tsx examples/tip-bot/tip-bot.ts
 *
 * With a top-up (`TOPUP_KEY`, …) it keeps a balance monitor on its float and, when the monitor
 * fires (`balance.crossed`), has its reserve wallet pay it through a key of that wallet.
 *
 * Events arrive at least once: each payment's Idempotency-Key is derived from the event id, so a
 * redelivered event is answered by the service's stored reply instead of paying twice.
 */
import { fileURLToPath } from 'node:url'
import { call, CofferError, createCofferClient, followEvents, type CofferClient, type StreamEvent } from '../../client/index.ts'
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
  /** Refill the bot's float from a reserve wallet when it runs low. */
  topUp?: TopUp
}

export interface TopUp {
  /** A wallet key of the reserve wallet; best limited to the bot's wallet (`recipients`) with a `per_day` cap. */
  key: string
  /** The bot's wallet address, which the reserve pays. */
  to: string
  asset: string
  /** Top up once what the bot can spend of `asset` drops below this. */
  below: number
  /** What each top-up sends. */
  quantity: number
}

/** The bot's monitor on its float (made once, found again on later runs); the bot's key needs the `monitor` scope. */
async function watchFloat(coffer: CofferClient, topUp: TopUp): Promise<number> {
  const monitors = await call(coffer.GET('/wallet/monitors'))
  const same = monitors.find((m) => m.asset.toLowerCase() === topUp.asset.toLowerCase() && m.below === topUp.below)
  return (same ?? (await call(coffer.POST('/wallet/monitors', { body: { asset: topUp.asset, below: topUp.below } })))).id
}

/** The memo of a top-up, which the bot does not thank its reserve for. */
const TOP_UP_MEMO = 'tip bot top-up'

/** The reserve pays the bot `quantity`, once per crossing: the Idempotency-Key is the event's. */
async function refill(topUp: TopUp, baseUrl: string, eventId: string, log: (line: string) => void): Promise<void> {
  const reserve = createCofferClient({ baseUrl, token: topUp.key })
  try {
    await call(
      reserve.POST('/wallet/transactions', {
        body: { recipient: topUp.to, type: 1, assets: { [topUp.asset]: topUp.quantity }, memo: TOP_UP_MEMO },
        params: { header: { 'idempotency-key': `top-up-${eventId}` } },
      }),
    )
    log(`topped up ${topUp.quantity} ${topUp.asset} from the reserve`)
  } catch (error) {
    // The reserve is empty, or the key's cap for the day is used up: said, not retried.
    if (error instanceof CofferError) log(`could not top up: ${error.code} ${error.message}`)
    else throw error
  }
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
  const topUp = options.topUp
  const monitorId = topUp && (await watchFloat(coffer, topUp))
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
    async (event: StreamEvent) => {
      if (topUp && event.type === 'balance.crossed' && event.data.monitor.id === monitorId)
        return refill(topUp, options.baseUrl, event.id, log)
      if (event.type !== 'transaction.received') return
      const transfer = event.data
      // Issuance comes from mint, which has no one to thank.
      check(transfer.id)
      if (transfer.sending_wallet_address === 'mint') return
      // Nor is the bot's own top-up: the reserve would pay for its own thanks.
      if (topUp && transfer.memo === TOP_UP_MEMO) return
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
  if (process.env.TOPUP_KEY && !process.env.TOPUP_TO) {
    console.error("set TOPUP_TO to the bot's wallet address, which the reserve pays")
    process.exit(2)
  }
  const topUp: TopUp | undefined = process.env.TOPUP_KEY
    ? {
        key: process.env.TOPUP_KEY,
        to: process.env.TOPUP_TO ?? '',
        asset: process.env.TOPUP_ASSET ?? 'gold',
        below: Number(process.env.TOPUP_BELOW ?? 10),
        quantity: Number(process.env.TOPUP_QUANTITY ?? 50),
      }
    : undefined
  await runTipBot({ baseUrl, key, tip: Number(process.env.TIP ?? 1), signal: controller.signal, topUp })
}
