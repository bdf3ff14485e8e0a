import { useEffect, useState } from 'preact/hooks'
import { call, callPage, coffer } from '../api.ts'
import { owed } from '../credit.tsx'
import { CREDIT_TEXT, EXPIRY_TEXT, HOLDING_TEXT } from '../text.ts'
import { formatExpiryDay, formatQuantity, formatTime } from '../format.ts'
import { Done, Empty, ErrorNotice, Field, Loading, Page, Select, useAction, useConfirm, useLoad } from '../ui.tsx'
import { check, parseQuantity } from '../validate.ts'
import { CreditLimits } from './credit.tsx'
import { JournalList } from './journal.tsx'

/** Wallets found by id, address or their owner's username. */
export function WalletSearch() {
  const [q, setQ] = useState(() => new URLSearchParams(location.hash.split('?')[1] ?? '').get('q') ?? '')
  const [offsets, setOffsets] = useState<number[]>([0])
  const offset = offsets[offsets.length - 1]
  useEffect(() => setOffsets([0]), [q])
  const page = useLoad(
    () =>
      callPage(coffer.GET('/admin/wallets', { params: { query: { limit: 20, offset, ...(q.trim() ? { q: q.trim() } : {}) } } }), 'offset'),
    [q, offset],
    ['A003'],
  )
  return (
    <Page title="Wallets">
      <form role="search" onSubmit={(event) => event.preventDefault()}>
        <Field
          label="Find a wallet"
          type="search"
          value={q}
          onValue={setQ}
          hint="a wallet id, or the start of an address or of the owner’s username"
          autoComplete="off"
        />
      </form>
      <ErrorNotice error={page.error} />
      {page.loading && <Loading what="wallets" />}
      {page.data && page.data.data.length === 0 && <Empty>{q ? 'No wallet matches.' : 'No wallets yet.'}</Empty>}
      {page.data && page.data.data.length > 0 && (
        <ul class="cards">
          {page.data.data.map((wallet) => (
            <li key={wallet.id}>
              <h2 class="card-title">
                <a href={`#/operator/wallets/${wallet.id}`}>{wallet.address}</a>
              </h2>
              <p class="meta">
                Wallet id {wallet.id} · owner {wallet.username}
                {wallet.deleted && ' · deleted'}
              </p>
            </li>
          ))}
        </ul>
      )}
      <nav class="pager" aria-label="Pages">
        <button type="button" disabled={offsets.length === 1} onClick={() => setOffsets(offsets.slice(0, -1))}>
          Previous
        </button>
        <button type="button" disabled={page.data?.next === undefined} onClick={() => setOffsets([...offsets, page.data?.next ?? 0])}>
          Next
        </button>
      </nav>
    </Page>
  )
}

