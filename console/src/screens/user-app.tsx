import type { ComponentChildren } from 'preact'
import { call, coffer, type paths } from '../api.ts'
import { NAV_TEXT as T } from '../text.ts'
import { ErrorNotice, TopBar, useAction } from '../ui.tsx'
import { Account } from './account.tsx'
import { Alerts } from './alerts.tsx'
import { Balances } from './balances.tsx'
import { Batch } from './batch.tsx'
import { History } from './history.tsx'
import { Holds } from './holds.tsx'
import { Keys } from './keys.tsx'
import { Schedules } from './schedules.tsx'
import { Send } from './send.tsx'
import { Sharing } from './sharing.tsx'
import { Webhook } from './webhook.tsx'
import { Wallets } from './wallets.tsx'

export type CurrentSession = paths['/user/session']['get']['responses']['200']['content']['application/json']

/** Ends this session (the cookie is cleared by the answer); returns what to tell the person. */
export async function signOutHere(): Promise<string> {
  await call(coffer.DELETE('/user/session'))
  return T.signedOut
}

export interface ScreenProps {
  session: CurrentSession
  /** Reads the session again (after the active wallet or the username changed). */
  refresh: () => Promise<void>
}

const SCREENS = Object.entries(T.holder)

/** The wallet holder's console: a header with the navigation, then the screen of the route. */
export function UserApp({ route, session, refresh, signedOut }: ScreenProps & { route: string[]; signedOut: (message: string) => void }) {
  const screen = route[0] ?? ''
  const { run, pending, error } = useAction()
  const props = { session, refresh }
  const screens: Record<string, () => ComponentChildren> = {
    '': () => <Balances {...props} />,
    send: () => <Send {...props} />,
    history: () => <History {...props} />,
    batch: () => <Batch {...props} />,
    holds: () => <Holds {...props} />,
    schedules: () => <Schedules {...props} id={route[1]} />,
    alerts: () => <Alerts {...props} />,
    wallets: () => <Wallets {...props} />,
    sharing: () => <Sharing {...props} />,
    keys: () => <Keys {...props} />,
    webhook: () => <Webhook {...props} />,
    account: () => <Account {...props} signedOut={signedOut} />,
  }
  return (
    <div class="shell">
      <a class="skip" href="#main" onClick={(event) => (event.preventDefault(), document.getElementById('page-title')?.focus())}>
        {T.skip}
      </a>
      <TopBar
        brand={T.brand}
        home="#/"
        who={
          <>
            <span>
              {T.signedInAs}
              <strong>{session.username}</strong>
            </span>
            <span>
              {T.wallet}
              <strong>{session.wallet_address}</strong>
              {session.wallet_id === session.primary_wallet_id ? T.primary : ''}
            </span>
          </>
        }
        signOut={() => run(async () => signedOut(await signOutHere()))}
        pending={pending}
        navLabel={T.main}
        links={SCREENS}
        base="#/"
        current={screen}
      />
      <main id="main">
        <ErrorNotice error={error} />
        {(screens[screen] ?? screens[''])()}
      </main>
    </div>
  )
}
