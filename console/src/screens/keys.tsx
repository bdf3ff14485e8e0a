import { useState } from 'preact/hooks'
import { call, coffer } from '../api.ts'
import { formatTime } from '../format.ts'
import { Done, Empty, ErrorNotice, Field, Loading, Page, Secret, useAction, useConfirm, useLoad } from '../ui.tsx'
import { check } from '../validate.ts'
import type { ScreenProps } from './user-app.tsx'

/** Wallet keys of the active wallet: for bots and apps, which then use the wallet without a password. */
export function Keys({ session }: ScreenProps) {
  const keys = useLoad(() => call(coffer.GET('/wallet/sessions')), [session.wallet_id])
  const [name, setName] = useState('')
  const [created, setCreated] = useState<{ name: string; token: string } | undefined>()
  const [done, setDone] = useState('')
  const { run, pending, error } = useAction()
  const confirm = useConfirm()

  const create = (event: Event) => {
    event.preventDefault()
    void run(async () => {
      setDone('')
      check(name.length <= 32, 'A key name is at most 32 characters.')
      const key = await call(coffer.POST('/wallet/sessions', { body: { name } }))
      setCreated({ name: key.name, token: key.token })
      setName('')
      await keys.reload()
    })
  }

  const revoke = async (id: number, label: string) => {
    const yes = await confirm({
      title: `Revoke ${label}?`,
      body: <p>Whatever uses this key loses access to wallet {session.wallet_address} at once. This cannot be undone.</p>,
      action: 'Revoke key',
      tone: 'danger',
    })
    if (!yes) return
    await run(async () => {
      await call(coffer.DELETE('/wallet/sessions/{sessionid}', { params: { path: { sessionid: String(id) } } }))
      setCreated(undefined)
      await keys.reload()
      setDone(`${label} revoked.`)
    })
  }

  const revokeAll = async () => {
    const yes = await confirm({
      title: 'Revoke every key of this wallet?',
      body: <p>Every bot and app using a key of wallet {session.wallet_address} loses access at once. This cannot be undone.</p>,
      action: 'Revoke all keys',
      tone: 'danger',
    })
    if (!yes) return
    await run(async () => {
      await call(coffer.DELETE('/wallet/sessions'))
      setCreated(undefined)
      await keys.reload()
      setDone('Every key of this wallet is revoked.')
    })
  }

  return (
    <Page title="Keys">
      <p>
        A key lets a bot or an app use wallet <strong>{session.wallet_address}</strong> (see its balances and history, send from it) without
        your password.
      </p>
      {done && <Done>{done}</Done>}
      {created && (
        <Secret
          label="Key"
          value={created.token}
          note={`“${created.name || 'unnamed'}” is shown only now: copy it into the program that will use it.`}
        />
      )}
      <ErrorNotice error={error ?? keys.error} />
      <h2>New key</h2>
      <form onSubmit={create} noValidate>
        <Field
          label="Key name"
          value={name}
          onValue={setName}
          maxLength={32}
          hint="what will use it, at most 32 characters"
          autoComplete="off"
        />
        <button type="submit" class="primary" disabled={pending}>
          Create key
        </button>
      </form>
      <h2>Keys of this wallet</h2>
      {keys.loading && <Loading what="keys" />}
      {keys.data && keys.data.length === 0 && <Empty>This wallet has no keys.</Empty>}
      {keys.data && keys.data.length > 0 && (
        <>
          <ul class="cards">
            {keys.data.map((key) => {
              const label = key.name ? `key “${key.name}”` : `key ${key.id}`
              return (
                <li key={key.id}>
                  <h3>{key.name || `Key ${key.id}`}</h3>
                  <p class="meta">
                    Created {formatTime(key.created_at)} · {key.last_used_at ? `last used ${formatTime(key.last_used_at)}` : 'never used'}
                  </p>
                  <button
                    type="button"
                    class="danger"
                    disabled={pending}
                    onClick={() => revoke(key.id, label)}
                    aria-label={`Revoke ${label}`}
                  >
                    Revoke
                  </button>
                </li>
              )
            })}
          </ul>
          <button type="button" class="danger" disabled={pending} onClick={revokeAll}>
            Revoke all keys
          </button>
        </>
      )}
    </Page>
  )
}
