import { useEffect, useMemo, useState } from 'preact/hooks'
import { call, callPage, coffer, newAttemptKey, type paths } from '../api.ts'
import { formatAssets, formatQuantity, formatTime } from '../format.ts'
import { HOLDING_TEXT, holdOutcome } from '../text.ts'
import { useWalletEvents } from '../live.ts'
import { CursorPager, MetadataList, type Cursors } from '../transactions.tsx'
import { Done, Empty, ErrorNotice, Field, FilterBar, Loading, Page, Select, useAction, useConfirm, useLoad } from '../ui.tsx'
import { check, checkAddress, checkUsername, parseId, parsePart, parseQuantity } from '../validate.ts'
import type { ScreenProps } from './user-app.tsx'

type Hold = paths['/wallet/holds/{id}']['get']['responses']['200']['content']['application/json']

const RECIPIENT_KINDS: [string, string][] = [
  ['0', 'Username'],
  ['1', 'Wallet address'],
  ['2', 'Wallet id'],
]

const EXPIRIES: [string, string][] = [
  ['3600', '1 hour'],
  ['86400', '1 day'],
  ['604800', '7 days'],
  ['2592000', '30 days'],
]

const HOLD_STATUS_TEXT: Record<Hold['status'], string> = {
  pending: 'Pending',
  captured: 'Captured',
  voided: 'Voided',
  expired: 'Expired',
}

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
  const options: [string, string][] = (holdings.data ?? []).map((holding) => [
    holding.asset.name,
    HOLDING_TEXT.choice(holding.asset.name, formatQuantity(holding.quantity - holding.held)),
  ])
  useEffect(() => {
    if (!asset && options[0]) setAsset(options[0][0])
  }, [holdings.data])

  const submit = (event: Event) => {
    event.preventDefault()
    void run(async () => {
      const to = recipient.trim()
      check(to !== '', 'Enter who the hold is for.')
      const target = kind === '0' ? checkUsername(to) : kind === '1' ? checkAddress(to) : String(parseId(to))
      check(asset !== '', 'Choose the asset to hold.')
      const amount = parseQuantity(quantity, `The quantity of ${asset}`)
      check(memo.length <= 64, 'A memo is at most 64 characters.')
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
      <h2 id="place-hold">Place a hold</h2>
      {made && (
        <Done>
          Hold {made.id} placed: {formatAssets(made.assets)} reserved for {made.receiving_username ?? made.receiving_wallet_address} until{' '}
          {formatTime(made.expires_at)}.
        </Done>
      )}
      <ErrorNotice error={holdings.error} />
      {holdings.data && holdings.data.length === 0 && <Empty>This wallet holds nothing to reserve yet.</Empty>}
      {holdings.data && holdings.data.length > 0 && (
        <form onSubmit={submit} noValidate>
          <Select label="Hold for a" value={kind} onValue={setKind} options={RECIPIENT_KINDS} />
          <Field
            label={`Recipient ${RECIPIENT_KINDS.find(([key]) => key === kind)?.[1].toLowerCase() ?? ''}`}
            value={recipient}
            onValue={setRecipient}
            autoComplete="off"
            hint={kind === '0' ? 'the hold is for their primary wallet' : kind === '1' ? '3 to 24 lowercase letters' : 'a number'}
          />
          <div class="line">
            <Select label="Asset to hold" value={asset} onValue={setAsset} options={options} />
            <Field
              label="Quantity to hold"
              value={quantity}
              onValue={setQuantity}
              inputMode="numeric"
              autoComplete="off"
              hint="a whole number"
            />
          </div>
          <Select label="Expires after" value={expires} onValue={setExpires} options={EXPIRIES} hint="then it is released by itself" />
          <Field
            label="Memo (optional)"
            value={memo}
            onValue={setMemo}
            maxLength={64}
            autoComplete="off"
            hint="at most 64 characters, seen by both sides"
          />
          <ErrorNotice error={error} />
          <button type="submit" class="primary" disabled={pending}>
            {pending ? 'Placing…' : 'Place hold'}
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
      const assets = parsePart(hold.assets, quantities, (line) => `At most ${formatQuantity(line.quantity)} ${line.asset.name} is held.`)
      check(Object.keys(assets).length > 0, 'Enter how much to capture.')
      await capture(assets)
    })
  }
  return (
    <details>
      <summary>Capture part of hold {hold.id}</summary>
      <form onSubmit={submit} noValidate>
        {hold.assets.map((line) => (
          <Field
            key={line.asset.id}
            label={`${line.asset.name} to capture`}
            value={quantities[line.asset.name] ?? ''}
            onValue={(value) => setQuantities({ ...quantities, [line.asset.name]: value })}
            inputMode="numeric"
            autoComplete="off"
            hint={`at most ${formatQuantity(line.quantity)}; the rest goes back`}
          />
        ))}
        <ErrorNotice error={error} />
        <button type="submit" disabled={pending}>
          Capture these
        </button>
      </form>
    </details>
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
      title: `Capture hold ${hold.id}?`,
      body: (
        <>
          <p>
            {what} go to {party(hold.receiving_username, hold.receiving_wallet_address)} as a recorded transaction
            {assets ? '; the rest of the hold goes back to this wallet' : ''}.
          </p>
          <p>This cannot be undone; only the recipient can refund it.</p>
        </>
      ),
      action: 'Capture',
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
      setDone(`Hold ${hold.id} captured: ${formatAssets(transaction.assets)} paid (transaction ${transaction.id}).`)
    })
  }

  const release = async (hold: Hold, sent: boolean) => {
    const yes = await confirm({
      title: `Void hold ${hold.id}?`,
      body: (
        <>
          <p>
            {formatAssets(hold.assets)}{' '}
            {sent ? 'are released back to this wallet' : `go back to ${party(hold.sending_username, hold.sending_wallet_address)}`}, and the
            hold can no longer be captured.
          </p>
          <p>This cannot be undone.</p>
        </>
      ),
      action: 'Void',
      tone: 'danger',
    })
    if (!yes) return
    await run(async () => {
      setDone('')
      await call(coffer.POST('/wallet/holds/{id}/void', { params: { path: { id: String(hold.id) } } }))
      await page.reload()
      setDone(`Hold ${hold.id} voided: nothing was paid.`)
    })
  }

  return (
    <Page title="Holds">
      <p>
        A hold reserves assets of wallet <strong>{session.wallet_address}</strong> for a recipient now: you capture it later (all or part of
        it is paid) or void it (nothing is paid). Either side may void it; it is released by itself when it expires.
      </p>
      <PlaceHold session={session} refresh={refresh} placed={page.reload} />
      <section aria-labelledby="hold-list">
        <h2 id="hold-list">Holds of this wallet</h2>
        <FilterBar
          label="Hold filters"
          chips={[
            ...(status ? [{ label: `Status: ${HOLD_STATUS_TEXT[status as Hold['status']]}`, clear: () => setStatus('') }] : []),
            ...(direction
              ? [{ label: direction === 'sent' ? 'Placed by this wallet' : 'For this wallet', clear: () => setDirection('') }]
              : []),
          ]}
        >
          <Select
            label="Status"
            value={status}
            onValue={setStatus}
            options={[
              ['pending', 'Pending'],
              ['', 'Every status'],
              ['captured', 'Captured'],
              ['voided', 'Voided'],
              ['expired', 'Expired'],
            ]}
          />
          <Select
            label="Side"
            value={direction}
            onValue={setDirection}
            options={[
              ['', 'Placed and received'],
              ['sent', 'Placed by this wallet'],
              ['received', 'For this wallet'],
            ]}
          />
        </FilterBar>
        {done && <Done>{done}</Done>}
        <ErrorNotice error={error} />
        <ErrorNotice error={page.error} />
        {page.loading && <Loading what="holds" />}
        {page.data && page.data.data.length === 0 && (
          <Empty>{status === 'pending' && !direction ? 'No pending holds.' : 'No holds match these filters.'}</Empty>
        )}
        {page.data && page.data.data.length > 0 && (
          <ul class="transactions">
            {page.data.data.map((hold) => {
              const sent = hold.sending_wallet_id === session.wallet_id
              return (
                <li key={hold.id} class={sent ? 'sent' : 'received'}>
                  <p class="what">
                    {sent
                      ? `Held for ${party(hold.receiving_username, hold.receiving_wallet_address)}`
                      : `Held for you by ${party(hold.sending_username, hold.sending_wallet_address)}`}
                  </p>
                  <p class="amounts">
                    {hold.assets.map((line) => (
                      <span key={line.asset.id} class="amount">
                        {formatQuantity(line.quantity)} {line.asset.name}
                      </span>
                    ))}
                  </p>
                  <p class="meta">
                    <span class={`badge ${hold.status}`}>
                      {holdOutcome(hold.status, hold.assets, page.data?.paid.get(hold.id), formatQuantity)}
                    </span>
                    <span> · hold {hold.id}</span>
                    {hold.status === 'pending' ? (
                      <span> · expires {formatTime(hold.expires_at)}</span>
                    ) : (
                      <span> · settled {formatTime(hold.settled_at)}</span>
                    )}
                    {hold.transaction_id !== null && <span> · transaction {hold.transaction_id}</span>}
                    {hold.memo && <span class="memo"> · “{hold.memo}”</span>}
                  </p>
                  <MetadataList metadata={hold.metadata} />
                  {hold.status === 'pending' && (
                    <div class="row-actions">
                      {sent && (
                        <button type="button" class="primary" disabled={pending} onClick={() => void capture(hold)}>
                          Capture hold {hold.id}
                        </button>
                      )}
                      <button type="button" disabled={pending} onClick={() => void release(hold, sent)}>
                        Void hold {hold.id}
                      </button>
                      {sent && <CapturePart hold={hold} capture={(assets) => capture(hold, assets)} />}
                    </div>
                  )}
                </li>
              )
            })}
          </ul>
        )}
        <CursorPager cursors={cursors} setCursors={setCursors} next={page.data?.next} />
      </section>
    </Page>
  )
}
