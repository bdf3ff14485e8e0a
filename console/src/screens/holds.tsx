import type { ComponentChildren } from 'preact'
import { useEffect, useId, useMemo, useState } from 'preact/hooks'
import { call, callPage, coffer, newAttemptKey, type paths } from '../api.ts'
import { holdingChoice } from '../credit.tsx'
import { formatAssets, formatFullTime, formatQuantity, formatTime } from '../format.ts'
import { HOLD_TEXT as T, holdOutcome } from '../text.ts'
import { useWalletEvents } from '../live.ts'
import { CursorPager, MetadataList, type Cursors } from '../transactions.tsx'
import { Done, Empty, ErrorNotice, Field, FilterBar, Loading, Page, Select, useAction, useConfirm, useLoad } from '../ui.tsx'
import { check, checkAddress, checkUsername, parseId, parsePart, parseQuantity } from '../validate.ts'
import type { ScreenProps } from './user-app.tsx'

type Hold = paths['/wallet/holds/{id}']['get']['responses']['200']['content']['application/json']

const RECIPIENT_KINDS = T.recipientKinds

function party(username: string | undefined, address: string): string {
  return username ? `${username} (${address})` : address
}

/** Reserve assets for a recipient now, to capture (pay) or void (release) later. */
function PlaceHold({ session, placed }: ScreenProps & { placed: () => Promise<unknown> }) {
  const holdings = useLoad(() => call(coffer.GET('/wallet/assets')), [session.wallet_id])
  const [kind, setKind] = useState('0')
  const [recipient, setRecipient] = useState('')
  const [asset, setAsset] = useState('')
  const [quantity, setQuantity] = useState('')
  const [expires, setExpires] = useState('604800')
  const [memo, setMemo] = useState('')
  const [made, setMade] = useState<Hold | undefined>()
  const { run, pending, error } = useAction()
  const attemptKey = useMemo(newAttemptKey, [kind, recipient, asset, quantity, expires, memo, session.wallet_id, made])
  const options: [string, string][] = (holdings.data ?? []).map((holding) => [holding.asset.name, holdingChoice(holding)])
  useEffect(() => {
    if (!asset && options[0]) setAsset(options[0][0])
  }, [holdings.data])

  const submit = (event: Event) => {
    event.preventDefault()
    void run(async () => {
      const to = recipient.trim()
      check(to !== '', T.noRecipient)
      const target = kind === '0' ? checkUsername(to) : kind === '1' ? checkAddress(to) : String(parseId(to))
      check(asset !== '', T.noAsset)
      const amount = parseQuantity(quantity, T.quantityOf(asset))
      check(memo.length <= 64, T.memoTooLong)
      const hold = await call(
        coffer.POST('/wallet/holds', {
          body: {
            recipient: target,
            type: Number(kind) as 0 | 1 | 2,
            assets: { [asset]: amount },
            expires_in: Number(expires),
            ...(memo ? { memo } : {}),
          },
          params: { header: { 'idempotency-key': attemptKey } },
        }),
      )
      setMade(hold)
      setRecipient('')
      setQuantity('')
      setMemo('')
      await Promise.all([holdings.reload(), placed()])
    })
  }

  return (
    <section aria-labelledby="place-hold">
      <h2 id="place-hold">{T.place}</h2>
      {made && (
        <Done>
          {T.placed(
            made.id,
            formatAssets(made.assets),
            made.receiving_username ?? made.receiving_wallet_address,
            formatTime(made.expires_at),
          )}
        </Done>
      )}
      <ErrorNotice error={holdings.error} />
      {holdings.data && holdings.data.length === 0 && <Empty>{T.nothingToReserve}</Empty>}
      {holdings.data && holdings.data.length > 0 && (
        <form onSubmit={submit} noValidate>
          <Select label={T.holdFor} value={kind} onValue={setKind} options={RECIPIENT_KINDS} />
          <Field
            label={T.recipient(RECIPIENT_KINDS.find(([key]) => key === kind)?.[1] ?? '')}
            value={recipient}
            onValue={setRecipient}
            autoComplete="off"
            hint={T.recipientHint(kind)}
          />
          <div class="line">
            <Select label={T.asset} value={asset} onValue={setAsset} options={options} />
            <Field label={T.quantity} value={quantity} onValue={setQuantity} inputMode="numeric" autoComplete="off" hint={T.quantityHint} />
          </div>
          <Select label={T.expiresAfter} value={expires} onValue={setExpires} options={T.expiries} hint={T.expiresHint} />
          <Field label={T.memo} value={memo} onValue={setMemo} maxLength={64} autoComplete="off" hint={T.memoHint} />
          <ErrorNotice error={error} />
          <button type="submit" class="primary" disabled={pending}>
            {pending ? T.placing : T.placeButton}
          </button>
        </form>
      )}
    </section>
  )
}

