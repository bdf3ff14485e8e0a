import { useState } from 'preact/hooks'
import { call, coffer } from '../api.ts'
import { Done, ErrorNotice, Field, Page, useAction } from '../ui.tsx'
import { OPERATOR_SIGN_IN_TEXT as T } from '../text.ts'
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
      check(key.trim() !== '', T.noKey)
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
      <p class="brand">{T.brand}</p>
      <Page title={T.title}>
        {message && <Done>{message}</Done>}
        <p>
          {T.intro[0]}
          <code>{T.command}</code>
          {T.intro[1]}
        </p>
        <form onSubmit={submit} noValidate>
          <Field label={T.key} type="password" value={key} onValue={setKey} autoComplete="off" required />
          <ErrorNotice error={error} />
          <button type="submit" class="primary" disabled={pending}>
            {T.signIn}
          </button>
        </form>
        <p>
          <a href="#/">{T.holders}</a>
        </p>
      </Page>
    </main>
  )
}
