import { useId, useMemo, useState } from 'preact/hooks'
import { call, CofferError, coffer, newAttemptKey, type ErrorCode, type Transaction } from '../api.ts'
import { parseCsv } from '../csv.ts'
import { formatDetail, formatQuantity } from '../format.ts'
import { BATCH_TEXT as T, ERROR_TEXT, InputError } from '../text.ts'
import { Done, ErrorNotice, Page, Select, useAction, useConfirm } from '../ui.tsx'
import { ASSET_NAME, check, checkAddress, checkUsername, parseId, parseQuantity } from '../validate.ts'
import type { ScreenProps } from './user-app.tsx'

/** The most transfers in one batch (the service's limit). */
const MAX_TRANSFERS = 100

interface Planned {
  line: number
  recipient: string
  asset: string
  quantity: number
  memo: string
}

type Outcome = { line: number; transaction: Transaction } | { line: number; code: ErrorCode; detail?: string }

/**
 * The transfers of a pasted or uploaded CSV: `recipient,asset,quantity[,memo]` per line, an
 * optional header line first. Each line is checked as the Send form would check it.
 */
function planTransfers(text: string, kind: string): Planned[] {
  let rows: string[][]
  try {
    rows = parseCsv(text)
  } catch {
    throw new InputError(T.unclosedQuote)
  }
  if (rows[0]?.[0]?.trim().toLowerCase() === 'recipient') rows = rows.slice(1)
  check(rows.length >= 1, T.noLines)
  check(rows.length <= MAX_TRANSFERS, T.tooMany(MAX_TRANSFERS, rows.length))
  return rows.map((cells, index) => {
    const line = index + 1
    const [recipient = '', asset = '', quantity = '', memo = '', ...rest] = cells.map((cell) => cell.trim())
    check(rest.length === 0, T.tooManyValues(line))
    check(recipient !== '', T.noRecipient(line))
    const to =
      kind === '0'
        ? withLine(line, () => checkUsername(recipient))
        : kind === '1'
          ? withLine(line, () => checkAddress(recipient))
          : String(withLine(line, () => parseId(recipient)))
    check(ASSET_NAME.test(asset), T.badAsset(line, asset))
    check(memo.length <= 64, T.memoTooLong(line))
    return { line, recipient: to, asset, quantity: parseQuantity(quantity, T.quantityOf(line)), memo }
  })
}

function withLine<T>(line: number, work: () => T): T {
  try {
    return work()
  } catch (error) {
    throw new InputError(T.onLine(line, (error as Error).message))
  }
}

/** "12 gold, 3 silver" in all. */
function totals(planned: Planned[]): string {
  const sums = new Map<string, number>()
  for (const transfer of planned) sums.set(transfer.asset, (sums.get(transfer.asset) ?? 0) + transfer.quantity)
  return [...sums].map(([asset, quantity]) => `${formatQuantity(quantity)} ${asset}`).join(', ')
}

