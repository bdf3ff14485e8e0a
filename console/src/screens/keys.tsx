import type { ComponentChildren } from 'preact'
import { useEffect, useId, useState } from 'preact/hooks'
import { call, coffer, CofferError, type paths } from '../api.ts'
import { formatQuantity, formatTime } from '../format.ts'
import { useWalletEvents } from '../live.ts'
import { KEY_TEXT as T, type KeyScope, type ShownError } from '../text.ts'
import { Done, Empty, ErrorNotice, Field, Loading, Page, Secret, Select, useAction, useConfirm, useLoad } from '../ui.tsx'
import { check } from '../validate.ts'
import '../control.css'
import type { ScreenProps } from './user-app.tsx'

type NewKey = NonNullable<paths['/wallet/sessions']['post']['requestBody']>['content']['application/json']
type Key = paths['/wallet/sessions']['get']['responses']['200']['content']['application/json'][number]
type Limits = NonNullable<NewKey['limits']>

const SCOPES: KeyScope[] = ['read', 'send', 'hold', 'schedule', 'monitor']
type Preset = keyof typeof T.presets
const PRESETS = Object.keys(T.presets) as Preset[]

/** One asset's daily amount (the "can send up to … a day" preset). */
interface DailyLine {
  asset: string
  quantity: string
}

/** One asset's caps (the custom choice); an empty field is no cap. */
interface CapLine {
  asset: string
  perTransfer: string
  perDay: string
}

/** A cap typed by a person: a whole number of 0 or more (0: the key may not move that asset). */
function parseCap(value: string, what: string, asset: string): number {
  const digits = value.replace(/\s/g, '')
  check(/^[0-9]+$/.test(digits), T.badCap(what, asset))
  check(Number.isSafeInteger(Number(digits)), T.capTooLarge(asset))
  return Number(digits)
}

/** Wallet ids typed as "12, 15 20": each a whole number, without repeats, 1 to 100 of them. */
function parseRecipients(value: string): number[] {
  const parts = value.split(/[\s,;]+/).filter((part) => part !== '')
  check(parts.length > 0, T.noRecipients)
  for (const part of parts) check(/^[1-9][0-9]{0,15}$/.test(part) && Number.isSafeInteger(Number(part)), T.badRecipient(part))
  const ids = [...new Set(parts.map(Number))]
  check(ids.length <= 100, T.tooManyRecipients)
  return ids
}

/** A refusal of a new key, in the words of this screen where they say more than the general ones. */
function keyError(error: ShownError | undefined, caught: unknown): ShownError | undefined {
  if (!error || !(caught instanceof CofferError)) return error
  const text = T.refused[caught.code]
  return text ? { ...error, text } : error
}

/** Rows of an asset and its amounts, with "add" and "remove", like Send's lines. */
function Lines<L extends { asset: string }>({
  lines,
  setLines,
  fresh,
  assets,
  label,
  remove,
  add,
  wide,
  children,
}: {
  lines: L[]
  setLines: (lines: L[]) => void
  fresh: (asset: string) => L
  assets: string[]
  label: (n: number) => string
  remove: (n: number) => string
  add: string
  /** Three fields a line (an asset and two caps) rather than two. */
  wide?: boolean
  children: (line: L, n: number, change: (part: Partial<L>) => void) => ComponentChildren
}) {
  return (
    <>
      {lines.map((line, index) => (
        <div class={wide ? 'line caps' : 'line'} key={index} role="group" aria-label={label(index + 1)}>
          {children(line, index + 1, (part) => setLines(lines.map((other, i) => (i === index ? { ...other, ...part } : other))))}
          {lines.length > 1 && (
            <button type="button" onClick={() => setLines(lines.filter((_, i) => i !== index))}>
              {remove(index + 1)}
            </button>
          )}
        </div>
      ))}
      {lines.length < assets.length && (
        <button
          type="button"
          class="add-line"
          onClick={() => setLines([...lines, fresh(assets.find((name) => !lines.some((line) => line.asset === name)) ?? '')])}
        >
          {add}
        </button>
      )}
    </>
  )
}

/** A field for a whole number (an amount or a cap). */
function Amount(props: { label: string; value: string; onValue: (value: string) => void; hint: string }) {
  return <Field {...props} inputMode="numeric" autoComplete="off" />
}