/** Capture part of a pending hold: a quantity per asset, at most what is held; the rest goes back. */
function CapturePart({ hold, capture }: { hold: Hold; capture: (assets: Record<string, number>) => Promise<void> }) {
  const [quantities, setQuantities] = useState<Record<string, string>>({})
  const { run, pending, error } = useAction()
  const submit = (event: Event) => {
    event.preventDefault()
    void run(async () => {
      const assets = parsePart(hold.assets, quantities, (line) => T.atMost(formatQuantity(line.quantity), line.asset.name))
      check(Object.keys(assets).length > 0, T.nothingToCapture)
      await capture(assets)
    })
  }
  return (
    <details>
      <summary>{T.capturePart(hold.id)}</summary>
      <form onSubmit={submit} noValidate>
        {hold.assets.map((line) => (
          <Field
            key={line.asset.id}
            label={T.toCapture(line.asset.name)}
            value={quantities[line.asset.name] ?? ''}
            onValue={(value) => setQuantities({ ...quantities, [line.asset.name]: value })}
            inputMode="numeric"
            autoComplete="off"
            hint={T.toCaptureHint(formatQuantity(line.quantity))}
          />
        ))}
        <ErrorNotice error={error} />
        <button type="submit" disabled={pending}>
          {T.captureThese}
        </button>
      </form>
    </details>
  )
}

/** One hold in the list: who, what, its outcome in a badge; it opens to everything about it; its actions while pending. */
function HoldItem({
  hold,
  sent,
  paid,
  pending,
  capture,
  release,
}: {
  hold: Hold
  sent: boolean
  paid: Map<string, number> | undefined
  pending: boolean
  capture: (assets?: Record<string, number>) => Promise<void>
  release: () => Promise<void>
}) {
  const [open, setOpen] = useState(false)
  const id = useId()
  return (
    <li class={sent ? 'sent' : 'received'}>
      <p class="what">
        {sent
          ? T.heldFor(party(hold.receiving_username, hold.receiving_wallet_address))
          : T.heldForYou(party(hold.sending_username, hold.sending_wallet_address))}
      </p>
      <div class="amounts-line">
        <p class="amounts">
          {hold.assets.map((line) => (
            <span key={line.asset.id} class="amount">
              {formatQuantity(line.quantity)} {line.asset.name}
            </span>
          ))}
        </p>
        <button type="button" class="details-toggle" aria-expanded={open} aria-controls={id} onClick={() => setOpen(!open)}>
          {open ? T.hideDetails : T.details}
          <span class="visually-hidden"> {T.ofHold(hold.id)}</span>
        </button>
      </div>
      <p class="meta">
        <span class={`badge ${hold.status}`}>{holdOutcome(hold.status, hold.assets, paid, formatQuantity)}</span>
        <span> · {T.number(hold.id)}</span>
        {hold.status === 'pending' ? (
          <span> · {T.expires(formatTime(hold.expires_at))}</span>
        ) : (
          <span> · {T.settled(formatTime(hold.settled_at))}</span>
        )}
        {hold.transaction_id !== null && <span> · {T.transaction(hold.transaction_id)}</span>}
        {hold.memo && <span class="memo"> · “{hold.memo}”</span>}
      </p>
      <MetadataList metadata={hold.metadata} />
      {open && <HoldDetail hold={hold} paid={paid} id={id} />}
      {hold.status === 'pending' && (
        <div class="row-actions">
          {sent && (
            <button type="button" class="primary" disabled={pending} onClick={() => void capture()}>
              {T.captureButton(hold.id)}
            </button>
          )}
          <button type="button" disabled={pending} onClick={() => void release()}>
            {T.voidButton(hold.id)}
          </button>
          {sent && <CapturePart hold={hold} capture={capture} />}
        </div>
      )}
    </li>
  )
}

