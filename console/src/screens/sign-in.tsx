import { useState } from 'preact/hooks'
import { call, coffer } from '../api.ts'
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
        check(password === repeat, 'The two passwords differ.')
        await call(coffer.POST('/users', { body: { username, password } }))
      }
      await call(coffer.POST('/users/{username}/sessions', { params: { path: { username } }, body: { password } }))
      await signedIn()
    })
  }

  return (
    <main class="narrow">
      <p class="brand">Coffer</p>
      <Page title={register ? 'Create an account' : 'Sign in'}>
        {message && <Done>{message}</Done>}
        <form onSubmit={submit} noValidate>
          <Field
            label="Username"
            value={username}
            onValue={setUsername}
            autoComplete="username"
            required
            hint={register ? '2 to 32 letters or digits' : undefined}
          />
          <Field
            label="Password"
            type="password"
            value={password}
            onValue={setPassword}
            autoComplete={register ? 'new-password' : 'current-password'}
            required
            hint={register ? '8 to 32 characters' : undefined}
          />
          {register && (
            <Field label="Repeat the password" type="password" value={repeat} onValue={setRepeat} autoComplete="new-password" required />
          )}
          <ErrorNotice error={error} />
          <button type="submit" class="primary" disabled={pending}>
            {register ? 'Create account' : 'Sign in'}
          </button>
        </form>
        <p>{register ? <a href="#/">I already have an account: sign in</a> : <a href="#/register">New here? Create an account</a>}</p>
        <p>
          <a href="#/operator">Operator sign-in</a>
        </p>
      </Page>
    </main>
  )
}
