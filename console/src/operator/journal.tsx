import { useEffect, useState } from 'preact/hooks'
import { callPage, coffer } from '../api.ts'
import { dayBound } from '../format.ts'
import { TransactionPage, type Cursors } from '../transactions.tsx'
import { Field, Page, useLoad } from '../ui.tsx'

/** The whole journal, newest first, with filters and pages; or one wallet's history (`wallet`). */
export function JournalList({ wallet }: { wallet?: number }) {
  const [asset, setAsset] = useState('')
  const [since, setSince] = useState('')
  const [until, setUntil] = useState('')
  const [cursors, setCursors] = useState<Cursors>([undefined])
  const before = cursors[cursors.length - 1]
  const filters = JSON.stringify([asset.trim(), since, until, wallet])
  useEffect(() => setCursors([undefined]), [filters])
  const page = useLoad(
    () =>
      callPage(
        coffer.GET('/admin/transactions', {
          params: {
            query: {
              limit: 20,
              ...(before !== undefined ? { before } : {}),
              ...(wallet !== undefined ? { wallet } : {}),
              ...(asset.trim() ? { asset: asset.trim() } : {}),
              ...(dayBound(since, false) ? { since: dayBound(since, false) } : {}),
              ...(dayBound(until, true) ? { until: dayBound(until, true) } : {}),
            },
          },
        }),
      ),
    [filters, before],
    ['A003'],
  )
  return (
    <>
      <form class="filters" onSubmit={(event) => event.preventDefault()} aria-label="Journal filters">
        <Field label="Asset" value={asset} onValue={setAsset} hint="an asset name, or empty for all" autoComplete="off" />
        <Field label="From day" type="date" value={since} onValue={setSince} />
        <Field label="To day" type="date" value={until} onValue={setUntil} />
      </form>
      <TransactionPage page={page} cursors={cursors} setCursors={setCursors} walletId={wallet} empty={`No transactions${asset || since || until ? ' match these filters' : ' yet'}.`} />
    </>
  )
}

export function Journal() {
  return (
    <Page title="Journal">
      <p>Every transaction of every wallet, newest first.</p>
      <JournalList />
    </Page>
  )
}
