import { useState } from 'preact/hooks'
import { call, coffer } from '../api.ts'
import { SHARING_TEXT as T } from '../text.ts'
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
      return T.shared(user.username, session.wallet_address)
    })
  }

  const unshare = async (id: number, name: string) => {
    const yes = await confirm({
      title: T.removeTitle(name),
      body: <p>{T.removeBody(name, session.wallet_address)}</p>,
      action: T.remove,
      tone: 'danger',
    })
    if (yes)
      await act(
        async () => (await call(coffer.DELETE('/wallet/users/{userid}', { params: { path: { userid: String(id) } } })), T.removed(name)),
      )
  }

  const handOver = async (event: Event) => {
    event.preventDefault()
    const user = users.data?.find((candidate) => String(candidate.id) === heir)
    const yes = await run(async () => check(user !== undefined, T.noHeir)).then(() => user !== undefined)
    if (!yes || !user) return
    const sure = await confirm({
      title: T.handOverTitle(user.username, session.wallet_address),
      body: (
        <>
          <p>{T.handOverBody(user.username)}</p>
          <p>{T.handOverFinal(user.username)}</p>
        </>
      ),
      action: T.handOver,
      tone: 'danger',
    })
    if (!sure) return
    await run(async () => {
      setDone('')
      await call(coffer.PUT('/wallet/owner', { body: { user_id: user.id } }))
      await refresh()
      await users.reload()
      setHeir('')
      setDone(T.handedOver(user.username, session.wallet_address))
    })
  }

  return (
    <Page title={T.title}>
      <p>
        {T.intro[0]}
        <strong>{session.wallet_address}</strong>
        {T.intro[1]}
        {owner ? T.youOwn : T.youUse}
      </p>
      {done && <Done>{done}</Done>}
      <ErrorNotice error={error ?? users.error} />
      {users.loading && <Loading what={T.loading} />}
      {users.data && users.data.length === 0 && <Empty>{T.nobody}</Empty>}
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
                  aria-label={T.removeLabel(user.username)}
                >
                  {T.remove}
                </button>
              )}
            </li>
          ))}
        </ul>
      )}
      {owner && (
        <>
          <h2>{T.shareTitle}</h2>
          <form onSubmit={share} noValidate>
            <Field label={T.username} value={username} onValue={setUsername} autoComplete="off" hint={T.usernameHint} />
            <button type="submit" class="primary" disabled={pending}>
              {T.share}
            </button>
          </form>
          {users.data && users.data.length > 0 && (
            <>
              <h2>{T.handOverHeading}</h2>
              <form onSubmit={handOver} noValidate>
                <Select
                  label={T.heir}
                  value={heir}
                  onValue={setHeir}
                  options={[['', T.chooseUser], ...users.data.map((user): [string, string] => [String(user.id), user.username])]}
                />
                <button type="submit" disabled={pending}>
                  {T.handOver}
                </button>
              </form>
            </>
          )}
        </>
      )}
    </Page>
  )
}
