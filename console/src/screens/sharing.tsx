import { useState } from 'preact/hooks'
import { call, coffer } from '../api.ts'
import { Done, Empty, ErrorNotice, Field, Loading, Page, Select, useAction, useConfirm, useLoad } from '../ui.tsx'
import { check, checkUsername } from '../validate.ts'
import type { ScreenProps } from './user-app.tsx'

/** Who may use the active wallet: share it, take access away, hand it over to another owner. */
export function Sharing({ session, refresh }: ScreenProps) {
  const owner = session.wallet_user_id === session.user_id
  const users = useLoad(() => call(coffer.GET('/wallet/users')), [session.wallet_id])
  const [username, setUsername] = useState('')
  const [heir, setHeir] = useState('')
  const { run, pending, error, done, setDone, report } = useAction()
  const confirm = useConfirm()

  const act = (work: () => Promise<string>) => report(work, users.reload)

  const share = (event: Event) => {
    event.preventDefault()
    void act(async () => {
      const name = checkUsername(username.trim())
      const user = await call(coffer.POST('/wallet/users', { body: { username: name } }))
      setUsername('')
      return `${user.username} can now use wallet ${session.wallet_address}.`
    })
  }

  const unshare = async (id: number, name: string) => {
    const yes = await confirm({
      title: `Take ${name}’s access away?`,
      body: (
        <p>
          {name} can no longer use wallet {session.wallet_address}, and the keys they made for it stop working at once.
        </p>
      ),
      action: 'Remove access',
      tone: 'danger',
    })
    if (yes)
      await act(
        async () => (
          await call(coffer.DELETE('/wallet/users/{userid}', { params: { path: { userid: String(id) } } })),
          `${name} can no longer use this wallet.`
        ),
      )
  }

  const handOver = async (event: Event) => {
    event.preventDefault()
    const user = users.data?.find((candidate) => String(candidate.id) === heir)
    const yes = await run(async () => check(user !== undefined, 'Choose who becomes the owner.')).then(() => user !== undefined)
    if (!yes || !user) return
    const sure = await confirm({
      title: `Make ${user.username} the owner of ${session.wallet_address}?`,
      body: (
        <>
          <p>
            {user.username} becomes the owner: only they can then share the wallet, hand it over or delete it. You stay as a user of the
            wallet.
          </p>
          <p>Only {user.username} can undo this.</p>
        </>
      ),
      action: 'Hand over',
      tone: 'danger',
    })
    if (!sure) return
    await run(async () => {
      setDone('')
      await call(coffer.PUT('/wallet/owner', { body: { user_id: user.id } }))
      await refresh()
      await users.reload()
      setHeir('')
      setDone(`${user.username} now owns wallet ${session.wallet_address}.`)
    })
  }

  return (
    <Page title="Sharing">
      <p>
        People who may use wallet <strong>{session.wallet_address}</strong>: they can see it and send from it.{' '}
        {owner ? 'You own it.' : 'You are a user of it; only its owner can change who may use it.'}
      </p>
      {done && <Done>{done}</Done>}
      <ErrorNotice error={error ?? users.error} />
      {users.loading && <Loading what="users" />}
      {users.data && users.data.length === 0 && <Empty>Nobody else may use this wallet.</Empty>}
      {users.data && users.data.length > 0 && (
        <ul class="cards">
          {users.data.map((user) => (
            <li key={user.id}>
              <h3>{user.username}</h3>
              {owner && (
                <button
                  type="button"
                  class="danger"
                  disabled={pending}
                  onClick={() => unshare(user.id, user.username)}
                  aria-label={`Remove ${user.username}`}
                >
                  Remove access
                </button>
              )}
            </li>
          ))}
        </ul>
      )}
      {owner && (
        <>
          <h2>Share this wallet</h2>
          <form onSubmit={share} noValidate>
            <Field
              label="Username to share with"
              value={username}
              onValue={setUsername}
              autoComplete="off"
              hint="2 to 32 letters or digits"
            />
            <button type="submit" class="primary" disabled={pending}>
              Share
            </button>
          </form>
          {users.data && users.data.length > 0 && (
            <>
              <h2>Hand the wallet over</h2>
              <form onSubmit={handOver} noValidate>
                <Select
                  label="New owner"
                  value={heir}
                  onValue={setHeir}
                  options={[['', 'Choose a user'], ...users.data.map((user): [string, string] => [String(user.id), user.username])]}
                />
                <button type="submit" disabled={pending}>
                  Hand over
                </button>
              </form>
            </>
          )}
        </>
      )}
    </Page>
  )
}
