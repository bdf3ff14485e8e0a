import { useCallback, useEffect, useMemo, useState } from 'preact/hooks'
import { call, CofferError, coffer } from './api.ts'
import { OperatorApp } from './operator/operator-app.tsx'
import { SignIn } from './screens/sign-in.tsx'
import { UserApp, type CurrentSession } from './screens/user-app.tsx'
import { describeError, NAV_TEXT } from './text.ts'
import { ConfirmHost, Loading, SessionEndsContext } from './ui.tsx'

/** The route is the part of the address after `#`: `#/send`, `#/operator/wallets/12`, … */
function useRoute(): string[] {
  const read = () => location.hash.replace(/^#\/?/, '').split('/').filter(Boolean)
  const [route, setRoute] = useState(read)
  useEffect(() => {
    const changed = () => setRoute(read())
    addEventListener('hashchange', changed)
    return () => removeEventListener('hashchange', changed)
  }, [])
  return route
}

function navigate(path: string): void {
  location.hash = `#/${path}`
}

export function App() {
  const route = useRoute()
  return <ConfirmHost>{route[0] === 'operator' ? <OperatorApp route={route.slice(1)} /> : <HolderApp route={route} />}</ConfirmHost>
}

/** Wallet holders: the sign-in screens until there is a session, then their screens. */
function HolderApp({ route }: { route: string[] }) {
  const [session, setSession] = useState<CurrentSession | null | undefined>(undefined)
  const [message, setMessage] = useState<string | undefined>()

  const refresh = useCallback(async () => {
    try {
      setSession(await call(coffer.GET('/user/session')))
    } catch (error) {
      if (error instanceof CofferError && (error.code === 'A000' || error.code === 'A001')) setSession(null)
      else {
        setMessage(describeError(error).text)
        setSession(null)
      }
    }
  }, [])
  useEffect(() => {
    void refresh()
  }, [refresh])

  const ends = useMemo(
    () => ({
      ended: (text: string) => {
        setMessage(text)
        setSession(null)
      },
    }),
    [],
  )

  if (session === undefined) return <Loading what={NAV_TEXT.loadingSession} />
  if (session === null) {
    return (
      <SignIn
        message={message}
        register={route[0] === 'register'}
        signedIn={async () => {
          setMessage(undefined)
          await refresh()
          navigate('')
        }}
      />
    )
  }
  return (
    <SessionEndsContext.Provider value={ends}>
      <UserApp
        route={route}
        session={session}
        refresh={refresh}
        signedOut={(text) => {
          setMessage(text)
          setSession(null)
        }}
      />
    </SessionEndsContext.Provider>
  )
}
