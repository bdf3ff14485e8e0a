import { useState } from 'preact/hooks'
import { call, coffer } from '../api.ts'
import { SIGN_IN_TEXT as T } from '../text.ts'
import { Done, ErrorNotice, Field, Page, useAction } from '../ui.tsx'
import { check, checkPassword, checkUsername } from '../validate.ts'

/** Sign in, or create an account (`#/register`). The session is an HttpOnly cookie the page never sees. */
export function SignIn({ message, register, signedIn }: { message?: string; register: boolean; signedIn: () => Promise<void> }) {
  const [username, setUsername] = useState('')
  const [password, setPassword] = useState('')
  const [repeat, setRepeat] = useState('')
  const { run, pending, error } = useAction([])

  const submit = (event: Event) => {
    event.preventDefault()
    void run(async () => {
      checkUsername(username)
      if (register) {
        checkPassword(password)
        check(password === repeat, T.passwordsDiffer)
        await call(coffer.POST('/users', { body: { username, password } }))
      }
      await call(coffer.POST('/users/{username}/sessions', { params: { path: { username } }, body: { password } }))
      await signedIn()
    })
  }

  return (
    <main class="narrow">
      <p class="brand">{T.brand}</p>
      <Page title={register ? T.register : T.signIn}>
        {message && <Done>{message}</Done>}
        <form onSubmit={submit} noValidate>
          <Field
            label={T.username}
            value={username}
            onValue={setUsername}
            autoComplete="username"
            required
            hint={register ? T.usernameHint : undefined}
          />
          <Field
            label={T.password}
            type="password"
            value={password}
            onValue={setPassword}
            autoComplete={register ? 'new-password' : 'current-password'}
            required
            hint={register ? T.passwordHint : undefined}
          />
          {register && <Field label={T.repeat} type="password" value={repeat} onValue={setRepeat} autoComplete="new-password" required />}
          <ErrorNotice error={error} />
          <button type="submit" class="primary" disabled={pending}>
            {register ? T.createAccount : T.signIn}
          </button>
        </form>
        <p>{register ? <a href="#/">{T.toSignIn}</a> : <a href="#/register">{T.toRegister}</a>}</p>
        <p>
          <a href="#/operator">{T.operator}</a>
        </p>
      </Page>
    </main>
  )
}
