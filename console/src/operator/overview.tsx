import { call, coffer } from '../api.ts'
import { formatQuantity, formatValue } from '../format.ts'
import { Empty, ErrorNotice, Loading, Page, useLoad } from '../ui.tsx'

/** Counts, and per asset what circulates and how many wallets hold it. */
export function Overview() {
  const overview = useLoad(() => call(coffer.GET('/admin/overview')), [], ['A003'])
  const data = overview.data
  return (
    <Page title="Overview">
      <ErrorNotice error={overview.error} />
      {overview.loading && <Loading what="the overview" />}
      {data && (
        <>
          <dl class="counts">
            <div>
              <dt>Users</dt>
              <dd>{formatQuantity(data.users)}</dd>
            </div>
            <div>
              <dt>Wallets</dt>
              <dd>{formatQuantity(data.wallets)}</dd>
            </div>
            <div>
              <dt>Transactions</dt>
              <dd>{formatQuantity(data.transactions)}</dd>
            </div>
          </dl>
          <h2>Assets</h2>
          {data.assets.length === 0 ? (
            <Empty>
              No assets yet. <a href="#/operator/assets">Create one</a>.
            </Empty>
          ) : (
            <table>
              <caption class="visually-hidden">What circulates of each asset</caption>
              <thead>
                <tr>
                  <th scope="col">Asset</th>
                  <th scope="col" class="number">
                    Circulating
                  </th>
                  <th scope="col" class="number">
                    Holders
                  </th>
                  <th scope="col" class="number">
                    Value each
                  </th>
                </tr>
              </thead>
              <tbody>
                {data.assets.map((entry) => (
                  <tr key={entry.asset.id}>
                    <th scope="row">{entry.asset.name}</th>
                    <td class="number">{formatQuantity(entry.circulating)}</td>
                    <td class="number">{formatQuantity(entry.holders)}</td>
                    <td class="number">{formatValue(entry.asset.value)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
        </>
      )}
    </Page>
  )
}
