import { useState } from 'preact/hooks'
import { call, coffer } from '../api.ts'
import { formatTime } from '../format.ts'
import { deviceName } from '../text.ts'
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
      setDone(`Your username is now ${answer.username}.`)
    })
  }

  const changePassword = (event: Event) => {
    event.preventDefault()
    void run(async () => {
      setDone('')
      checkPassword(password)
      check(password === repeat, 'The two passwords differ.')
      await call(coffer.PUT('/user/password', { body: { password } }))
      setPassword('')
      setRepeat('')
      await sessions.reload()
      setDone('Your password is changed. You were signed out everywhere else.')
    })
  }

  const end = (id: number) =>
    run(async () => {
      await call(coffer.DELETE('/user/sessions/{sessionid}', { params: { path: { sessionid: String(id) } } }))
      await sessions.reload()
      setDone(`Session ${id} ended.`)
    })

  const endEverywhere = async () => {
    const yes = await confirm({
      title: 'Sign out everywhere?',
      body: <p>Every session of yours ends, this one included, on every device.</p>,
      action: 'Sign out everywhere',
      tone: 'danger',
    })
    if (!yes) return
    await run(async () => {
      await call(coffer.DELETE('/user/sessions'))
      signedOut('You are signed out everywhere.')
    })
  }

  return (
    <Page title="Account">
      {done && <Done>{done}</Done>}
      <ErrorNotice error={error} />
      <h2>Username</h2>
      <form onSubmit={rename} noValidate>
        <Field
          label="New username"
          value={username}
          onValue={setUsername}
          autoComplete="username"
          hint={`now ${session.username}; 2 to 32 letters or digits`}
        />
        <button type="submit" disabled={pending}>
          Change username
        </button>
      </form>
      <h2>Password</h2>
      <form onSubmit={changePassword} noValidate>
        <Field
          label="New password"
          type="password"
          value={password}
          onValue={setPassword}
          autoComplete="new-password"
          hint="8 to 32 characters; other sessions end"
        />
        <Field label="Repeat the new password" type="password" value={repeat} onValue={setRepeat} autoComplete="new-password" />
        <button type="submit" disabled={pending}>
          Change password
        </button>
      </form>
      <h2>Where you are signed in</h2>
      <ErrorNotice error={sessions.error} />
      {sessions.loading && <Loading what="sessions" />}
      {sessions.data && (
        <ul class="cards">
          {sessions.data.map((item) => (
            <li key={item.id}>
              <h3>{item.current ? `This device: ${deviceName(navigator.userAgent)}` : `Another sign-in (session ${item.id})`}</h3>
              <p class="meta">
                Last used {formatTime(item.last_used_at)} · signed in {formatTime(item.created_at)}
              </p>
              {!item.current && (
                <button type="button" disabled={pending} onClick={() => end(item.id)} aria-label={`End session ${item.id}`}>
                  End session
                </button>
              )}
            </li>
          ))}
        </ul>
      )}
      <div class="actions">
        <button type="button" disabled={pending} onClick={() => run(async () => signedOut(await signOutHere()))}>
          Sign out of this session
        </button>
        <button type="button" class="danger" disabled={pending} onClick={endEverywhere}>
          Sign out everywhere
        </button>
      </div>
    </Page>
  )
}
