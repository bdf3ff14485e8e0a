import { useEffect, useState } from 'preact/hooks'
import { call, callPage, coffer } from '../api.ts'
import { TransactionFilterFields, useTransactionFilters } from '../filters.tsx'
import { ReverseForm } from '../reverse.tsx'
import { allMovedBack, TransactionPage, withMovedBack, type Cursors } from '../transactions.tsx'
import { OPERATOR_JOURNAL_TEXT as T, REVERSE_TEXT } from '../text.ts'
import { FilterBar, Page, useLoad } from '../ui.tsx'
import { LatestCheckpoint } from './checkpoint.tsx'

/** The whole journal, newest first, with filters and pages; or one wallet's history (`wallet`). */
export function JournalList({ wallet }: { wallet?: number }) {
  const shared = useTransactionFilters()
  const [cursors, setCursors] = useState<Cursors>([undefined])
  const before = cursors[cursors.length - 1]
  const filters = JSON.stringify([shared.key, wallet])
  useEffect(() => setCursors([undefined]), [filters])
  const page = useLoad(
    async () =>
      withMovedBack(
        await callPage(
          coffer.GET('/admin/transactions', {
            params: {
              query: {
                limit: 20,
                ...(before !== undefined ? { before } : {}),
                ...(wallet !== undefined ? { wallet } : {}),
                ...shared.query,
              },
            },
          }),
        ),
        (after) => callPage(coffer.GET('/admin/transactions', { params: { query: { kind: 'reversal', after, limit: 100 } } })),
      ),
    [filters, before],
    ['A003'],
  )
  return (
    <>
      <FilterBar label={T.filters} chips={shared.chips}>
        <TransactionFilterFields fields={shared.fields} />
      </FilterBar>
      <TransactionPage
        actions={(transaction, announce) =>
          transaction.kind === 'reversal' || (page.data && allMovedBack(transaction, page.data.moved)) ? null : (
            <ReverseForm
              transaction={transaction}
              verb={REVERSE_TEXT.correct}
              to={transaction.sending_username ?? transaction.sending_wallet_address}
              send={(body, key) =>
                call(
                  coffer.POST('/transactions/{id}/reversal', {
                    params: { path: { id: String(transaction.id) }, header: { 'idempotency-key': key } },
                    body,
                  }),
                )
              }
              announce={announce}
              done={page.reload}
            />
          )
        }
        page={page}
        cursors={cursors}
        setCursors={setCursors}
        walletId={wallet}
        empty={shared.typed ? T.noneMatch : T.none}
      />
    </>
  )
}

export function Journal() {
  return (
    <Page title={T.title}>
      <p>{T.intro}</p>
      <LatestCheckpoint />
      <JournalList />
    </Page>
  )
}