/** Many transfers at once from a list: all or nothing, or each on its own. */
export function Batch({ session }: ScreenProps) {
  const [text, setText] = useState('')
  const [kind, setKind] = useState('0')
  const [atomic, setAtomic] = useState(true)
  const [outcomes, setOutcomes] = useState<Outcome[] | undefined>()
  const { run, pending, error, setError } = useAction()
  const confirm = useConfirm()
  const attemptKey = useMemo(newAttemptKey, [text, kind, atomic, session.wallet_id, outcomes])
  const listId = useId()

  const upload = async (event: Event) => {
    const file = (event.currentTarget as HTMLInputElement).files?.[0]
    if (!file) return
    setError(undefined)
    setText(await file.text())
  }

  const submit = (event: Event) => {
    event.preventDefault()
    void run(async () => {
      // What an earlier batch did is no longer the latest news once another is tried.
      setOutcomes(undefined)
      const planned = planTransfers(text, kind)
      const yes = await confirm({
        title: T.confirmTitle(planned.length),
        body: (
          <>
            <p>
              {T.from[0]}
              <strong>{session.wallet_address}</strong>
              {T.from[1](totals(planned), new Set(planned.map((transfer) => transfer.recipient)).size)}
            </p>
            <p>{atomic ? T.allOrNothing : T.eachOnItsOwn}</p>
            <p>{T.final}</p>
          </>
        ),
        action: T.send,
      })
      if (!yes) return
      const body = {
        atomic,
        transfers: planned.map((transfer) => ({
          recipient: transfer.recipient,
          type: Number(kind) as 0 | 1 | 2,
          assets: { [transfer.asset]: transfer.quantity },
          ...(transfer.memo ? { memo: transfer.memo } : {}),
        })),
      }
      try {
        const answer = await call(
          coffer.POST('/wallet/transactions/batch', { body, params: { header: { 'idempotency-key': attemptKey } } }),
        )
        if ('transactions' in answer) setOutcomes(answer.transactions.map((transaction, i) => ({ line: planned[i].line, transaction })))
        else
          setOutcomes(
            answer.results.map((result, i) =>
              'transaction' in result
                ? { line: planned[i].line, transaction: result.transaction }
                : { line: planned[i].line, code: result.error.code, detail: result.error.detail },
            ),
          )
        if (atomic || ('results' in answer && answer.results.every((result) => 'transaction' in result))) setText('')
      } catch (caught) {
        // An all-or-nothing batch names the refused transfer: `transfers[i]: …`.
        const index = caught instanceof CofferError ? /^transfers\[(\d+)\]/.exec(caught.detail ?? '')?.[1] : undefined
        if (index !== undefined && caught instanceof CofferError)
          throw new InputError(T.nothingSent(planned[Number(index)]?.line ?? Number(index) + 1, ERROR_TEXT[caught.code]))
        throw caught
      }
    })
  }

  const sent = outcomes?.filter((outcome) => 'transaction' in outcome).length ?? 0
  return (
    <Page title={T.title}>
      <p>
        {T.intro[0]}
        <strong>{session.wallet_address}</strong>
        {T.intro[1](MAX_TRANSFERS)}
        <code>{T.format}</code>
        {T.intro[2]}
      </p>
      <form onSubmit={submit} noValidate>
        <Select label={T.recipients} value={kind} onValue={setKind} options={T.recipientKinds} />
        <div class="field">
          <label for={listId}>{T.transfers}</label>
          <textarea
            id={listId}
            rows={8}
            value={text}
            onInput={(event) => setText(event.currentTarget.value)}
            aria-describedby={`${listId}-hint`}
            spellcheck={false}
            placeholder={T.example}
          />
          <small id={`${listId}-hint`} class="hint">
            {T.transfersHint}
          </small>
        </div>
        <div class="field">
          <label for={`${listId}-file`}>{T.upload}</label>
          <input id={`${listId}-file`} type="file" accept=".csv,text/csv,text/plain" onChange={(event) => void upload(event)} />
        </div>
        <div class="field checkbox">
          <input id={`${listId}-atomic`} type="checkbox" checked={atomic} onChange={(event) => setAtomic(event.currentTarget.checked)} />
          <label for={`${listId}-atomic`}>{T.atomic}</label>
        </div>
        <ErrorNotice error={error} />
        <button type="submit" class="primary" disabled={pending}>
          {pending ? T.sending : T.send}
        </button>
      </form>
      {outcomes && (
        <Done>
          <p>{T.sentCount(sent, outcomes.length)}</p>
          <ul class="outcomes">
            {outcomes.map((outcome) =>
              'transaction' in outcome ? (
                <li key={outcome.line}>
                  {T.sentLine(
                    outcome.line,
                    `${formatQuantity(outcome.transaction.assets[0]?.quantity ?? 0)} ${outcome.transaction.assets[0]?.asset.name ?? ''}`,
                    outcome.transaction.receiving_username ?? outcome.transaction.receiving_wallet_address,
                    outcome.transaction.id,
                  )}
                </li>
              ) : (
                <li key={outcome.line} class="refused">
                  {T.refusedLine(outcome.line, ERROR_TEXT[outcome.code])}
                  {outcome.detail ? ` (${formatDetail(outcome.detail)})` : ''}
                </li>
              ),
            )}
          </ul>
        </Done>
      )}
    </Page>
  )
}
