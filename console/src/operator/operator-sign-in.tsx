import { useState } from 'preact/hooks'
import { call, coffer } from '../api.ts'
import { Done, ErrorNotice, Field, Page, useAction } from '../ui.tsx'
import { check } from '../validate.ts'

/**
 * The admin key is sent once to open an operator session (an HttpOnly cookie for 12 hours) and
 * then forgotten: the page never keeps it.
 */
export function OperatorSignIn({ message, signedIn }: { message?: string; signedIn: () => void }) {
  const [key, setKey] = useState('')
  const { run, pending, error } = useAction([])
  const submit = (event: Event) => {
    event.preventDefault()
    void run(async () => {
      check(key.trim() !== '', 'Enter the admin key.')
      try {
        await call(coffer.POST('/admin/sessions', { body: { key: key.trim() } }))
      } finally {
        setKey('')
      }
      signedIn()
    })
  }
  return (
    <main class="narrow">
      <p class="brand">Coffer operator</p>
      <Page title="Operator sign-in">
        {message && <Done>{message}</Done>}
        <p>
          Sign in with the admin key (<code>npx coffer admin-key</code> prints it on the server).
        </p>
        <form onSubmit={submit} noValidate>
          <Field label="Admin key" type="password" value={key} onValue={setKey} autoComplete="off" required />
          <ErrorNotice error={error} />
          <button type="submit" class="primary" disabled={pending}>
            Sign in
          </button>
        </form>
        <p>
          <a href="#/">Wallet holders sign in here</a>
        </p>
      </Page>
    </main>
  )
}
