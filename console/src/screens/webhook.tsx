import { useEffect, useState } from 'preact/hooks'
import { call, coffer } from '../api.ts'
import { formatTime } from '../format.ts'
import { useWalletEvents } from '../live.ts'
import { DELIVERY_STATUS_TEXT, EVENT_TEXT } from '../text.ts'
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
  useWalletEvents(session.wallet_id, () => void deliveries.reload())
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
      check(
        /^https?:\/\/[^\s]+$/i.test(target) && target.length <= 512,
        'A webhook is an http:// or https:// address of at most 512 characters.',
      )
      const answer = await call(coffer.PUT('/wallet/webhook', { body: { webhook: target } }))
      setSecret(answer.secret)
      setUrl('')
      await hook.reload()
    })
  }

  const remove = async () => {
    const yes = await confirm({
      title: 'Remove the webhook?',
      body: (
        <p>
          Events of wallet {session.wallet_address} stop being sent to {hook.data?.webhook}.
        </p>
      ),
      action: 'Remove webhook',
      tone: 'danger',
    })
    if (!yes) return
    await run(async () => {
      await call(coffer.DELETE('/wallet/webhook'))
      setSecret(undefined)
      await hook.reload()
      await deliveries.reload()
      setDone('The webhook is removed.')
    })
  }

  const redeliver = (id: number) =>
    run(async () => {
      await call(coffer.POST('/wallet/webhook/deliveries/{id}/retry', { params: { path: { id: String(id) } } }))
      await deliveries.reload()
      setDone(`Delivery ${id} will be attempted again now.`)
    })

  return (
    <Page title="Webhook">
      <p>
        A webhook is an address of yours that Coffer calls for every transaction of wallet <strong>{session.wallet_address}</strong>, signed
        with a secret so you can check it came from here.
      </p>
      {done && <Done>{done}</Done>}
      {secret && (
        <Secret
          label="Signing secret"
          value={secret}
          note="is shown only now: keep it where your webhook receiver can check signatures with it."
        />
      )}
      <ErrorNotice error={error ?? hook.error} />
      {hook.loading && <Loading what="the webhook" />}
      {hook.data && (
        <p>
          {hook.data.webhook ? (
            <>
              Events are sent to <strong class="break">{hook.data.webhook}</strong> (since {formatTime(hook.data.created_at)}).{' '}
              <button type="button" class="danger" disabled={pending} onClick={remove}>
                Remove webhook
              </button>
            </>
          ) : (
            'No webhook is set.'
          )}
        </p>
      )}
      <h2>{hook.data?.webhook ? 'Change the webhook' : 'Set a webhook'}</h2>
      <form onSubmit={set} noValidate>
        <Field
          label="Webhook address"
          type="url"
          value={url}
          onValue={setUrl}
          hint="https://… on a public address, at most 512 characters; a new secret is made each time"
          autoComplete="off"
        />
        <button type="submit" class="primary" disabled={pending}>
          Set webhook
        </button>
      </form>
      <h2>Deliveries</h2>
      <ErrorNotice error={deliveries.error} />
      {deliveries.loading && <Loading what="deliveries" />}
      <button type="button" onClick={() => deliveries.reload()}>
        Refresh deliveries
      </button>
      {deliveries.data && deliveries.data.length === 0 && <Empty>No event has been sent to a webhook yet.</Empty>}
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
                  Delivery {delivery.id}, queued {formatTime(delivery.created_at)}, {delivery.attempts} attempt
                  {delivery.attempts === 1 ? '' : 's'}
                  {delivery.next_attempt_at && `, next ${formatTime(delivery.next_attempt_at)}`}
                </p>
                {delivery.attempt_log.length > 0 && (
                  <details>
                    <summary>Attempts of delivery {delivery.id}</summary>
                    <ol>
                      {delivery.attempt_log.map((attempt, index) => (
                        <li key={index}>
                          {formatTime(attempt.attempted_at)}:{' '}
                          {attempt.status_code !== null ? `answered ${attempt.status_code}` : 'no answer'} in {attempt.latency_ms} ms
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
                    aria-label={`Deliver ${delivery.id} again`}
                  >
                    Deliver again
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
