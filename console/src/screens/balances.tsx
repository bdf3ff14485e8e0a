import { call, coffer } from '../api.ts'
import { formatQuantity, formatValue } from '../format.ts'
import { useWalletEvents } from '../live.ts'
import { Empty, ErrorNotice, Loading, Page, useLoad } from '../ui.tsx'
import type { ScreenProps } from './user-app.tsx'

/** The active wallet's holdings. */
export function Balances({ session }: ScreenProps) {
  const { data: holdings, loading, error, reload } = useLoad(() => call(coffer.GET('/wallet/assets')), [session.wallet_id])
  // What arrives or leaves shows at once.
  useWalletEvents(session.wallet_id, () => void reload())
  return (
    <Page title="Balances">
      <p>
        What wallet <strong>{session.wallet_address}</strong> holds.
      </p>
      <ErrorNotice error={error} />
      {loading && <Loading what="balances" />}
      {holdings && holdings.length === 0 && (
        <Empty>
          This wallet holds nothing yet. Someone can send to your username <strong>{session.username}</strong>
          {session.wallet_id !== session.primary_wallet_id ? ' (it arrives in your primary wallet)' : ''} or to the address <strong>{session.wallet_address}</strong>.
        </Empty>
      )}
      {holdings && holdings.length > 0 && (
        <table class="holdings">
          <caption class="visually-hidden">Holdings of {session.wallet_address}</caption>
          <thead>
            <tr>
              <th scope="col">Asset</th>
              <th scope="col" class="number">
                Quantity
              </th>
              <th scope="col" class="number">
                Value each
              </th>
            </tr>
          </thead>
          <tbody>
            {holdings.map((holding) => (
              <tr key={holding.asset.id}>
                <th scope="row">{holding.asset.name}</th>
                <td class="number">{formatQuantity(holding.quantity)}</td>
                <td class="number">{formatValue(holding.asset.value)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <p>
        <a href="#/send" class="button-link">
          Send
        </a>{' '}
        <a href="#/history" class="button-link">
          History
        </a>
      </p>
    </Page>
  )
}
