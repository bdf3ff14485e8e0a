import { useEffect, useState } from 'preact/hooks'
import { call, coffer, type Holding, type paths } from '../api.ts'
import { spendable } from '../credit.tsx'
import { formatQuantity, formatTime } from '../format.ts'
import { useAnyWalletEvents } from '../live.ts'
import { ALERT_TEXT as T, LIVE_TEXT } from '../text.ts'
import { Done, Empty, ErrorNotice, Field, Loading, Page, Select, useAction, useLoad } from '../ui.tsx'
import { check } from '../validate.ts'
import type { ScreenProps } from './user-app.tsx'
import '../automation.css'

type Monitor = paths['/wallet/monitors']['get']['responses']['200']['content']['application/json'][number]

/** What a `balance.crossed` or `balance.restored` event carries. */
interface AlertEventData {
  monitor: Monitor
  holding: Holding
}

/** A line typed by a person: a whole number of 0 or more (spaces allowed, no separators). */
function parseThreshold(value: string): number {
  const digits = value.replace(/\s/g, '')
  check(/^[0-9]+$/.test(digits) && Number.isSafeInteger(Number(digits)), T.badThreshold)
  return Number(digits)
}

/** The wallet's balance alerts: add one ("tell me when gold drops below 100"), see where each stands, delete. */
export function Alerts({ session }: ScreenProps) {
  const loaded = useLoad(async () => {
    const [monitors, holdings, assets] = await Promise.all([
      call(coffer.GET('/wallet/monitors')),
      call(coffer.GET('/wallet/assets')),
      call(coffer.GET('/assets')),
    ])
    return { monitors, holdings, assets }
  }, [session.wallet_id])
  const [asset, setAsset] = useState('')
  const [direction, setDirection] = useState('below')
  const [threshold, setThreshold] = useState('')
  const [news, setNews] = useState('')
  const { run, pending, error, done, setDone } = useAction()
  const data = loaded.data
  useEffect(() => {
    if (!asset && data?.assets[0]) setAsset(data.assets[0].name)
  }, [data])

  // A crossing (or a transfer that moves what is watched) shows at once.
  const live = useAnyWalletEvents(session.wallet_id, (event) => {
    if (event.type === 'balance.crossed' || event.type === 'balance.restored') {
      const { monitor, holding } = event.data as AlertEventData
      const available = formatQuantity(spendable(holding))
      setNews((event.type === 'balance.crossed' ? T.crossed : T.restored)(monitor.asset, monitor.below, monitor.above, available))
    }
    if (event.type.startsWith('balance.') || event.type.startsWith('transaction.')) void loaded.reload()
  })

  const available = (name: string) => {
    const holding = data?.holdings.find((candidate) => candidate.asset.name === name)
    return holding ? spendable(holding) : 0
  }

  const add = (event: Event) => {
    event.preventDefault()
    void run(async () => {
      setDone('')
      check(asset !== '', T.needAsset)
      const line = parseThreshold(threshold)
      const monitor = await call(coffer.POST('/wallet/monitors', { body: { asset, [direction]: line } })).catch(
        async (refused: unknown) => {
          // Refused (the limit reached elsewhere, an asset gone): show the alerts as they are now.
          await loaded.reload()
          throw refused
        },
      )
      setThreshold('')
      await loaded.reload()
      setDone(T.added(T.sentence(monitor.asset, monitor.below, monitor.above)))
    })
  }

  const remove = (monitor: Monitor) =>
    run(async () => {
      setDone('')
      await call(coffer.DELETE('/wallet/monitors/{id}', { params: { path: { id: String(monitor.id) } } }))
      await loaded.reload()
      setDone(T.removed(T.sentence(monitor.asset, monitor.below, monitor.above)))
    })

  return (
    <Page title={T.title}>
      <p>
        {T.intro(session.wallet_address)} <span class="live">{LIVE_TEXT[live]}</span>
      </p>
      <p role="status" class="news">
        {news}
      </p>
      <ErrorNotice error={loaded.error} />
      {loaded.loading && <Loading what={T.loading} />}
      {data && (
        <>
          <section aria-labelledby="alert-list">
            <h2 id="alert-list">{T.listTitle}</h2>
            {done && <Done>{done}</Done>}
            {data.monitors.length === 0 && <Empty>{T.none}</Empty>}
            {data.monitors.length > 0 && (
              <ul class="cards alerts">
                {data.monitors.map((monitor) => {
                  const sentence = T.sentence(monitor.asset, monitor.below, monitor.above)
                  return (
                    <li key={monitor.id} class={monitor.state}>
                      <p class="what">{sentence}</p>
                      <p class="meta">
                        <span class={`badge alert-${monitor.state}`}>{T.state(monitor.state, monitor.below, monitor.above)}</span>
                        {T.available(formatQuantity(available(monitor.asset)))} · {T.since(formatTime(monitor.created_at))}
                      </p>
                      <button type="button" disabled={pending} aria-label={T.removeLabel(sentence)} onClick={() => void remove(monitor)}>
                        {T.remove}
                      </button>
                    </li>
                  )
                })}
              </ul>
            )}
          </section>
          <section aria-labelledby="new-alert">
            <h2 id="new-alert">{T.newTitle}</h2>
            {data.assets.length === 0 && <Empty>{T.noAssets}</Empty>}
            <form class="alert-form" onSubmit={add} noValidate hidden={data.assets.length === 0}>
              <Select
                label={T.asset}
                value={asset}
                onValue={setAsset}
                options={data.assets.map((candidate) => [candidate.name, candidate.name])}
                hint={asset ? T.available(formatQuantity(available(asset))) : undefined}
              />
              <div class="line">
                <Select label={T.direction} value={direction} onValue={setDirection} options={T.directions} />
                <Field
                  label={T.threshold}
                  value={threshold}
                  onValue={setThreshold}
                  inputMode="numeric"
                  autoComplete="off"
                  hint={T.thresholdHint}
                />
              </div>
              <ErrorNotice error={error} />
              <button type="submit" class="primary" disabled={pending || data.monitors.length >= 20}>
                {pending ? T.adding : T.add}
              </button>
              {data.monitors.length >= 20 && <p class="hint">{T.most}</p>}
            </form>
          </section>
        </>
      )}
    </Page>
  )
}
