import { useEffect, useMemo, useState } from 'preact/hooks'
import { call, coffer, newAttemptKey, type Transaction } from '../api.ts'
import { formatAssets, formatQuantity } from '../format.ts'
import { HOLDING_TEXT } from '../text.ts'
import { Done, Empty, ErrorNotice, Field, Loading, Page, Select, useAction, useLoad } from '../ui.tsx'
import { check, checkAddress, checkUsername, parseId, parseQuantity } from '../validate.ts'
import type { ScreenProps } from './user-app.tsx'

const KINDS: [string, string][] = [
  ['0', 'Username'],
  ['1', 'Wallet address'],
  ['2', 'Wallet id'],
]

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

  const submit = (event: Event) => {
    event.preventDefault()
    void run(async () => {
      const to = recipient.trim()
      check(to !== '', 'Enter who receives the payment.')
      const target = kind === '0' ? checkUsername(to) : kind === '1' ? checkAddress(to) : String(parseId(to))
      const assets: Record<string, number> = {}
      for (const [index, line] of lines.entries()) {
        check(line.asset !== '', `Choose the asset of line ${index + 1}.`)
        check(!(line.asset in assets), `${line.asset} is on two lines: put its whole quantity on one.`)
        assets[line.asset] = parseQuantity(line.quantity, `The quantity of ${line.asset}`)
      }
      check(memo.length <= 64, 'A memo is at most 64 characters.')
      const transaction = await call(
        coffer.POST('/wallet/transactions', {
          body: { recipient: target, type: Number(kind) as 0 | 1 | 2, assets, ...(memo ? { memo } : {}) },
          params: { header: { 'idempotency-key': attemptKey } },
        }),
      )
      setSent(transaction)
      setRecipient('')
      setMemo('')
      setLines([{ asset: holdings.data?.[0]?.asset.name ?? '', quantity: '' }])
      await holdings.reload()
    })
  }

  const options: [string, string][] = (holdings.data ?? []).map((holding) => [
    holding.asset.name,
    HOLDING_TEXT.choice(holding.asset.name, formatQuantity(holding.quantity - holding.held)),
  ])
  return (
    <Page title="Send">
      <p>
        From wallet <strong>{session.wallet_address}</strong>.
      </p>
      {sent && (
        <Done>
          Sent {formatAssets(sent.assets)} to {sent.receiving_username ?? sent.receiving_wallet_address} (transaction {sent.id}).
        </Done>
      )}
      <ErrorNotice error={holdings.error} />
      {holdings.loading && <Loading what="balances" />}
      {holdings.data && holdings.data.length === 0 && <Empty>This wallet holds nothing to send yet.</Empty>}
      {holdings.data && holdings.data.length > 0 && (
        <form onSubmit={submit} noValidate>
          <fieldset>
            <legend>Recipient</legend>
            <Select label="Send to a" value={kind} onValue={setKind} options={KINDS} />
            <Field
              label={KINDS.find(([key]) => key === kind)?.[1] ?? 'Recipient'}
              value={recipient}
              onValue={setRecipient}
              required
              autoComplete="off"
              hint={kind === '0' ? 'arrives in their primary wallet' : kind === '1' ? '3 to 24 lowercase letters' : 'a number'}
              inputMode={kind === '2' ? 'numeric' : undefined}
            />
          </fieldset>
          <fieldset>
            <legend>What to send</legend>
            {lines.map((line, index) => (
              <div class="line" key={index} role="group" aria-label={`Line ${index + 1}`}>
                <Select label={`Asset ${index + 1}`} value={line.asset} onValue={(asset) => setLine(index, { asset })} options={options} />
                <Field
                  label={`Quantity ${index + 1}`}
                  value={line.quantity}
                  onValue={(quantity) => setLine(index, { quantity })}
                  inputMode="numeric"
                  required
                  autoComplete="off"
                  hint="a whole number"
                />
                {lines.length > 1 && (
                  <button type="button" onClick={() => setLines(lines.filter((_, i) => i !== index))}>
                    Remove asset {index + 1}
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
                Add another asset
              </button>
            )}
          </fieldset>
          <Field
            label="Memo (optional)"
            value={memo}
            onValue={setMemo}
            maxLength={64}
            hint="at most 64 characters, seen by both sides"
            autoComplete="off"
          />
          <ErrorNotice error={error} />
          <button type="submit" class="primary" disabled={pending}>
            {pending ? 'Sending…' : 'Send'}
          </button>
        </form>
      )}
    </Page>
  )
}
