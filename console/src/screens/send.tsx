import { useEffect, useMemo, useState } from 'preact/hooks'
import { call, coffer, newAttemptKey, type Transaction } from '../api.ts'
import { holdingChoice } from '../credit.tsx'
import { formatAssets } from '../format.ts'
import { useWalletEvents } from '../live.ts'
import { SEND_TEXT as T } from '../text.ts'
import { Done, Empty, ErrorNotice, Field, Loading, Page, Select, useAction, useLoad } from '../ui.tsx'
import { check, checkAddress, checkUsername, parseId, parseQuantity } from '../validate.ts'
import { AfterSend } from './send-preview.tsx'
import type { ScreenProps } from './user-app.tsx'

const KINDS = T.kinds

interface Line {
  asset: string
  quantity: string
}

/**
 * Send one or more assets. Each attempt carries an Idempotency-Key: the same key while the form
 * is unchanged, so a retry after a lost answer or a second click never pays twice; a new one as
 * soon as anything in the form changes or the payment went through.
 */
export function Send({ session }: ScreenProps) {
  const holdings = useLoad(() => call(coffer.GET('/wallet/assets')), [session.wallet_id])
  // What arrives or leaves meanwhile shows at once, in the pickers and in what the preview starts from.
  useWalletEvents(session.wallet_id, () => void holdings.reload())
  const [kind, setKind] = useState('0')
  const [recipient, setRecipient] = useState('')
  const [lines, setLines] = useState<Line[]>([{ asset: '', quantity: '' }])
  const [memo, setMemo] = useState('')
  const [sent, setSent] = useState<Transaction | undefined>()
  const { run, pending, error } = useAction()
  const content = JSON.stringify([kind, recipient, lines, memo, session.wallet_id])
  const attemptKey = useMemo(newAttemptKey, [content, sent])
  useEffect(() => {
    const first = holdings.data?.[0]?.asset.name
    if (first) setLines((current) => current.map((line) => (line.asset ? line : { ...line, asset: first })))
  }, [holdings.data])

  const setLine = (index: number, change: Partial<Line>) => setLines(lines.map((line, i) => (i === index ? { ...line, ...change } : line)))

  /** The request the form makes, checked as the service would check it; throws the first problem in words. */
  const request = () => {
    const to = recipient.trim()
    check(to !== '', T.noRecipient)
    const target = kind === '0' ? checkUsername(to) : kind === '1' ? checkAddress(to) : String(parseId(to))
    const assets: Record<string, number> = {}
    for (const [index, line] of lines.entries()) {
      check(line.asset !== '', T.noAsset(index + 1))
      check(!(line.asset in assets), T.twice(line.asset))
      assets[line.asset] = parseQuantity(line.quantity, T.quantityOf(line.asset))
    }
    check(memo.length <= 64, T.memoTooLong)
    return { recipient: target, type: Number(kind) as 0 | 1 | 2, assets, ...(memo ? { memo } : {}) }
  }
  // The preview asks only about a form that is complete and valid.
  const draft = useMemo(() => {
    try {
      return request()
    } catch {
      return undefined
    }
  }, [content])

  const submit = (event: Event) => {
    event.preventDefault()
    void run(async () => {
      const transaction = await call(
        coffer.POST('/wallet/transactions', { body: request(), params: { header: { 'idempotency-key': attemptKey } } }),
      )
      setSent(transaction)
      setRecipient('')
      setMemo('')
      setLines([{ asset: holdings.data?.[0]?.asset.name ?? '', quantity: '' }])
      await holdings.reload()
    })
  }

  const options: [string, string][] = (holdings.data ?? []).map((holding) => [holding.asset.name, holdingChoice(holding)])
  return (
    <Page title={T.title}>
      <p>
        {T.from}
        <strong>{session.wallet_address}</strong>.
      </p>
      {sent && <Done>{T.sent(formatAssets(sent.assets), sent.receiving_username ?? sent.receiving_wallet_address, sent.id)}</Done>}
      <ErrorNotice error={holdings.error} />
      {holdings.loading && <Loading what={T.loading} />}
      {holdings.data && holdings.data.length === 0 && <Empty>{T.nothingToSend}</Empty>}
      {holdings.data && holdings.data.length > 0 && (
        <form onSubmit={submit} noValidate>
          <fieldset>
            <legend>{T.recipient}</legend>
            <Select label={T.sendTo} value={kind} onValue={setKind} options={KINDS} />
            <Field
              label={KINDS.find(([key]) => key === kind)?.[1] ?? T.recipient}
              value={recipient}
              onValue={setRecipient}
              required
              autoComplete="off"
              hint={T.recipientHint(kind)}
              inputMode={kind === '2' ? 'numeric' : undefined}
            />
          </fieldset>
          <fieldset>
            <legend>{T.what}</legend>
            {lines.map((line, index) => (
              <div class="line" key={index} role="group" aria-label={T.line(index + 1)}>
                <Select label={T.asset(index + 1)} value={line.asset} onValue={(asset) => setLine(index, { asset })} options={options} />
                <Field
                  label={T.quantity(index + 1)}
                  value={line.quantity}
                  onValue={(quantity) => setLine(index, { quantity })}
                  inputMode="numeric"
                  required
                  autoComplete="off"
                  hint={T.quantityHint}
                />
                {lines.length > 1 && (
                  <button type="button" onClick={() => setLines(lines.filter((_, i) => i !== index))}>
                    {T.remove(index + 1)}
                  </button>
                )}
              </div>
            ))}
            {lines.length < Math.min(64, options.length) && (
              <button
                type="button"
                onClick={() =>
                  setLines([
                    ...lines,
                    { asset: options.find(([name]) => !lines.some((line) => line.asset === name))?.[0] ?? '', quantity: '' },
                  ])
                }
              >
                {T.addAsset}
              </button>
            )}
          </fieldset>
          <Field label={T.memo} value={memo} onValue={setMemo} maxLength={64} hint={T.memoHint} autoComplete="off" />
          <AfterSend body={draft} holdings={holdings.data} address={session.wallet_address} />
          <ErrorNotice error={error} />
          <button type="submit" class="primary" disabled={pending}>
            {pending ? T.sending : T.send}
          </button>
        </form>
      )}
    </Page>
  )
}
