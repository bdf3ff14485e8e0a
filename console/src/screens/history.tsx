import { useEffect, useState } from 'preact/hooks'
import { call, callPage, coffer, type Transaction, type WalletEvent } from '../api.ts'
import { dayBound, formatAssets } from '../format.ts'
import { useWalletEvents } from '../live.ts'
import { ReverseForm } from '../reverse.tsx'
import { KIND_OPTIONS } from '../text.ts'
import { TransactionPage, type Cursors } from '../transactions.tsx'
import { Field, Page, Select, useLoad } from '../ui.tsx'
import type { ScreenProps } from './user-app.tsx'

/** The history's filters as query parameters (`metadata[KEY]` among them). */
type HistoryFilters = Record<string, string>

/** The statement of what the filters choose (`format=csv`): the browser downloads it with the session's cookie. */
function statementLink(filters: HistoryFilters): string {
  return `/wallet/transactions?${new URLSearchParams({ format: 'csv', ...filters }).toString()}`
}

/** The active wallet's transactions: filters, pages, and live updates from the event stream. */
export function History({ session }: ScreenProps) {
  const [direction, setDirection] = useState('')
  const [asset, setAsset] = useState('')
  const [since, setSince] = useState('')
  const [until, setUntil] = useState('')
  const [kind, setKind] = useState('')
  const [metadataKey, setMetadataKey] = useState('')
  const [metadataValue, setMetadataValue] = useState('')
  const [limit, setLimit] = useState('20')
  // Cursors of the pages seen so far: the first page has none.
  const [cursors, setCursors] = useState<Cursors>([undefined])
  const [news, setNews] = useState('')
  const before = cursors[cursors.length - 1]
  const filters = JSON.stringify([direction, asset.trim(), since, until, kind, metadataKey.trim(), metadataValue, limit])
  // The filters as query parameters, for a page and for the statement alike.
  const chosen: HistoryFilters = {
    ...(direction ? { direction: direction as 'sent' | 'received' } : {}),
    ...(asset.trim() ? { asset: asset.trim() } : {}),
    ...(dayBound(since, false) ? { since: dayBound(since, false) } : {}),
    ...(dayBound(until, true) ? { until: dayBound(until, true) } : {}),
    ...(kind ? { kind: kind as Transaction['kind'] } : {}),
    ...(metadataKey.trim() ? { [`metadata[${metadataKey.trim()}]`]: metadataValue } : {}),
  }

  const page = useLoad(
    () =>
      callPage(
        coffer.GET('/wallet/transactions', {
          params: { query: { limit: Number(limit), ...(before !== undefined ? { before } : {}), ...chosen } },
        }),
      ),
    [filters, before, session.wallet_id],
  )
  useEffect(() => setCursors([undefined]), [filters, session.wallet_id])

  // Live: each event of the wallet is announced and refreshes the first page.
  const firstPage = cursors.length === 1
  const live = useWalletEvents(session.wallet_id, (event: WalletEvent) => {
    const transaction = event.data
    setNews(
      event.type === 'transaction.received'
        ? `New: received ${formatAssets(transaction.assets)} from ${transaction.sending_username ?? transaction.sending_wallet_address}.`
        : `New: sent ${formatAssets(transaction.assets)} to ${transaction.receiving_username ?? transaction.receiving_wallet_address}.`,
    )
    if (firstPage) void page.reload()
  })

  return (
    <Page title="History">
      <p>
        Transactions of wallet <strong>{session.wallet_address}</strong>, newest first.{' '}
        <span class="live">{live === 'live' ? 'Live: new transactions appear by themselves.' : live === 'reconnecting' ? 'Reconnecting to live updates…' : 'Connecting to live updates…'}</span>
      </p>
      <p role="status" class="news">
        {news}
      </p>
      <form class="filters" onSubmit={(event) => event.preventDefault()} aria-label="Filters">
        <Select
          label="Direction"
          value={direction}
          onValue={setDirection}
          options={[
            ['', 'Sent and received'],
            ['sent', 'Sent'],
            ['received', 'Received'],
          ]}
        />
        <Field label="Asset" value={asset} onValue={setAsset} hint="an asset name, or empty for all" autoComplete="off" />
        <Field label="From day" type="date" value={since} onValue={setSince} />
        <Field label="To day" type="date" value={until} onValue={setUntil} />
        <Select label="Kind" value={kind} onValue={setKind} options={KIND_OPTIONS} />
        <Field label="Metadata key" value={metadataKey} onValue={setMetadataKey} hint="e.g. order_id; empty for any" autoComplete="off" maxLength={40} />
        <Field label="Metadata value" value={metadataValue} onValue={setMetadataValue} hint="the exact value of that key" autoComplete="off" maxLength={500} />
        <Select
          label="Per page"
          value={limit}
          onValue={setLimit}
          options={[
            ['10', '10'],
            ['20', '20'],
            ['50', '50'],
            ['100', '100'],
          ]}
        />
      </form>
      <p>
        <a class="button-link" href={statementLink(chosen)} download>
          Download statement (CSV)
        </a>{' '}
        <small class="hint">every transaction these filters choose, one row per asset, for a spreadsheet</small>
      </p>
      <TransactionPage
        actions={(transaction) =>
          transaction.receiving_wallet_id === session.wallet_id && (transaction.kind === 'transfer' || transaction.kind === 'capture') ? (
            <ReverseForm
              transaction={transaction}
              verb="Refund"
              to={transaction.sending_username ?? transaction.sending_wallet_address}
              send={(body, key) => call(coffer.POST('/wallet/transactions/{id}/refund', { params: { path: { id: String(transaction.id) }, header: { 'idempotency-key': key } }, body }))}
              done={page.reload}
            />
          ) : null
        }
        page={page}
        cursors={cursors}
        setCursors={setCursors}
        walletId={session.wallet_id}
        empty={firstPage && Object.keys(chosen).length === 0 ? 'No transactions yet.' : 'No transactions match these filters.'}
      />
    </Page>
  )
}