/** A radio button with its label and, read with it, a hint; what it opens shows under it while chosen. */
function Choice({
  name,
  value,
  chosen,
  onChoose,
  label,
  hint,
  children,
}: {
  name: string
  value: string
  chosen: boolean
  onChoose: () => void
  label: string
  hint: string
  children?: ComponentChildren
}) {
  const id = useId()
  return (
    <div class={chosen ? 'choice chosen' : 'choice'}>
      <div class="field radio">
        <input id={id} type="radio" name={name} value={value} checked={chosen} onChange={onChoose} aria-describedby={`${id}-hint`} />
        <label for={id}>{label}</label>
        <small id={`${id}-hint`} class="hint">
          {hint}
        </small>
      </div>
      {chosen && children && <div class="choice-body">{children}</div>}
    </div>
  )
}

/** The form that creates a key: a preset a person understands, or scopes and caps chosen one by one. */
function NewKeyForm({ assets, created }: { assets: string[]; created: (key: { name: string; token: string }) => Promise<void> }) {
  const [name, setName] = useState('')
  const [preset, setPreset] = useState<Preset>('read')
  const [daily, setDaily] = useState<DailyLine[]>([{ asset: '', quantity: '' }])
  const [recipients, setRecipients] = useState('')
  const [scopes, setScopes] = useState<KeyScope[]>(['read', 'send', 'hold'])
  const [caps, setCaps] = useState<CapLine[]>([])
  const [optionalRecipients, setOptionalRecipients] = useState('')
  const [refusal, setRefusal] = useState<unknown>()
  const { run, pending, error } = useAction()
  const group = useId()
  useEffect(() => {
    if (assets[0]) setDaily((lines) => lines.map((line) => (line.asset ? line : { ...line, asset: assets[0] })))
  }, [assets])

  /** Each line's asset once: a second line of the same asset is refused rather than summed. */
  const once = (lines: { asset: string }[]) => {
    const seen = new Set<string>()
    for (const [index, line] of lines.entries()) {
      check(line.asset !== '', T.noAsset(index + 1))
      check(!seen.has(line.asset), T.twice(line.asset))
      seen.add(line.asset)
    }
  }

  const body = (): NewKey => {
    check(name.length <= 32, T.nameTooLong)
    if (preset === 'read') return { name, scopes: ['read'] }
    if (preset === 'daily') {
      check(assets.length > 0, T.nothingToLimit)
      once(daily)
      // Only the assets named may be sent: every other asset gets a cap of 0.
      const perDay: Record<string, number> = Object.fromEntries(assets.map((asset) => [asset, 0]))
      for (const line of daily) {
        check(line.quantity.trim() !== '', T.dailyNeeded(line.asset))
        perDay[line.asset] = parseCap(line.quantity, 'The most in 24 hours', line.asset)
      }
      return { name, scopes: ['read', 'send'], limits: { per_day: perDay } }
    }
    if (preset === 'recipients') return { name, scopes: ['read', 'send'], limits: { recipients: parseRecipients(recipients) } }
    check(scopes.length > 0, T.noScope)
    once(caps)
    const limits: Limits = {}
    for (const [index, line] of caps.entries()) {
      check(line.perTransfer.trim() !== '' || line.perDay.trim() !== '', T.noCapOnLine(index + 1))
      if (line.perTransfer.trim() !== '')
        limits.per_transfer = { ...limits.per_transfer, [line.asset]: parseCap(line.perTransfer, 'The most per transfer', line.asset) }
      if (line.perDay.trim() !== '')
        limits.per_day = { ...limits.per_day, [line.asset]: parseCap(line.perDay, 'The most in 24 hours', line.asset) }
    }
    if (optionalRecipients.trim() !== '') limits.recipients = parseRecipients(optionalRecipients)
    return { name, scopes: SCOPES.filter((scope) => scopes.includes(scope)), ...(Object.keys(limits).length > 0 ? { limits } : {}) }
  }

  const submit = (event: Event) => {
    event.preventDefault()
    void run(async () => {
      setRefusal(undefined)
      try {
        const key = await call(coffer.POST('/wallet/sessions', { body: body() }))
        await created({ name: key.name, token: key.token })
      } catch (caught) {
        setRefusal(caught)
        throw caught
      }
    })
  }

  const options: [string, string][] = assets.map((asset) => [asset, asset])
  return (
    <form onSubmit={submit} noValidate class="key-form">
      <Field label={T.name} value={name} onValue={setName} maxLength={32} hint={T.nameHint} autoComplete="off" />
      <fieldset>
        <legend>{T.what}</legend>
        {PRESETS.map((value) => (
          <Choice
            key={value}
            name={group}
            value={value}
            chosen={preset === value}
            onChoose={() => setPreset(value)}
            label={T.presets[value]}
            hint={T.presetHints[value]}
          >
            {value === 'daily' &&
              (assets.length === 0 ? (
                <Empty>{T.nothingToLimit}</Empty>
              ) : (
                <Lines
                  lines={daily}
                  setLines={setDaily}
                  fresh={(asset) => ({ asset, quantity: '' })}
                  assets={assets}
                  label={T.line}
                  remove={T.removeLine}
                  add={T.addAsset}
                >
                  {(line, n, change) => (
                    <>
                      <Select label={T.dailyAsset(n)} value={line.asset} onValue={(asset) => change({ asset })} options={options} />
                      <Amount
                        label={T.dailyQuantity(n)}
                        value={line.quantity}
                        onValue={(quantity) => change({ quantity })}
                        hint={T.dailyHint}
                      />
                    </>
                  )}
                </Lines>
              ))}
            {value === 'recipients' && (
              <Field label={T.recipients} value={recipients} onValue={setRecipients} hint={T.recipientsHint} autoComplete="off" />
            )}
            {value === 'custom' && (
              <>
                <fieldset class="scopes">
                  <legend>{T.scopes}</legend>
                  {SCOPES.map((scope) => (
                    <div class="field checkbox" key={scope}>
                      <input
                        id={`${group}-${scope}`}
                        type="checkbox"
                        checked={scopes.includes(scope)}
                        onChange={(event) =>
                          setScopes(event.currentTarget.checked ? [...scopes, scope] : scopes.filter((other) => other !== scope))
                        }
                      />
                      <label for={`${group}-${scope}`}>{T.scopeOption(scope)}</label>
                    </div>
                  ))}
                </fieldset>
                <fieldset>
                  <legend>{T.caps}</legend>
                  <small class="hint">{T.capsHint}</small>
                  <Lines
                    lines={caps}
                    setLines={setCaps}
                    fresh={(asset) => ({ asset, perTransfer: '', perDay: '' })}
                    assets={assets}
                    label={T.line}
                    remove={T.removeCap}
                    add={T.addCap}
                    wide
                  >
                    {(line, n, change) => (
                      <>
                        <Select label={T.capAsset(n)} value={line.asset} onValue={(asset) => change({ asset })} options={options} />
                        <Amount
                          label={T.perTransfer(n)}
                          value={line.perTransfer}
                          onValue={(perTransfer) => change({ perTransfer })}
                          hint={T.capHint}
                        />
                        <Amount label={T.perDay(n)} value={line.perDay} onValue={(perDay) => change({ perDay })} hint={T.capHint} />
                      </>
                    )}
                  </Lines>
                </fieldset>
                <Field
                  label={T.recipientsOptional}
                  value={optionalRecipients}
                  onValue={setOptionalRecipients}
                  hint={T.recipientsOptionalHint}
                  autoComplete="off"
                />
              </>
            )}
          </Choice>
        ))}
      </fieldset>
      <ErrorNotice error={keyError(error, refusal)} />
      <button type="submit" class="primary" disabled={pending}>
        {pending ? T.creating : T.create}
      </button>
    </form>
  )
}

