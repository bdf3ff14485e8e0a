import { useState } from 'preact/hooks'
import { call, coffer } from '../api.ts'
import { WALLETS_TEXT as T } from '../text.ts'
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
      return T.created(wallet.address)
    })
  }

  const use = (id: number, address: string) =>
    act(async () => {
      await call(coffer.PUT('/user/session/wallet', { body: { wallet_id: id } }))
      return T.used(address)
    })

  const makePrimary = (id: number, address: string) =>
    act(async () => {
      await call(coffer.PUT('/user/wallet', { body: { wallet_id: id } }))
      return T.madePrimary(address)
    })

  const remove = async (id: number, address: string) => {
    const primary = wallets.data?.owned.find((wallet) => wallet.id === session.primary_wallet_id)?.address ?? T.yourPrimary
    const yes = await confirm({
      title: T.deleteTitle(address),
      body: (
        <>
          <p>
            {T.deleteBody[0]}
            <strong>{primary}</strong>
            {T.deleteBody[1]}
          </p>
          <p>{T.final}</p>
        </>
      ),
      action: T.deleteWallet,
      tone: 'danger',
    })
    if (!yes) return
    await act(async () => {
      // Deleting acts on the active wallet: make it active first.
      if (session.wallet_id !== id) await call(coffer.PUT('/user/session/wallet', { body: { wallet_id: id } }))
      await call(coffer.DELETE('/wallet'))
      return T.deleted(address, primary)
    })
  }

  return (
    <Page title={T.title}>
      {done && <Done>{done}</Done>}
      <ErrorNotice error={error ?? wallets.error} />
      {wallets.loading && <Loading what={T.loading} />}
      {wallets.data && (
        <>
          <h2>{T.owned}</h2>
          <ul class="cards">
            {wallets.data.owned.map((wallet) => {
              const active = wallet.id === session.wallet_id
              const primary = wallet.id === session.primary_wallet_id
              return (
                <li key={wallet.id}>
                  <h3>{wallet.address}</h3>
                  <p class="meta">
                    {T.id(wallet.id)}
                    {primary && T.primaryNote}
                    {active && T.inUse}
                  </p>
                  <div class="actions">
                    {!active && (
                      <button
                        type="button"
                        disabled={pending}
                        onClick={() => use(wallet.id, wallet.address)}
                        aria-label={T.useLabel(wallet.address)}
                      >
                        {T.use}
                      </button>
                    )}
                    {!primary && (
                      <button
                        type="button"
                        disabled={pending}
                        onClick={() => makePrimary(wallet.id, wallet.address)}
                        aria-label={T.makePrimaryLabel(wallet.address)}
                      >
                        {T.makePrimary}
                      </button>
                    )}
                    {!primary && (
                      <button
                        type="button"
                        class="danger"
                        disabled={pending}
                        onClick={() => remove(wallet.id, wallet.address)}
                        aria-label={T.deleteLabel(wallet.address)}
                      >
                        {T.delete}
                      </button>
                    )}
                  </div>
                </li>
              )
            })}
          </ul>
          <h2>{T.assigned}</h2>
          {wallets.data.assigned.length === 0 ? (
            <Empty>{T.noneAssigned}</Empty>
          ) : (
            <ul class="cards">
              {wallets.data.assigned.map((wallet) => (
                <li key={wallet.id}>
                  <h3>{wallet.address}</h3>
                  <p class="meta">
                    {T.id(wallet.id)}
                    {wallet.id === session.wallet_id && T.inUse}
                  </p>
                  {wallet.id !== session.wallet_id && (
                    <button
                      type="button"
                      disabled={pending}
                      onClick={() => use(wallet.id, wallet.address)}
                      aria-label={T.useLabel(wallet.address)}
                    >
                      {T.use}
                    </button>
                  )}
                </li>
              ))}
            </ul>
          )}
        </>
      )}
      <h2>{T.newWallet}</h2>
      <form onSubmit={create} noValidate>
        <Field label={T.address} value={address} onValue={setAddress} hint={T.addressHint} autoComplete="off" />
        <button type="submit" class="primary" disabled={pending}>
          {T.create}
        </button>
      </form>
    </Page>
  )
}
