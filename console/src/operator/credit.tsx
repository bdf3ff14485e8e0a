import { useState } from 'preact/hooks'
import { call, coffer, CofferError, type Asset, type Holding } from '../api.ts'
import { owed } from '../credit.tsx'
import { formatQuantity } from '../format.ts'
import { CREDIT_TEXT as T, describeError } from '../text.ts'
import { Done, Empty, ErrorNotice, Field, Select, useAction, useConfirm } from '../ui.tsx'
import { check } from '../validate.ts'
import '../control.css'

/** A limit typed by the operator: a whole number of 0 or more (spaces allowed, no separators). */
function parseLimit(value: string): number {
  const digits = value.replace(/\s/g, '')
  check(/^[0-9]+$/.test(digits), T.badLimit)
  check(Number.isSafeInteger(Number(digits)), T.limitTooLarge)
  return Number(digits)
}

/**
 * The operator's credit limits of one wallet: each limit with what the wallet owes, removed with a
 * button; set (or changed) by asset. Lowering a limit below what is owed, or removing it from a
 * wallet that owes, asks first, saying that the debt stays and spending stops.
 */
export function CreditLimits({
  walletId,
  address,
  holdings,
  assets,
  changed,
}: {
  walletId: number
  address: string
  holdings: Holding[]
  assets: Asset[]
  changed: () => Promise<void>
}) {
  const [asset, setAsset] = useState('')
  const [limit, setLimit] = useState('')
  const { run, pending, error, setError, done, setDone } = useAction(['A003'])
  const confirm = useConfirm()
  const limited = holdings.filter((holding) => holding.credit_limit > 0)

  /** Puts the limit, once confirmed where the wallet keeps a debt above it; C000 and W002 in this screen's words. */
  const put = async (chosen: Asset, next: number) => {
    const holding = holdings.find((candidate) => candidate.asset.id === chosen.id)
    const owes = holding ? owed(holding) : undefined
    if (owes !== undefined && -(holding?.quantity ?? 0) > next) {
      const yes = await confirm(
        next === 0
          ? { title: T.removeTitle(chosen.name), body: <p>{T.removeBody(address, chosen.name, owes)}</p>, action: T.remove, tone: 'danger' }
          : {
              title: T.lowerTitle(chosen.name),
              body: <p>{T.lowerBody(address, chosen.name, owes, formatQuantity(next))}</p>,
              action: T.lower,
              tone: 'danger',
            },
      )
      if (!yes) return
    }
    await run(async () => {
      setDone('')
      try {
        await call(
          coffer.PUT('/wallets/{walletid}/credit', {
            params: { path: { walletid: String(walletId) } },
            body: { asset_id: chosen.id, limit: next },
          }),
        )
      } catch (caught) {
        const code = caught instanceof CofferError ? caught.code : undefined
        if (code !== 'C000' && code !== 'W002') throw caught
        setError({ ...describeError(caught), text: code === 'C000' ? T.expiring(chosen.name) : T.gone })
        return
      }
      setLimit('')
      await changed()
      setDone(next === 0 ? T.removedDone(address, chosen.name) : T.setDone(address, formatQuantity(next), chosen.name))
    })
  }

  const submit = async (event: Event) => {
    event.preventDefault()
    let chosen: Asset | undefined
    let next: number | undefined
    await run(async () => {
      const found = assets.find((candidate) => String(candidate.id) === (asset || String(assets[0]?.id)))
      check(found !== undefined, T.noAsset)
      next = parseLimit(limit)
      chosen = found
    })
    if (chosen && next !== undefined) await put(chosen, next)
  }

  const remove = async (holding: Holding) => {
    const owes = owed(holding)
    // Removing the credit of a wallet that owes is asked in `put`; one that owes nothing asks too, as every removal does.
    if (owes === undefined) {
      const yes = await confirm({
        title: T.removeTitle(holding.asset.name),
        body: <p>{T.removeBody(address, holding.asset.name, undefined)}</p>,
        action: T.remove,
        tone: 'danger',
      })
      if (!yes) return
    }
    await put(holding.asset, 0)
  }

  return (
    <section aria-labelledby="credit-title">
      <h2 id="credit-title">{T.title}</h2>
      <p>{T.intro}</p>
      {limited.length === 0 ? (
        <Empty>{T.none}</Empty>
      ) : (
        <ul class="cards credit">
          {limited.map((holding) => {
            const owes = owed(holding)
            return (
              <li key={holding.asset.id}>
                <p>
                  <strong>{T.current(formatQuantity(holding.credit_limit), holding.asset.name)}</strong>
                  {owes !== undefined && (
                    <>
                      {' · '}
                      <span class="owes">{T.owes(owes, holding.asset.name)}</span>
                    </>
                  )}
                </p>
                <button
                  type="button"
                  class="danger"
                  disabled={pending}
                  onClick={() => remove(holding)}
                  aria-label={T.removeLabel(holding.asset.name)}
                >
                  {T.remove}
                </button>
              </li>
            )
          })}
        </ul>
      )}
      {done && <Done>{done}</Done>}
      <ErrorNotice error={error} />
      {assets.length === 0 ? (
        <Empty>{T.noAssets}</Empty>
      ) : (
        <form class="credit-form" onSubmit={submit} noValidate>
          <Select
            label={T.asset}
            value={asset}
            onValue={setAsset}
            options={assets.map((candidate) => [String(candidate.id), candidate.name])}
          />
          <Field label={T.limit} value={limit} onValue={setLimit} inputMode="numeric" autoComplete="off" hint={T.limitHint} />
          <button type="submit" class="primary" disabled={pending}>
            {T.set}
          </button>
        </form>
      )}
    </section>
  )
}
