import { useEffect, useState } from 'preact/hooks'
import { call, callPage, coffer, type WalletEvent } from '../api.ts'
import { TransactionFilterFields, useTransactionFilters, type TransactionQuery } from '../filters.tsx'
import { formatAssets } from '../format.ts'
import { useWalletEvents } from '../live.ts'
import { ReverseForm } from '../reverse.tsx'
import { allMovedBack, TransactionPage, withMovedBack, type Cursors } from '../transactions.tsx'
import { HISTORY_TEXT as T, LIVE_TEXT, REVERSE_TEXT } from '../text.ts'
import { FilterBar, Page, Select, useLoad } from '../ui.tsx'
import type { ScreenProps } from './user-app.tsx'

/** The statement of what the filters choose (`format=csv`): the browser downloads it with the session's cookie. */
function statementLink(filters: TransactionQuery): string {
  return `/wallet/transactions?${new URLSearchParams({ format: 'csv', ...filters }).toString()}`
}

/** The active wallet's transactions: filters, pages, and live updates from the event stream. */
export function History({ session }: ScreenProps) {
  const [direction, setDirection] = useState('')
  const shared = useTransactionFilters()
  const [limit, setLimit] = useState('20')
  // Cursors of the pages seen so far: the first page has none.
  const [cursors, setCursors] = useState<Cursors>([undefined])
  const [news, setNews] = useState('')
  const before = cursors[cursors.length - 1]
  const filters = JSON.stringify([direction, shared.key, limit])
  // The filters as query parameters, for a page and for the statement alike.
  const chosen: TransactionQuery = { ...(direction ? { direction } : {}), ...shared.query }

  const page = useLoad(
    async () =>
      withMovedBack(
        await callPage(
          coffer.GET('/wallet/transactions', {
            params: { query: { limit: Number(limit), ...(before !== undefined ? { before } : {}), ...chosen } },
          }),
        ),
        (after) => callPage(coffer.GET('/wallet/transactions', { params: { query: { kind: 'reversal', after, limit: 100 } } })),
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
        ? T.newReceived(formatAssets(transaction.assets), transaction.sending_username ?? transaction.sending_wallet_address)
        : T.newSent(formatAssets(transaction.assets), transaction.receiving_username ?? transaction.receiving_wallet_address),
    )
    if (firstPage) void page.reload()
  })

  return (
    <Page title={T.title}>
      <p>
        {T.intro}
        <strong>{session.wallet_address}</strong>
        {T.newestFirst} <span class="live">{LIVE_TEXT[live]}</span>
      </p>
      <p role="status" class="news">
        {news}
      </p>
      <FilterBar
        label={T.filters}
        chips={[
          ...(direction ? [{ label: direction === 'sent' ? T.sentOnly : T.receivedOnly, clear: () => setDirection('') }] : []),
          ...shared.chips,
        ]}
      >
        <Select label={T.direction} value={direction} onValue={setDirection} options={T.directions} />
        <TransactionFilterFields fields={shared.fields} />
        <Select
          label={T.perPage}
          value={limit}
          onValue={setLimit}
          options={[
            ['10', '10'],
            ['20', '20'],
            ['50', '50'],
            ['100', '100'],
          ]}
        />
      </FilterBar>
      <p>
        <a class="button-link" href={statementLink(chosen)} download>
          {T.statement}
        </a>{' '}
        <small class="hint">{T.statementHint}</small>
      </p>
      <TransactionPage
        actions={(transaction, announce) =>
          transaction.receiving_wallet_id === session.wallet_id &&
          (transaction.kind === 'transfer' || transaction.kind === 'capture') &&
          !(page.data && allMovedBack(transaction, page.data.moved)) ? (
            <ReverseForm
              transaction={transaction}
              verb={REVERSE_TEXT.refund}
              to={transaction.sending_username ?? transaction.sending_wallet_address}
              send={(body, key) =>
                call(
                  coffer.POST('/wallet/transactions/{id}/refund', {
                    params: { path: { id: String(transaction.id) }, header: { 'idempotency-key': key } },
                    body,
                  }),
                )
              }
              announce={announce}
              done={page.reload}
            />
          ) : null
        }
        page={page}
        cursors={cursors}
        setCursors={setCursors}
        walletId={session.wallet_id}
        proofs
        empty={firstPage && Object.keys(chosen).length === 0 ? T.noneYet : T.noneMatch}
      />
    </Page>
  )
}
