import { call, coffer } from '../api.ts'
import { formatQuantity, formatValue } from '../format.ts'
import { OVERVIEW_TEXT as T } from '../text.ts'
import { Empty, ErrorNotice, Loading, Page, useLoad } from '../ui.tsx'

/** Counts, and per asset what circulates and how many wallets hold it. */
export function Overview() {
  const overview = useLoad(() => call(coffer.GET('/admin/overview')), [], ['A003'])
  const data = overview.data
  return (
    <Page title={T.title}>
      <ErrorNotice error={overview.error} />
      {overview.loading && <Loading what={T.loading} />}
      {data && (
        <>
          <dl class="counts">
            <div>
              <dt>{T.users}</dt>
              <dd>{formatQuantity(data.users)}</dd>
            </div>
            <div>
              <dt>{T.wallets}</dt>
              <dd>{formatQuantity(data.wallets)}</dd>
            </div>
            <div>
              <dt>{T.transactions}</dt>
              <dd>{formatQuantity(data.transactions)}</dd>
            </div>
          </dl>
          <h2>{T.assets}</h2>
          {data.assets.length === 0 ? (
            <Empty>
              {T.noAssets}
              <a href="#/operator/assets">{T.createOne}</a>.
            </Empty>
          ) : (
            <table>
              <caption class="visually-hidden">{T.caption}</caption>
              <thead>
                <tr>
                  <th scope="col">{T.asset}</th>
                  <th scope="col" class="number">
                    {T.circulating}
                  </th>
                  <th scope="col" class="number">
                    {T.holders}
                  </th>
                  <th scope="col" class="number">
                    {T.valueEach}
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
