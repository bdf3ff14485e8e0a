import { useMemo, useState } from 'preact/hooks'
import { newAttemptKey, type Transaction } from './api.ts'
import { formatAssets, formatQuantity } from './format.ts'
import { REVERSE_TEXT as T } from './text.ts'
import { ErrorNotice, Field, useAction, useConfirm } from './ui.tsx'
import { check, parsePart } from './validate.ts'

/** What moving a transaction back sends: the quantities (all that is left when absent) and a memo. */
export interface ReverseBody {
  assets?: Record<string, number>
  memo?: string
}

/**
 * A refund (by the receiver) or an operator's correction of one transaction, under it: quantities
 * per asset, empty for everything not yet moved back, and a memo; confirmed before it is sent.
 * `send` posts it with the attempt's Idempotency-Key, so a repeated click moves nothing twice.
 * What it did is handed to `announce`, kept by the list: this form goes once nothing is left to
 * move back, and is made anew when the list changes layout with the screen's width.
 */
export function ReverseForm({
  transaction,
  verb,
  to,
  send,
  announce,
  done,
}: {
  transaction: Transaction
  /** "Refund" (the receiver) or "Correct" (the operator). */
  verb: string
  /** Who gets the assets back, as a person reads it. */
  to: string
  send: (body: ReverseBody, key: string) => Promise<Transaction>
  /** Shows what was moved back, beside the transaction. */
  announce: (text: string) => void
  done: () => Promise<unknown>
}) {
  const [quantities, setQuantities] = useState<Record<string, string>>({})
  const [memo, setMemo] = useState('')
  // Each sent refund or correction starts a new attempt.
  const [made, setMade] = useState(0)
  const { run, pending, error } = useAction(verb === T.correct ? ['A003'] : undefined)
  const confirm = useConfirm()
  const attemptKey = useMemo(newAttemptKey, [JSON.stringify(quantities), memo, made])

  const submit = (event: Event) => {
    event.preventDefault()
    void run(async () => {
      const assets = parsePart(transaction.assets, quantities, (line) => T.tooMuch(formatQuantity(line.quantity), line.asset.name))
      check(memo.length <= 64, T.memoTooLong)
      const partial = Object.keys(assets).length > 0
      const what = partial
        ? Object.entries(assets)
            .map(([name, quantity]) => `${formatQuantity(quantity)} ${name}`)
            .join(', ')
        : T.everything
      const yes = await confirm({
        title: T.confirmTitle(verb, transaction.id),
        body: (
          <>
            <p>{T.confirmBody(to, what)}</p>
            <p>{T.final}</p>
          </>
        ),
        action: verb,
        tone: 'danger',
      })
      if (!yes) return
      const reversal = await send({ ...(partial ? { assets } : {}), ...(memo ? { memo } : {}) }, attemptKey)
      announce(T.done(formatAssets(reversal.assets), to, reversal.id))
      setMade((count) => count + 1)
      setQuantities({})
      setMemo('')
      await done()
    })
  }

  return (
    <details class="reverse">
      <summary>{T.summary(verb, transaction.id)}</summary>
      <form onSubmit={submit} noValidate>
        {transaction.assets.map((line) => (
          <Field
            key={line.asset.id}
            label={T.quantity(line.asset.name)}
            value={quantities[line.asset.name] ?? ''}
            onValue={(value) => setQuantities({ ...quantities, [line.asset.name]: value })}
            inputMode="numeric"
            autoComplete="off"
            hint={T.quantityHint(formatQuantity(line.quantity))}
          />
        ))}
        <Field label={T.memo} value={memo} onValue={setMemo} maxLength={64} autoComplete="off" hint={T.memoHint} />
        <ErrorNotice error={error} />
        <button type="submit" disabled={pending}>
          {verb}
        </button>
      </form>
    </details>
  )
}
