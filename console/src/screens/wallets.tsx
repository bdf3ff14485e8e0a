import { useState } from 'preact/hooks'
import { call, coffer } from '../api.ts'
import { Done, Empty, ErrorNotice, Field, Loading, Page, useAction, useConfirm, useLoad } from '../ui.tsx'
import { checkAddress } from '../validate.ts'
import type { ScreenProps } from './user-app.tsx'

/** The wallets a person owns or may use: create, switch, make primary, delete. */
export function Wallets({ session, refresh }: ScreenProps) {
  const wallets = useLoad(async () => {
    const [owned, assigned] = await Promise.all([call(coffer.GET('/user/wallets')), call(coffer.GET('/user/assigned_wallets'))])
    return { owned, assigned }
  }, [session.wallet_id, session.primary_wallet_id])
  const [address, setAddress] = useState('')
  const { pending, error, done, report } = useAction()
  const confirm = useConfirm()

  const act = (work: () => Promise<string>) => report(work, async () => (await refresh(), await wallets.reload()))

  const create = (event: Event) => {
    event.preventDefault()
    void act(async () => {
      const wanted = address.trim()
      if (wanted) checkAddress(wanted)
      const wallet = await call(coffer.POST('/user/wallets', { body: wanted ? { address: wanted } : {} }))
      setAddress('')
      return `Wallet ${wallet.address} created.`
    })
  }

  const use = (id: number, address: string) =>
    act(async () => {
      await call(coffer.PUT('/user/session/wallet', { body: { wallet_id: id } }))
      return `You now use wallet ${address}.`
    })

  const makePrimary = (id: number, address: string) =>
    act(async () => {
      await call(coffer.PUT('/user/wallet', { body: { wallet_id: id } }))
      return `${address} is now your primary wallet: what is sent to your username arrives there.`
    })

  const remove = async (id: number, address: string) => {
    const primary = wallets.data?.owned.find((wallet) => wallet.id === session.primary_wallet_id)?.address ?? 'your primary wallet'
    const yes = await confirm({
      title: `Delete wallet ${address}?`,
      body: (
        <>
          <p>
            Everything it holds moves to your primary wallet <strong>{primary}</strong> as one recorded transaction. Its keys, webhook and
            shared users are removed, and its address can never be used again.
          </p>
          <p>This cannot be undone.</p>
        </>
      ),
      action: 'Delete wallet',
      tone: 'danger',
    })
    if (!yes) return
    await act(async () => {
      // Deleting acts on the active wallet: make it active first.
      if (session.wallet_id !== id) await call(coffer.PUT('/user/session/wallet', { body: { wallet_id: id } }))
      await call(coffer.DELETE('/wallet'))
      return `Wallet ${address} deleted; what it held is now in ${primary}.`
    })
  }

  return (
    <Page title="Wallets">
      {done && <Done>{done}</Done>}
      <ErrorNotice error={error ?? wallets.error} />
      {wallets.loading && <Loading what="wallets" />}
      {wallets.data && (
        <>
          <h2>Your wallets</h2>
          <ul class="cards">
            {wallets.data.owned.map((wallet) => {
              const active = wallet.id === session.wallet_id
              const primary = wallet.id === session.primary_wallet_id
              return (
                <li key={wallet.id}>
                  <h3>{wallet.address}</h3>
                  <p class="meta">
                    Wallet id {wallet.id}
                    {primary && ' · primary: what is sent to your username arrives here'}
                    {active && ' · in use now'}
                  </p>
                  <div class="actions">
                    {!active && (
                      <button
                        type="button"
                        disabled={pending}
                        onClick={() => use(wallet.id, wallet.address)}
                        aria-label={`Use wallet ${wallet.address}`}
                      >
                        Use this wallet
                      </button>
                    )}
                    {!primary && (
                      <button
                        type="button"
                        disabled={pending}
                        onClick={() => makePrimary(wallet.id, wallet.address)}
                        aria-label={`Make ${wallet.address} primary`}
                      >
                        Make primary
                      </button>
                    )}
                    {!primary && (
                      <button
                        type="button"
                        class="danger"
                        disabled={pending}
                        onClick={() => remove(wallet.id, wallet.address)}
                        aria-label={`Delete wallet ${wallet.address}`}
                      >
                        Delete
                      </button>
                    )}
                  </div>
                </li>
              )
            })}
          </ul>
          <h2>Shared with you</h2>
          {wallets.data.assigned.length === 0 ? (
            <Empty>Nobody has shared a wallet with you.</Empty>
          ) : (
            <ul class="cards">
              {wallets.data.assigned.map((wallet) => (
                <li key={wallet.id}>
                  <h3>{wallet.address}</h3>
                  <p class="meta">
                    Wallet id {wallet.id}
                    {wallet.id === session.wallet_id && ' · in use now'}
                  </p>
                  {wallet.id !== session.wallet_id && (
                    <button
                      type="button"
                      disabled={pending}
                      onClick={() => use(wallet.id, wallet.address)}
                      aria-label={`Use wallet ${wallet.address}`}
                    >
                      Use this wallet
                    </button>
                  )}
                </li>
              ))}
            </ul>
          )}
        </>
      )}
      <h2>New wallet</h2>
      <form onSubmit={create} noValidate>
        <Field
          label="Address (optional)"
          value={address}
          onValue={setAddress}
          hint="3 to 24 lowercase letters; left empty, one is chosen for you"
          autoComplete="off"
        />
        <button type="submit" class="primary" disabled={pending}>
          Create wallet
        </button>
      </form>
    </Page>
  )
}
