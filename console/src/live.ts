import { useContext, useEffect, useRef, useState } from 'preact/hooks'
import { coffer, followEvents, type WalletEvent } from './api.ts'
import { ERROR_TEXT } from './text.ts'
import { SessionEndsContext } from './ui.tsx'

export type LiveStatus = 'connecting' | 'live' | 'reconnecting'

/** Any event of the stream: transaction events carry a Transaction, schedule and balance events their own data. */
export interface AnyWalletEvent {
  type: string
  id: string
  created_at: string
  data: unknown
  sequence: string
}

/**
 * Follows the active wallet's transaction events (`GET /wallet/events`, with the session cookie)
 * while the screen is shown, calling `onEvent` for each; a refused stream means the session has ended.
 */
export function useWalletEvents(walletId: number, onEvent: (event: WalletEvent) => void): LiveStatus {
  // The stream also carries schedule and balance events, whose data is no Transaction.
  return useAnyWalletEvents(walletId, (event) => {
    if (event.type === 'transaction.sent' || event.type === 'transaction.received') onEvent(event as WalletEvent)
  })
}

/** Follows every event of the active wallet, whatever its type (schedules, alerts). */
export function useAnyWalletEvents(walletId: number, onEvent: (event: AnyWalletEvent) => void): LiveStatus {
  const [status, setStatus] = useState<LiveStatus>('connecting')
  const session = useContext(SessionEndsContext)
  const handler = useRef(onEvent)
  handler.current = onEvent
  useEffect(() => {
    const controller = new AbortController()
    // The service ends the stream of a session ended anywhere; a dropped stream and a person coming
    // back to the page ask whether the session still stands.
    const check = () => {
      if (document.visibilityState !== 'visible') return
      void coffer.GET('/user/session').then(
        ({ response }) => {
          if (response.status === 401 && !controller.signal.aborted) session.ended(ERROR_TEXT.A001)
        },
        () => undefined,
      )
    }
    void followEvents(
      {
        baseUrl: location.origin,
        signal: controller.signal,
        onStatus: (next) => {
          setStatus(next)
          if (next === 'reconnecting') check()
        },
        onRefused: () => session.ended(ERROR_TEXT.A001),
      },
      (event) => handler.current(event),
    )
    addEventListener('focus', check)
    document.addEventListener('visibilitychange', check)
    return () => {
      controller.abort()
      removeEventListener('focus', check)
      document.removeEventListener('visibilitychange', check)
    }
  }, [walletId, session])
  return status
}
