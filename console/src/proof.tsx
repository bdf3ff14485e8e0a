import { useEffect, useState } from 'preact/hooks'
import {
  CofferError,
  coffer,
  createJournalVerifier,
  JournalCheckError,
  type Checkpoint,
  type JournalFailure,
  type JournalVerifier,
} from './api.ts'
import { formatQuantity, formatTime } from './format.ts'
import { JOURNAL_TEXT as T } from './text.ts'

/** Where the browser keeps the last checkpoint it trusted, so a journal rewritten since is caught next time. */
const TRUSTED = 'coffer.journal.trusted'

let verifier: Promise<JournalVerifier> | undefined

/** One verifier for the page, starting from the checkpoint this browser trusted before. */
function journal(): Promise<JournalVerifier> {
  if (!verifier) {
    let trusted: Checkpoint | undefined
    try {
      trusted = JSON.parse(localStorage.getItem(TRUSTED) ?? 'null') ?? undefined
    } catch {
      trusted = undefined
    }
    verifier = createJournalVerifier(coffer, trusted ? { trusted } : {})
    // A failed start (the service out of reach) is tried again by the next proof.
    verifier.catch(() => (verifier = undefined))
  }
  return verifier
}

type ProofState =
  | { state: 'checking' }
  | { state: 'checked'; position: number; checkpoint: Checkpoint }
  | { state: 'waiting' }
  | { state: 'failed'; failure: JournalFailure }
  | { state: 'unavailable' }

/** How long to wait before asking again for a proof no checkpoint covers yet. */
const RETRY_MS = 3_000

/**
 * Whether a transaction of the wallet is in the signed journal, checked here with Web Crypto (the
 * checkpoint's signature, the audit path, the consistency with the checkpoint trusted before), not
 * taken from the service's word.
 */
export function ProofStatus({ transactionId }: { transactionId: number }) {
  const [proof, setProof] = useState<ProofState>({ state: 'checking' })
  useEffect(() => {
    let stopped = false
    let timer: ReturnType<typeof setTimeout> | undefined
    const check = async () => {
      try {
        const verifying = await journal()
        const checked = await verifying.checkTransaction(transactionId)
        if (verifying.trusted) localStorage.setItem(TRUSTED, JSON.stringify(verifying.trusted))
        if (!stopped)
          setProof({ state: 'checked', position: checked.transaction.position ?? checked.leaf_index + 1, checkpoint: checked.checkpoint })
      } catch (caught) {
        if (stopped) return
        if (caught instanceof JournalCheckError) setProof({ state: 'failed', failure: caught.failure })
        else if (caught instanceof CofferError && caught.code === 'J000') {
          setProof({ state: 'waiting' })
          timer = setTimeout(() => void check(), RETRY_MS)
        } else setProof({ state: 'unavailable' })
      }
    }
    void check()
    return () => {
      stopped = true
      clearTimeout(timer)
    }
  }, [transactionId])
  switch (proof.state) {
    case 'checking':
      return <span class="proof">{T.checking}</span>
    case 'checked':
      return (
        <span class="proof checked">
          {T.checked(formatQuantity(proof.position), formatQuantity(proof.checkpoint.size), formatTime(proof.checkpoint.signed_at))}
        </span>
      )
    case 'waiting':
      return <span class="proof">{T.waiting}</span>
    case 'failed':
      return <strong class="proof failed">{T.failed(proof.failure)}</strong>
    case 'unavailable':
      return <span class="proof">{T.unavailable}</span>
  }
}
