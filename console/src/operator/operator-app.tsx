import type { ComponentChildren } from 'preact'
import { useCallback, useEffect, useMemo, useState } from 'preact/hooks'
import { call, CofferError, coffer } from '../api.ts'
import { describeError, NAV_TEXT as T } from '../text.ts'
import { ErrorNotice, Loading, SessionEndsContext, TopBar, useAction } from '../ui.tsx'
import { Assets } from './assets.tsx'
import { Journal } from './journal.tsx'
import { OperatorSignIn } from './operator-sign-in.tsx'
import { TroubledSchedules } from './schedules.tsx'
import { Overview } from './overview.tsx'
import { Verification } from './verification.tsx'
import { WalletDetail, WalletSearch } from './wallets.tsx'

const SCREENS = Object.entries(T.operator)

/** The operator's console (`#/operator/…`): behind an operator session opened with the admin key. */
export function OperatorApp({ route }: { route: string[] }) {
  const [signedIn, setSignedIn] = useState<boolean | undefined>(undefined)
  const [message, setMessage] = useState<string | undefined>()
  const check = useCallback(async () => {
    try {
      await call(coffer.GET('/admin/overview'))
      setSignedIn(true)
    } catch (error) {
      if (!(error instanceof CofferError && error.code === 'A003')) setMessage(describeError(error).text)
      setSignedIn(false)
    }
  }, [])
  useEffect(() => {
    void check()
  }, [check])
  const ends = useMemo(
    () => ({
      ended: (text: string) => {
        setMessage(text)
        setSignedIn(false)
      },
    }),
    [],
  )
  const { run, pending, error } = useAction(['A003'])

  if (signedIn === undefined) return <Loading what={T.loadingOperator} />
  if (!signedIn)
    return (
      <OperatorSignIn
        message={message}
        signedIn={() => {
          setMessage(undefined)
          setSignedIn(true)
        }}
      />
    )
  const screen = route[0] ?? ''
  const screens: Record<string, () => ComponentChildren> = {
    '': () => <Overview />,
    assets: () => <Assets />,
    wallets: () => (route[1] ? <WalletDetail id={route[1]} /> : <WalletSearch />),
    journal: () => <Journal />,
    schedules: () => <TroubledSchedules />,
    verify: () => <Verification />,
  }
  return (
    <SessionEndsContext.Provider value={ends}>
      <div class="shell">
        <TopBar
          brand={T.operatorBrand}
          home="#/operator"
          who={T.operatorWho}
          signOut={() =>
            run(async () => {
              await call(coffer.DELETE('/admin/session'))
              ends.ended(T.operatorSignedOut)
            })
          }
          pending={pending}
          navLabel={T.operatorNav}
          links={SCREENS}
          base="#/operator/"
          current={screen}
          operator
        />
        <main id="main">
          <ErrorNotice error={error} />
          {(screens[screen] ?? screens[''])()}
        </main>
      </div>
    </SessionEndsContext.Provider>
  )
}
