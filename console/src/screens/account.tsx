import { useState } from 'preact/hooks'
import { call, coffer } from '../api.ts'
import { formatTime } from '../format.ts'
import { ACCOUNT_TEXT as T, deviceName, SESSION_TEXT } from '../text.ts'
import { Done, ErrorNotice, Field, Loading, Page, useAction, useConfirm, useLoad } from '../ui.tsx'
import { check, checkPassword, checkUsername } from '../validate.ts'
import { signOutHere, type ScreenProps } from './user-app.tsx'

/** Username, password, and the places the person is signed in. */
export function Account({ session, refresh, signedOut }: ScreenProps & { signedOut: (message: string) => void }) {
  const sessions = useLoad(() => call(coffer.GET('/user/sessions')), [])
  const [username, setUsername] = useState('')
  const [password, setPassword] = useState('')
  const [repeat, setRepeat] = useState('')
  const [done, setDone] = useState('')
  const { run, pending, error } = useAction()
  const confirm = useConfirm()

  const rename = (event: Event) => {
    event.preventDefault()
    void run(async () => {
      setDone('')
      const name = checkUsername(username.trim())
      const answer = await call(coffer.PUT('/user/username', { body: { username: name } }))
      setUsername('')
      await refresh()
      setDone(T.renamed(answer.username))
    })
  }

  const changePassword = (event: Event) => {
    event.preventDefault()
    void run(async () => {
      setDone('')
      checkPassword(password)
      check(password === repeat, T.passwordsDiffer)
      await call(coffer.PUT('/user/password', { body: { password } }))
      setPassword('')
      setRepeat('')
      await sessions.reload()
      setDone(T.passwordChanged)
    })
  }

  const end = (id: number, device: string) =>
    run(async () => {
      await call(coffer.DELETE('/user/sessions/{sessionid}', { params: { path: { sessionid: String(id) } } }))
      await sessions.reload()
      setDone(SESSION_TEXT.ended(device))
    })

  const endEverywhere = async () => {
    const yes = await confirm({
      title: T.everywhereTitle,
      body: <p>{T.everywhereBody}</p>,
      action: T.everywhere,
      tone: 'danger',
    })
    if (!yes) return
    await run(async () => {
      await call(coffer.DELETE('/user/sessions'))
      signedOut(T.signedOutEverywhere)
    })
  }

  return (
    <Page title={T.title}>
      {done && <Done>{done}</Done>}
      <ErrorNotice error={error} />
      <h2>{T.username}</h2>
      <form onSubmit={rename} noValidate>
        <Field
          label={T.newUsername}
          value={username}
          onValue={setUsername}
          autoComplete="username"
          hint={T.usernameHint(session.username)}
        />
        <button type="submit" disabled={pending}>
          {T.changeUsername}
        </button>
      </form>
      <h2>{T.password}</h2>
      <form onSubmit={changePassword} noValidate>
        <Field
          label={T.newPassword}
          type="password"
          value={password}
          onValue={setPassword}
          autoComplete="new-password"
          hint={T.passwordHint}
        />
        <Field label={T.repeat} type="password" value={repeat} onValue={setRepeat} autoComplete="new-password" />
        <button type="submit" disabled={pending}>
          {T.changePassword}
        </button>
      </form>
      <h2>{T.sessions}</h2>
      <ErrorNotice error={sessions.error} />
      {sessions.loading && <Loading what={T.loadingSessions} />}
      {sessions.data && (
        <ul class="cards">
          {sessions.data.map((item) => {
            const device = item.user_agent === undefined ? undefined : deviceName(item.user_agent)
            const title = SESSION_TEXT.title(device, item.current)
            const lastUsed = formatTime(item.last_used_at)
            return (
              <li key={item.id}>
                <h3>{title}</h3>
                <p class="meta">{SESSION_TEXT.times(lastUsed, formatTime(item.created_at))}</p>
                {!item.current && (
                  <button
                    type="button"
                    disabled={pending}
                    onClick={() => end(item.id, title)}
                    aria-label={SESSION_TEXT.endLabel(title, lastUsed)}
                  >
                    {SESSION_TEXT.end}
                  </button>
                )}
              </li>
            )
          })}
        </ul>
      )}
      <div class="actions">
        <button type="button" disabled={pending} onClick={() => run(async () => signedOut(await signOutHere()))}>
          {T.signOutHere}
        </button>
        <button type="button" class="danger" disabled={pending} onClick={endEverywhere}>
          {T.everywhere}
        </button>
      </div>
    </Page>
  )
}
