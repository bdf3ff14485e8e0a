import { useEffect, useState } from 'preact/hooks'
import { call, coffer } from '../api.ts'
import { formatQuantity, formatTime } from '../format.ts'
import { useAnyWalletEvents } from '../live.ts'
import { DELIVERY_STATUS_TEXT, EVENT_TEXT, WEBHOOK_TEXT as T } from '../text.ts'
import { Done, Empty, ErrorNotice, Field, Loading, Page, Secret, useAction, useConfirm, useLoad } from '../ui.tsx'
import { check } from '../validate.ts'
import type { ScreenProps } from './user-app.tsx'

/** The active wallet's webhook: an address that receives its events, and the log of deliveries. */
export function Webhook({ session }: ScreenProps) {
  const hook = useLoad(() => call(coffer.GET('/wallet/webhook')), [session.wallet_id])
  const deliveries = useLoad(
    () => call(coffer.GET('/wallet/webhook/deliveries', { params: { query: { limit: 50 } } })),
    [session.wallet_id],
  )
  // New events queue deliveries, and a waiting delivery changes by itself: the list follows both.
  useAnyWalletEvents(session.wallet_id, () => void deliveries.reload())
  const waiting = deliveries.data?.some((delivery) => delivery.status === 'pending') ?? false
  useEffect(() => {
    if (!waiting) return
    const timer = setTimeout(() => void deliveries.reload(), 2000)
    return () => clearTimeout(timer)
  }, [deliveries.data])
  const [url, setUrl] = useState('')
  const [secret, setSecret] = useState<string | undefined>()
  const [done, setDone] = useState('')
  const { run, pending, error } = useAction()
  const confirm = useConfirm()

  const set = (event: Event) => {
    event.preventDefault()
    void run(async () => {
      setDone('')
      const target = url.trim()
      check(/^https?:\/\/[^\s]+$/i.test(target) && target.length <= 512, T.badAddress)
      const answer = await call(coffer.PUT('/wallet/webhook', { body: { webhook: target } }))
      setSecret(answer.secret)
      setUrl('')
      await hook.reload()
    })
  }

  const remove = async () => {
    const yes = await confirm({
      title: T.removeTitle,
      body: <p>{T.removeBody(session.wallet_address, hook.data?.webhook ?? '')}</p>,
      action: T.remove,
      tone: 'danger',
    })
    if (!yes) return
    await run(async () => {
      await call(coffer.DELETE('/wallet/webhook'))
      setSecret(undefined)
      await hook.reload()
      await deliveries.reload()
      setDone(T.removed)
    })
  }

  const redeliver = (id: number) =>
    run(async () => {
      await call(coffer.POST('/wallet/webhook/deliveries/{id}/retry', { params: { path: { id: String(id) } } }))
      await deliveries.reload()
      setDone(T.redelivering(id))
    })

  return (
    <Page title={T.title}>
      <p>
        {T.intro[0]}
        <strong>{session.wallet_address}</strong>
        {T.intro[1]}
      </p>
      {done && <Done>{done}</Done>}
      {secret && <Secret label={T.secret} value={secret} note={T.secretNote} />}
      <ErrorNotice error={error ?? hook.error} />
      {hook.loading && <Loading what={T.loading} />}
      {hook.data && (
        <p>
          {hook.data.webhook ? (
            <>
              {T.sentTo[0]}
              <strong class="break">{hook.data.webhook}</strong>
              {T.sentTo[1](formatTime(hook.data.created_at))}
              <button type="button" class="danger" disabled={pending} onClick={remove}>
                {T.remove}
              </button>
            </>
          ) : (
            T.none
          )}
        </p>
      )}
      <h2>{hook.data?.webhook ? T.change : T.setHeading}</h2>
      <form onSubmit={set} noValidate>
        <Field label={T.address} type="url" value={url} onValue={setUrl} hint={T.addressHint} autoComplete="off" />
        <button type="submit" class="primary" disabled={pending}>
          {T.set}
        </button>
      </form>
      <h2>{T.deliveries}</h2>
      <p>{T.deliveriesIntro}</p>
      <ErrorNotice error={deliveries.error} />
      {deliveries.loading && <Loading what={T.loadingDeliveries} />}
      {deliveries.data && deliveries.data.length === 0 && <Empty>{T.noDeliveries}</Empty>}
      {deliveries.data && deliveries.data.length > 0 && (
        <>
          <ul class="cards">
            {deliveries.data.map((delivery) => (
              <li key={delivery.id}>
                <h3>
                  {EVENT_TEXT[delivery.type] ?? delivery.type}
                  <span class="visually-hidden"> ·</span>{' '}
                  <span class={`badge ${delivery.status}`}>{DELIVERY_STATUS_TEXT[delivery.status]}</span>
                </h3>
                <p class="meta">
                  {T.deliveryFacts(
                    delivery.id,
                    formatTime(delivery.created_at),
                    delivery.attempts,
                    delivery.next_attempt_at ? formatTime(delivery.next_attempt_at) : undefined,
                  )}
                </p>
                {delivery.attempt_log.length > 0 && (
                  <details>
                    <summary>{T.attemptsOf(delivery.id)}</summary>
                    <ol>
                      {delivery.attempt_log.map((attempt, index) => (
                        <li key={index}>
                          {T.attempt(formatTime(attempt.attempted_at), attempt.status_code, formatQuantity(attempt.latency_ms))}
                          {attempt.error && ` (${attempt.error})`}
                        </li>
                      ))}
                    </ol>
                  </details>
                )}
                {delivery.status !== 'pending' && (
                  <button
                    type="button"
                    disabled={pending}
                    onClick={() => redeliver(delivery.id)}
                    aria-label={T.redeliverLabel(delivery.id)}
                  >
                    {T.redeliver}
                  </button>
                )}
              </li>
            ))}
          </ul>
        </>
      )}
    </Page>
  )
}