/** Everything about one hold: both sides, what it reserved, what of it was paid and what released, and when. */
function HoldDetail({ hold, paid, id }: { hold: Hold; paid: Map<string, number> | undefined; id: string }) {
  const list = (lines: { name: string; quantity: number }[]) =>
    lines
      .filter((line) => line.quantity > 0)
      .map((line) => `${formatQuantity(line.quantity)} ${line.name}`)
      .join(', ') || T.none
  const reserved = hold.assets.map((line) => ({ name: line.asset.name, quantity: line.quantity }))
  const paidLines = reserved.map((line) => ({ name: line.name, quantity: paid?.get(line.name) ?? 0 }))
  const released = reserved.map((line) => ({ name: line.name, quantity: line.quantity - (paid?.get(line.name) ?? 0) }))
  const facts: [string, ComponentChildren][] = [
    [T.fact.status, T.status[hold.status]],
    [T.fact.reserved, list(reserved)],
    ...(hold.status === 'pending'
      ? ([[T.fact.paid, T.stillReserved]] as [string, string][])
      : ([
          [T.fact.paid, list(paidLines)],
          [T.fact.released, list(released)],
        ] as [string, string][])),
    [T.fact.from, party(hold.sending_username, hold.sending_wallet_address)],
    [T.fact.to, party(hold.receiving_username, hold.receiving_wallet_address)],
    [T.fact.placed, formatFullTime(hold.created_at)],
    hold.status === 'pending' || hold.settled_at === null
      ? [T.fact.expires, formatFullTime(hold.expires_at)]
      : [T.fact.settled, formatFullTime(hold.settled_at)],
    ...(hold.transaction_id !== null ? ([[T.fact.capture, T.transaction(hold.transaction_id)]] as [string, string][]) : []),
    [T.fact.memo, hold.memo ? `“${hold.memo}”` : T.none],
  ]
  return (
    <div class="transaction-detail" id={id} role="region" aria-label={T.detailOf(hold.id)}>
      <dl class="facts">
        {facts.map(([term, value]) => (
          <div key={term}>
            <dt>{term}</dt>
            <dd>{value}</dd>
          </div>
        ))}
      </dl>
    </div>
  )
}

