import { useContext, useEffect, useRef, useState } from 'preact/hooks'
import { followEvents, type WalletEvent } from './api.ts'
import { ERROR_TEXT } from './text.ts'
import { SessionEndsContext } from './ui.tsx'

export type LiveStatus = 'connecting' | 'live' | 'reconnecting'

/**
 * Follows the active wallet's events (`GET /wallet/events`, with the session cookie) while the
 * screen is shown, calling `onEvent` for each; a refused stream means the session has ended.
 */
export function useWalletEvents(walletId: number, onEvent: (event: WalletEvent) => void): LiveStatus {
  const [status, setStatus] = useState<LiveStatus>('connecting')
  const session = useContext(SessionEndsContext)
  const handler = useRef(onEvent)
  handler.current = onEvent
  useEffect(() => {
    const controller = new AbortController()
    void followEvents(
      { baseUrl: location.origin, signal: controller.signal, onStatus: setStatus, onRefused: () => session.ended(ERROR_TEXT.A001) },
      (event) => handler.current(event),
    )
    return () => controller.abort()
  }, [walletId, session])
  return status
}