/** One wallet: owner, users, holdings and history; issue to it and burn from it. */
export function WalletDetail({ id }: { id: string }) {
  const detail = useLoad(() => call(coffer.GET('/admin/wallets/{id}', { params: { path: { id } } })), [id], ['A003'])
  const assets = useLoad(() => call(coffer.GET('/assets')), [], ['A003'])
  const [issueAsset, setIssueAsset] = useState('')
  const [issueQuantity, setIssueQuantity] = useState('')
  const [issueExpiry, setIssueExpiry] = useState('')
  const [burnAsset, setBurnAsset] = useState('')
  const [burnQuantity, setBurnQuantity] = useState('')
  const [done, setDone] = useState('')
  const [history, setHistory] = useState(0)
  const { run, pending, error } = useAction(['A003'])
  const confirm = useConfirm()
  const wallet = detail.data?.wallet
  // A burn takes only what the wallet owns: an asset it owes, or holds none of, is not offered.
  const burnable = (detail.data?.holdings ?? []).filter((holding) => holding.quantity > 0)

  const issue = (event: Event) => {
    event.preventDefault()
    void run(async () => {
      setDone('')
      const asset = assets.data?.find((candidate) => String(candidate.id) === (issueAsset || String(assets.data?.[0]?.id)))
      check(asset !== undefined, 'Choose the asset to issue.')
      const quantity = parseQuantity(issueQuantity)
      // `datetime-local` is the operator's local time; the service takes an instant.
      const expiresAt = issueExpiry ? new Date(issueExpiry).toISOString() : undefined
      const body = { id: asset!.id, quantity, ...(expiresAt ? { expires_at: expiresAt } : {}) }
      await call(coffer.POST('/wallets/{walletid}/assets', { params: { path: { walletid: id } }, body }))
      setIssueQuantity('')
      setIssueExpiry('')
      await detail.reload()
      setHistory(history + 1)
      setDone(
        expiresAt
          ? EXPIRY_TEXT.issued(formatQuantity(quantity), asset!.name, wallet?.address ?? '', formatExpiryDay(expiresAt))
          : `Issued ${formatQuantity(quantity)} ${asset!.name} to ${wallet?.address}.`,
      )
    })
  }

  const burn = async (event: Event) => {
    event.preventDefault()
    const holding = burnable.find((candidate) => String(candidate.asset.id) === (burnAsset || String(burnable[0]?.asset.id)))
    let quantity: number | undefined
    let valid = false
    await run(async () => {
      check(holding !== undefined, 'Choose the asset to burn.')
      quantity = burnQuantity.trim() ? parseQuantity(burnQuantity) : undefined
      valid = true
    })
    if (!valid || !holding) return
    const amount = `${formatQuantity(quantity ?? holding.quantity)} ${holding.asset.name}`
    const yes = await confirm({
      title: `Burn ${amount}?`,
      body: (
        <p>
          {amount} leave wallet {wallet?.address} for good (back to mint). This is recorded in the journal and cannot be undone.
        </p>
      ),
      action: 'Burn',
      tone: 'danger',
    })
    if (!yes) return
    await run(async () => {
      setDone('')
      await call(
        coffer.DELETE('/wallets/{walletid}/assets/{assetid}', {
          params: {
            path: { walletid: id, assetid: String(holding.asset.id) },
            query: quantity !== undefined ? { quantity: String(quantity) } : {},
          },
        }),
      )
      setBurnQuantity('')
      await detail.reload()
      setHistory(history + 1)
      setDone(`Burned ${amount} from ${wallet?.address}.`)
    })
  }

  return (
    <Page title={wallet ? `Wallet ${wallet.address}` : 'Wallet'}>
      <p>
        <a href="#/operator/wallets">All wallets</a>
      </p>
      <ErrorNotice error={detail.error} />
      {detail.loading && <Loading what="the wallet" />}
      {detail.data && wallet && (
        <>
          <dl class="facts">
            <div>
              <dt>Wallet id</dt>
              <dd>{wallet.id}</dd>
            </div>
            <div>
              <dt>Owner</dt>
              <dd>
                {detail.data.owner.username}
                {wallet.primary && ' (their primary wallet)'}
              </dd>
            </div>
            <div>
              <dt>Shared with</dt>
              <dd>{detail.data.users.length ? detail.data.users.map((user) => user.username).join(', ') : 'nobody'}</dd>
            </div>
            <div>
              <dt>Created</dt>
              <dd>{formatTime(wallet.created_at)}</dd>
            </div>
            {wallet.deleted && (
              <div>
                <dt>State</dt>
                <dd>Deleted</dd>
              </div>
            )}
          </dl>
          <h2>Holdings</h2>
          {detail.data.holdings.length === 0 ? (
            <Empty>This wallet holds nothing.</Empty>
          ) : (
            <ul class="holdings-list">
              {detail.data.holdings.map((holding) => (
                <li key={holding.asset.id}>
                  {holding.quantity < 0 ? (
                    <strong class="owes">{CREDIT_TEXT.owes(owed(holding) ?? '', holding.asset.name)}</strong>
                  ) : (
                    <>
                      <strong>{formatQuantity(holding.quantity)}</strong> {holding.asset.name}
                    </>
                  )}
                  {holding.credit_limit > 0 && <span class="hint"> · {CREDIT_TEXT.canOwe(formatQuantity(holding.credit_limit))}</span>}
                </li>
              ))}
            </ul>
          )}
          {done && <Done>{done}</Done>}
          <ErrorNotice error={error} />
          {!wallet.deleted && (
            <div class="columns">
              <form onSubmit={issue} noValidate>
                <h2>Issue</h2>
                {assets.data && assets.data.length === 0 ? (
                  <Empty>
                    No assets to issue: <a href="#/operator/assets">create one</a>.
                  </Empty>
                ) : (
                  <>
                    <Select
                      label="Asset to issue"
                      value={issueAsset}
                      onValue={setIssueAsset}
                      options={(assets.data ?? []).map((asset) => [String(asset.id), asset.name])}
                    />
                    <Field
                      label="Quantity to issue"
                      value={issueQuantity}
                      onValue={setIssueQuantity}
                      inputMode="numeric"
                      autoComplete="off"
                      hint="a whole number, created from mint"
                    />
                    <Field
                      label={EXPIRY_TEXT.field}
                      type="datetime-local"
                      value={issueExpiry}
                      onValue={setIssueExpiry}
                      hint={EXPIRY_TEXT.hint}
                    />
                    <button type="submit" class="primary" disabled={pending}>
                      Issue
                    </button>
                  </>
                )}
              </form>
              {burnable.length > 0 && (
                <form onSubmit={burn} noValidate>
                  <h2>Burn</h2>
                  <Select
                    label="Asset to burn"
                    value={burnAsset}
                    onValue={setBurnAsset}
                    options={burnable.map((holding) => [
                      String(holding.asset.id),
                      HOLDING_TEXT.choice(holding.asset.name, formatQuantity(holding.quantity - holding.held)),
                    ])}
                  />
                  <Field
                    label="Quantity to burn"
                    value={burnQuantity}
                    onValue={setBurnQuantity}
                    inputMode="numeric"
                    autoComplete="off"
                    hint="empty: all of it"
                  />
                  <button type="submit" class="danger" disabled={pending}>
                    Burn
                  </button>
                </form>
              )}
            </div>
          )}
          {!wallet.deleted && (
            <CreditLimits
              walletId={wallet.id}
              address={wallet.address}
              holdings={detail.data.holdings}
              assets={assets.data ?? []}
              changed={async () => {
                setDone('')
                await detail.reload()
              }}
            />
          )}
          <h2>History</h2>
          <JournalList key={history} wallet={wallet.id} />
        </>
      )}
    </Page>
  )
}