/** A key's scopes and limits in words, and what it used of each daily cap. */
function KeyLimits({ item }: { item: Key }) {
  const { per_transfer: perTransfer = {}, per_day: perDay = {}, recipients } = item.limits
  // A cap of 0 is "may not send" that asset: said once, not as "at most 0".
  const barred = [
    ...new Set([...Object.entries(perTransfer), ...Object.entries(perDay)].filter(([, cap]) => cap === 0).map(([asset]) => asset)),
  ]
  const lines: ComponentChildren[] = []
  for (const [asset, cap] of Object.entries(perTransfer))
    if (cap > 0) lines.push(<li key={`t-${asset}`}>{T.perTransferLine(formatQuantity(cap), asset)}</li>)
  for (const [asset, cap] of Object.entries(perDay)) {
    if (cap === 0 || barred.includes(asset)) continue
    const used = item.used[asset] ?? 0
    lines.push(
      <li key={`d-${asset}`} class="cap">
        <span>{T.perDayLine(formatQuantity(cap), asset)}: </span>
        <span class="used">{T.used(formatQuantity(used), formatQuantity(cap), asset)}</span>
        <meter min={0} max={cap} value={Math.min(used, cap)} aria-label={T.usedLabel(asset)} />
      </li>,
    )
  }
  if (barred.length > 0) lines.push(<li key="barred">{T.notAtAll(barred)}</li>)
  if (recipients) lines.push(<li key="recipients">{T.payOnly(recipients)}</li>)
  const moves = item.scopes.some((scope) => scope !== 'read' && scope !== 'monitor')
  return (
    <>
      <p>{T.can(item.scopes)}</p>
      {lines.length > 0 ? <ul class="limits">{lines}</ul> : moves && <p>{T.noLimits}</p>}
    </>
  )
}