/** The holds of the wallet, both sides: list, filters, capture and void. */
export function Holds({ session, refresh }: ScreenProps) {
  const [status, setStatus] = useState('pending')
  const [direction, setDirection] = useState('')
  const [cursors, setCursors] = useState<Cursors>([undefined])
  const before = cursors[cursors.length - 1]
  const filters = JSON.stringify([status, direction])
  useEffect(() => setCursors([undefined]), [filters, session.wallet_id])
  const page = useLoad(async () => {
    const holds = await callPage(
      coffer.GET('/wallet/holds', {
        params: {
          query: {
            limit: 20,
            ...(before !== undefined ? { before } : {}),
            ...(status ? { status: status as Hold['status'] } : {}),
            ...(direction ? { direction: direction as 'sent' | 'received' } : {}),
          },
        },
      }),
    )
    // What each captured hold paid: its capture transaction, found by id in the wallet's history.
    const paid = new Map<number, Map<string, number>>()
    await Promise.all(
      holds.data.map(async (hold) => {
        const id = hold.transaction_id
        if (hold.status !== 'captured' || id === null || id < 2) return
        const found = await callPage(coffer.GET('/wallet/transactions', { params: { query: { before: id + 1, after: id - 1, limit: 1 } } }))
        const capture = found.data.find((transaction) => transaction.id === id)
        if (capture) paid.set(hold.id, new Map(capture.assets.map((line) => [line.asset.name, line.quantity])))
      }),
    )
    return { ...holds, paid }
  }, [filters, before, session.wallet_id])
  useWalletEvents(session.wallet_id, () => void page.reload())
  const { run, pending, error, done, setDone } = useAction()
  const confirm = useConfirm()
  // One key per hold and action while the list is unchanged: a repeated click captures once.
  const keys = useMemo(() => new Map<string, string>(), [page.data])
  const keyFor = (action: string) => keys.get(action) ?? (keys.set(action, newAttemptKey()), keys.get(action) as string)

  const capture = async (hold: Hold, assets?: Record<string, number>) => {
    const what = assets
      ? Object.entries(assets)
          .map(([name, quantity]) => `${formatQuantity(quantity)} ${name}`)
          .join(', ')
      : formatAssets(hold.assets)
    const yes = await confirm({
      title: T.captureTitle(hold.id),
      body: (
        <>
          <p>{T.captureBody(what, party(hold.receiving_username, hold.receiving_wallet_address), assets !== undefined)}</p>
          <p>{T.captureFinal}</p>
        </>
      ),
      action: T.capture,
    })
    if (!yes) return
    await run(async () => {
      setDone('')
      const transaction = await call(
        coffer.POST('/wallet/holds/{id}/capture', {
          params: {
            path: { id: String(hold.id) },
            header: { 'idempotency-key': keyFor(`capture ${hold.id} ${JSON.stringify(assets ?? {})}`) },
          },
          body: assets ? { assets } : {},
        }),
      )
      await page.reload()
      setDone(T.captured(hold.id, formatAssets(transaction.assets), transaction.id))
    })
  }

  const release = async (hold: Hold, sent: boolean) => {
    const yes = await confirm({
      title: T.voidTitle(hold.id),
      body: (
        <>
          <p>{T.voidBody(formatAssets(hold.assets), sent ? undefined : party(hold.sending_username, hold.sending_wallet_address))}</p>
          <p>{T.final}</p>
        </>
      ),
      action: T.void,
      tone: 'danger',
    })
    if (!yes) return
    await run(async () => {
      setDone('')
      await call(coffer.POST('/wallet/holds/{id}/void', { params: { path: { id: String(hold.id) } } }))
      await page.reload()
      setDone(T.voided(hold.id))
    })
  }

  return (
    <Page title={T.title}>
      <p>
        {T.intro[0]}
        <strong>{session.wallet_address}</strong>
        {T.intro[1]}
      </p>
      <PlaceHold session={session} refresh={refresh} placed={page.reload} />
      <section aria-labelledby="hold-list">
        <h2 id="hold-list">{T.list}</h2>
        <FilterBar
          label={T.filters}
          chips={[
            ...(status ? [{ label: T.statusChip(T.status[status as Hold['status']]), clear: () => setStatus('') }] : []),
            ...(direction ? [{ label: direction === 'sent' ? T.placedByThis : T.forThis, clear: () => setDirection('') }] : []),
          ]}
        >
          <Select label={T.statusLabel} value={status} onValue={setStatus} options={T.statuses} />
          <Select label={T.side} value={direction} onValue={setDirection} options={T.sides} />
        </FilterBar>
        {done && <Done>{done}</Done>}
        <ErrorNotice error={error} />
        <ErrorNotice error={page.error} />
        {page.loading && <Loading what={T.loading} />}
        {page.data && page.data.data.length === 0 && <Empty>{status === 'pending' && !direction ? T.noPending : T.noneMatch}</Empty>}
        {page.data && page.data.data.length > 0 && (
          <ul class="transactions">
            {page.data.data.map((hold) => (
              <HoldItem
                key={hold.id}
                hold={hold}
                sent={hold.sending_wallet_id === session.wallet_id}
                paid={page.data?.paid.get(hold.id)}
                pending={pending}
                capture={(assets) => capture(hold, assets)}
                release={() => release(hold, hold.sending_wallet_id === session.wallet_id)}
              />
            ))}
          </ul>
        )}
        <CursorPager cursors={cursors} setCursors={setCursors} next={page.data?.next} />
      </section>
    </Page>
  )
}
