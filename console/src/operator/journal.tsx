import { useEffect, useState } from 'preact/hooks'
import { call, callPage, coffer, type Transaction } from '../api.ts'
import { dayBound } from '../format.ts'
import { ReverseForm } from '../reverse.tsx'
import { KIND_OPTIONS } from '../text.ts'
import { TransactionPage, type Cursors } from '../transactions.tsx'
import { Field, Page, Select, useLoad } from '../ui.tsx'

/** The whole journal, newest first, with filters and pages; or one wallet's history (`wallet`). */
export function JournalList({ wallet }: { wallet?: number }) {
  const [asset, setAsset] = useState('')
  const [since, setSince] = useState('')
  const [until, setUntil] = useState('')
  const [kind, setKind] = useState('')
  const [metadataKey, setMetadataKey] = useState('')
  const [metadataValue, setMetadataValue] = useState('')
  const [cursors, setCursors] = useState<Cursors>([undefined])
  const before = cursors[cursors.length - 1]
  const filters = JSON.stringify([asset.trim(), since, until, kind, metadataKey.trim(), metadataValue, wallet])
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
              ...(kind ? { kind: kind as Transaction['kind'] } : {}),
              ...(metadataKey.trim() ? { [`metadata[${metadataKey.trim()}]`]: metadataValue } : {}),
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
        <Select label="Kind" value={kind} onValue={setKind} options={KIND_OPTIONS} />
        <Field label="Metadata key" value={metadataKey} onValue={setMetadataKey} hint="e.g. order_id; empty for any" autoComplete="off" maxLength={40} />
        <Field label="Metadata value" value={metadataValue} onValue={setMetadataValue} hint="the exact value of that key" autoComplete="off" maxLength={500} />
      </form>
      <TransactionPage
        actions={(transaction) =>
          transaction.kind === 'reversal' ? null : (
            <ReverseForm
              transaction={transaction}
              verb="Reverse"
              to={transaction.sending_username ?? transaction.sending_wallet_address}
              send={(body, key) => call(coffer.POST('/transactions/{id}/reversal', { params: { path: { id: String(transaction.id) }, header: { 'idempotency-key': key } }, body }))}
              done={page.reload}
            />
          )
        }
        page={page} cursors={cursors} setCursors={setCursors} walletId={wallet} empty={`No transactions${asset || since || until || kind || metadataKey ? ' match these filters' : ' yet'}.`} />
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
