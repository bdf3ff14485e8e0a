import { useContext, useEffect, useState } from 'preact/hooks'
import { coffer, CofferError, dryRun, type Holding } from '../api.ts'
import { HeldQuantity } from '../credit.tsx'
import { formatQuantity } from '../format.ts'
import { CREDIT_TEXT, describeError, SEND_PREVIEW_TEXT as T, type ShownError } from '../text.ts'
import { SessionEndsContext } from '../ui.tsx'
import '../control.css'

type SendBody = Parameters<typeof dryRun<'/wallet/transactions'>>[2]['body']

/** Waits this long after the last change of the form before asking, so typing asks once. */
const SETTLE_MS = 300

/**
 * What the wallet will hold after the transfer, before the person presses Send: a dry run of the
 * very request (`?dry_run=true`, every check, nothing written), asked again whenever the form
 * changes and is complete. Only the latest answer is shown; until it comes the table says so.
 */
export function AfterSend({ body, holdings, address }: { body: SendBody | undefined; holdings: Holding[]; address: string }) {
  const key = body === undefined ? '' : JSON.stringify(body)
  const [answer, setAnswer] = useState<{ key: string; after?: Holding[]; refusal?: ShownError }>()
  const session = useContext(SessionEndsContext)
  useEffect(() => {
    if (body === undefined) return
    let current = true
    const timer = setTimeout(() => {
      dryRun(coffer, '/wallet/transactions', { body }).then(
        (result) => current && setAnswer({ key, after: result.holdings_after }),
        (caught) => {
          if (!current) return
          if (caught instanceof CofferError && (caught.code === 'A000' || caught.code === 'A001')) session.ended(describeError(caught).text)
          else setAnswer({ key, refusal: describeError(caught) })
        },
      )
    }, SETTLE_MS)
    return () => {
      current = false
      clearTimeout(timer)
    }
  }, [key, holdings])
  if (body === undefined) return null
  const shown = answer?.key === key ? answer : undefined
  const sent = Object.keys(body.assets)
  const now = (name: string) => holdings.find((holding) => holding.asset.name === name)
  return (
    <section class="after-send" aria-labelledby="after-send" aria-live="polite" aria-busy={shown === undefined}>
      <h2 id="after-send">{T.title}</h2>
      {shown === undefined && <p class="loading">{T.checking}</p>}
      {shown?.refusal && (
        <div class="refusal">
          <p>{T.refused}</p>
          <p>
            <strong>{shown.refusal.text}</strong>
          </p>
        </div>
      )}
      {shown?.after && (
        <>
          <p>{T.intro(address)}</p>
          <table class="holdings">
            <caption class="visually-hidden">{T.caption(address)}</caption>
            <thead>
              <tr>
                <th scope="col">{T.asset}</th>
                <th scope="col" class="number">
                  {T.now}
                </th>
                <th scope="col" class="number">
                  {T.after}
                </th>
              </tr>
            </thead>
            <tbody>
              {sent.map((name) => {
                const before = now(name)
                const after = shown.after?.find((holding) => holding.asset.name === name)
                return (
                  <tr key={name}>
                    <th scope="row">
                      {name}
                      {(after?.credit_limit ?? 0) > 0 && (
                        <small class="hint credit-line">{CREDIT_TEXT.canOwe(formatQuantity(after?.credit_limit ?? 0))}</small>
                      )}
                    </th>
                    <td class="number">
                      <HeldQuantity holding={before ?? { quantity: 0 }} />
                    </td>
                    <td class="number">
                      <HeldQuantity holding={after ?? { quantity: 0 }} />
                    </td>
                  </tr>
                )
              })}
            </tbody>
          </table>
        </>
      )}
    </section>
  )
}
