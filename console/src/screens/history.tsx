import { useEffect, useState } from 'preact/hooks'
import { callPage, coffer, type WalletEvent } from '../api.ts'
import { dayBound, formatAssets } from '../format.ts'
import { useWalletEvents } from '../live.ts'
import { TransactionPage, type Cursors } from '../transactions.tsx'
import { Field, Page, Select, useLoad } from '../ui.tsx'
import type { ScreenProps } from './user-app.tsx'

/** The active wallet's transactions: filters, pages, and live updates from the event stream. */
export function History({ session }: ScreenProps) {
  const [direction, setDirection] = useState('')
  const [asset, setAsset] = useState('')
  const [since, setSince] = useState('')
  const [until, setUntil] = useState('')
  const [limit, setLimit] = useState('20')
  // Cursors of the pages seen so far: the first page has none.
  const [cursors, setCursors] = useState<Cursors>([undefined])
  const [news, setNews] = useState('')
  const before = cursors[cursors.length - 1]
  const filters = JSON.stringify([direction, asset.trim(), since, until, limit])

  const page = useLoad(
    () =>
      callPage(
        coffer.GET('/wallet/transactions', {
          params: {
            query: {
              limit: Number(limit),
              ...(before !== undefined ? { before } : {}),
              ...(direction ? { direction: direction as 'sent' | 'received' } : {}),
              ...(asset.trim() ? { asset: asset.trim() } : {}),
              ...(dayBound(since, false) ? { since: dayBound(since, false) } : {}),
              ...(dayBound(until, true) ? { until: dayBound(until, true) } : {}),
            },
          },
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
      <TransactionPage
        page={page}
        cursors={cursors}
        setCursors={setCursors}
        walletId={session.wallet_id}
        empty={firstPage && filters === JSON.stringify(['', '', '', '', limit]) ? 'No transactions yet.' : 'No transactions match these filters.'}
      />
    </Page>
  )
}