/** Wallet keys of the active wallet: for bots and apps, which then use the wallet without a password, only as far as allowed. */
export function Keys({ session }: ScreenProps) {
  const keys = useLoad(() => call(coffer.GET('/wallet/sessions')), [session.wallet_id])
  const assets = useLoad(() => call(coffer.GET('/assets')), [])
  const [created, setCreated] = useState<{ name: string; token: string } | undefined>()
  const [done, setDone] = useState('')
  // A new form after each key: the next key starts from "Read only" again, not from the last one's choices.
  const [made, setMade] = useState(0)
  const { run, pending, error } = useAction()
  const confirm = useConfirm()
  // What a key sends shows at once against its daily caps.
  useWalletEvents(session.wallet_id, () => void keys.reload())

  const revoke = async (id: number, label: string) => {
    const yes = await confirm({
      title: T.revokeTitle(label),
      body: <p>{T.revokeBody(session.wallet_address)}</p>,
      action: T.revokeAction,
      tone: 'danger',
    })
    if (!yes) return
    await run(async () => {
      await call(coffer.DELETE('/wallet/sessions/{sessionid}', { params: { path: { sessionid: String(id) } } }))
      setCreated(undefined)
      await keys.reload()
      setDone(T.revoked(label))
    })
  }

  const revokeAll = async () => {
    const yes = await confirm({
      title: T.revokeAllTitle,
      body: <p>{T.revokeAllBody(session.wallet_address)}</p>,
      action: T.revokeAll,
      tone: 'danger',
    })
    if (!yes) return
    await run(async () => {
      await call(coffer.DELETE('/wallet/sessions'))
      setCreated(undefined)
      await keys.reload()
      setDone(T.revokedAll)
    })
  }

  return (
    <Page title={T.title}>
      <p>
        {T.intro[0]}
        <strong>{session.wallet_address}</strong>
        {T.intro[1]}
      </p>
      {done && <Done>{done}</Done>}
      {created && <Secret label={T.secret} value={created.token} note={T.created(created.name)} />}
      <ErrorNotice error={error ?? keys.error ?? assets.error} />
      <h2>{T.newKey}</h2>
      <NewKeyForm
        key={made}
        assets={(assets.data ?? []).map((asset) => asset.name)}
        created={async (key) => {
          setDone('')
          setCreated(key)
          setMade(made + 1)
          await keys.reload()
        }}
      />
      <h2>{T.list}</h2>
      {keys.loading && <Loading what={T.loading} />}
      {keys.data && keys.data.length === 0 && <Empty>{T.none}</Empty>}
      {keys.data && keys.data.length > 0 && (
        <>
          <ul class="cards keys">
            {keys.data.map((key) => {
              const label = T.label(key.name, key.id)
              return (
                <li key={key.id}>
                  <h3>{key.name || T.unnamed(key.id)}</h3>
                  <p class="meta">{T.times(formatTime(key.created_at), key.last_used_at ? formatTime(key.last_used_at) : undefined)}</p>
                  <KeyLimits item={key} />
                  <button
                    type="button"
                    class="danger"
                    disabled={pending}
                    onClick={() => revoke(key.id, label)}
                    aria-label={T.revokeLabel(label)}
                  >
                    {T.revoke}
                  </button>
                </li>
              )
            })}
          </ul>
          <button type="button" class="danger" disabled={pending} onClick={revokeAll}>
            {T.revokeAll}
          </button>
        </>
      )}
    </Page>
  )
}
