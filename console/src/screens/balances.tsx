import { useState } from 'preact/hooks'
import { call, coffer, type Holding } from '../api.ts'
import { formatExpiryDay, formatQuantity, formatTime, formatValue } from '../format.ts'
import { useWalletEvents } from '../live.ts'
import { HeldQuantity, owed, spendable } from '../credit.tsx'
import { BALANCES_TEXT as T, CREDIT_TEXT, EXPIRY_TEXT, HOLDING_TEXT } from '../text.ts'
import { Empty, ErrorNotice, Field, Loading, Page, useAction, useLoad } from '../ui.tsx'
import { check } from '../validate.ts'
import '../control.css'
import type { ScreenProps } from './user-app.tsx'

/**
 * Holdings as a table: asset, what is owned (or owed, below zero, with the credit limit under the
 * asset's name), what of it holds reserve and what is left to spend, value each.
 */
function HoldingsTable({ holdings, caption, withHeld }: { holdings: Holding[]; caption: string; withHeld: boolean }) {
  return (
    <table class="holdings">
      <caption class="visually-hidden">{caption}</caption>
      <thead>
        <tr>
          <th scope="col">{T.asset}</th>
          <th scope="col" class="number">
            {HOLDING_TEXT.owned}
          </th>
          {withHeld && (
            <th scope="col" class="number">
              {HOLDING_TEXT.reserved}
            </th>
          )}
          {withHeld && (
            <th scope="col" class="number">
              {HOLDING_TEXT.available}
            </th>
          )}
          <th scope="col" class="number">
            {T.valueEach}
          </th>
        </tr>
      </thead>
      <tbody>
        {holdings.map((holding) => (
          <tr key={holding.asset.id}>
            <th scope="row">
              {holding.asset.name}
              {holding.credit_limit > 0 && (
                <small class="hint credit-line">{CREDIT_TEXT.canOwe(formatQuantity(holding.credit_limit))}</small>
              )}
              {(holding.expiring ?? []).map((lot) => (
                <small key={lot.expires_at} class="hint expiring">
                  {EXPIRY_TEXT.expire(formatQuantity(lot.quantity), formatExpiryDay(lot.expires_at))}
                </small>
              ))}
            </th>
            <td class="number">
              <HeldQuantity holding={holding} />
            </td>
            {withHeld && <td class="number">{formatQuantity(holding.held)}</td>}
            {withHeld && <td class="number">{formatQuantity(spendable(holding))}</td>}
            <td class="number">{formatValue(holding.asset.value)}</td>
          </tr>
        ))}
      </tbody>
    </table>
  )
}

/** What the wallet owes on credit, in a sentence per asset: "This wallet owes 30 gold; it can owe up to 100." */
function Owes({ holdings }: { holdings: Holding[] }) {
  const owing = holdings.filter((holding) => holding.quantity < 0)
  if (owing.length === 0) return null
  return (
    <ul class="owing">
      {owing.map((holding) => (
        <li key={holding.asset.id}>
          {CREDIT_TEXT.owesSentence(owed(holding) ?? '', holding.asset.name, holding.credit_limit, -holding.quantity)}
        </li>
      ))}
    </ul>
  )
}

/** Balances at a date: what the wallet held at a moment of the reader's choosing. */
function BalancesAt({ session }: ScreenProps) {
  const [moment, setMoment] = useState('')
  const [past, setPast] = useState<{ at: string; holdings: Holding[] } | undefined>()
  const { run, pending, error } = useAction()
  const show = (event: Event) => {
    event.preventDefault()
    void run(async () => {
      // `datetime-local` is the reader's local time; the service takes an instant.
      const at = new Date(moment)
      check(moment !== '' && !Number.isNaN(at.getTime()), T.noMoment)
      const holdings = await call(coffer.GET('/wallet/assets', { params: { query: { as_of: at.toISOString() } } }))
      setPast({ at: at.toISOString(), holdings })
    })
  }
  return (
    <section aria-labelledby="balances-at">
      <h2 id="balances-at">{T.at}</h2>
      <form class="inline" onSubmit={show} noValidate>
        <Field label={T.moment} type="datetime-local" value={moment} onValue={setMoment} hint={T.momentHint} />
        <button type="submit" disabled={pending}>
          {T.show}
        </button>
      </form>
      <ErrorNotice error={error} />
      {past && (
        <div role="status">
          <p>
            {T.held[0]}
            <strong>{session.wallet_address}</strong>
            {T.held[1]}
            <time dateTime={past.at}>{formatTime(past.at)}</time>
            {T.held[2]}
          </p>
          {past.holdings.length === 0 ? (
            <Empty>{T.nothingThen}</Empty>
          ) : (
            <HoldingsTable holdings={past.holdings} caption={T.captionAt(session.wallet_address, formatTime(past.at))} withHeld={false} />
          )}
        </div>
      )}
    </section>
  )
}

/** The active wallet's holdings. */
export function Balances({ session, refresh }: ScreenProps) {
  const { data: holdings, loading, error, reload } = useLoad(() => call(coffer.GET('/wallet/assets')), [session.wallet_id])
  // What arrives or leaves shows at once.
  useWalletEvents(session.wallet_id, () => void reload())
  return (
    <Page title={T.title}>
      <p>
        {T.holds[0]}
        <strong>{session.wallet_address}</strong>
        {T.holds[1]}
      </p>
      <ErrorNotice error={error} />
      {loading && <Loading what={T.loading} />}
      {holdings && holdings.length === 0 && (
        <Empty>
          {T.emptyStart}
          <strong>{session.username}</strong>
          {session.wallet_id !== session.primary_wallet_id ? T.emptyPrimary : ''}
          {T.emptyAddress}
          <strong>{session.wallet_address}</strong>.
        </Empty>
      )}
      {holdings && holdings.length > 0 && (
        <HoldingsTable
          holdings={holdings}
          caption={T.caption(session.wallet_address)}
          withHeld={holdings.some((holding) => holding.held > 0 || holding.credit_limit > 0)}
        />
      )}
      {holdings && <Owes holdings={holdings} />}
      <p>
        <a href="#/send" class="button-link">
          {T.send}
        </a>{' '}
        <a href="#/history" class="button-link">
          {T.history}
        </a>
      </p>
      <BalancesAt session={session} refresh={refresh} />
    </Page>
  )
}
