import type { ComponentChildren } from 'preact'
import { createContext } from 'preact'
import { useCallback, useContext, useEffect, useId, useRef, useState } from 'preact/hooks'
import { CofferError } from './api.ts'
import { formatDetail } from './format.ts'
import { describeError, UI_TEXT as T, type ShownError } from './text.ts'

/** Small building blocks every screen uses: fields, messages, confirmations, actions. */

/** Whether the screen is wide enough for the side navigation and tables (the stylesheet's 64 rem). */
export function useWide(): boolean {
  const query = matchMedia('(min-width: 64rem)')
  const [wide, setWide] = useState(query.matches)
  useEffect(() => {
    const changed = () => setWide(query.matches)
    query.addEventListener('change', changed)
    return () => query.removeEventListener('change', changed)
  }, [])
  return wide
}

export function Page({ title, children }: { title: string; children: ComponentChildren }) {
  const heading = useRef<HTMLHeadingElement>(null)
  useEffect(() => {
    document.title = T.documentTitle(title)
    // A screen reader hears the new screen's title; keyboard focus starts from it.
    heading.current?.focus()
  }, [title])
  return (
    <section class="page" aria-labelledby="page-title">
      <h1 id="page-title" tabIndex={-1} ref={heading}>
        {title}
      </h1>
      {children}
    </section>
  )
}

interface FieldProps {
  label: string
  value: string
  onValue: (value: string) => void
  /** Read with the field: the rule it follows, or what happens. */
  hint?: string
  type?: 'text' | 'password' | 'search' | 'url' | 'date' | 'datetime-local'
  required?: boolean
  autoComplete?: string
  inputMode?: 'numeric' | 'decimal' | 'text'
  maxLength?: number
}

/** A labelled input; `hint` is read with it, `value` is controlled. */
export function Field({ label, hint, value, onValue, type = 'text', ...input }: FieldProps) {
  const id = useId()
  return (
    <div class="field">
      <label for={id}>{label}</label>
      <input
        id={id}
        type={type as 'text'}
        value={value}
        onInput={(event) => onValue(event.currentTarget.value)}
        aria-describedby={hint ? `${id}-hint` : undefined}
        {...input}
      />
      {hint && (
        <small id={`${id}-hint`} class="hint">
          {hint}
        </small>
      )}
    </div>
  )
}

export function Select({
  label,
  value,
  onValue,
  options,
  hint,
}: {
  label: string
  value: string
  onValue: (value: string) => void
  options: [string, string][]
  hint?: string
}) {
  const id = useId()
  // A value that is no option (nothing chosen yet) shows, and means, the first option.
  const shown = options.some(([key]) => key === value) ? value : (options[0]?.[0] ?? '')
  return (
    <div class="field">
      <label for={id}>{label}</label>
      <select
        id={id}
        value={shown}
        onChange={(event) => onValue(event.currentTarget.value)}
        aria-describedby={hint ? `${id}-hint` : undefined}
      >
        {options.map(([key, text]) => (
          <option key={key} value={key}>
            {text}
          </option>
        ))}
      </select>
      {hint && (
        <small id={`${id}-hint`} class="hint">
          {hint}
        </small>
      )}
    </div>
  )
}

export function ErrorNotice({ error }: { error: ShownError | undefined }) {
  if (!error) return null
  return (
    <div class="notice error" role="alert">
      <p>{error.text}</p>
      {(error.detail || error.code) && (
        <p class="detail">
          {error.detail && <span>{formatDetail(error.detail)}</span>}
          {error.code && <span class="code">{T.code(error.code)}</span>}
        </p>
      )}
    </div>
  )
}

/** A polite announcement of what just happened. */
export function Done({ children }: { children: ComponentChildren }) {
  return (
    <div class="notice done" role="status">
      {children}
    </div>
  )
}

export function Loading({ what }: { what: string }) {
  return (
    <p class="loading" role="status">
      {T.loading(what)}
    </p>
  )
}

export function Empty({ children }: { children: ComponentChildren }) {
  return <p class="empty">{children}</p>
}

/** Shows a secret once, with a button that copies it. */
export function Secret({ label, value, note }: { label: string; value: string; note: string }) {
  const [copied, setCopied] = useState(false)
  const id = useId()
  return (
    <div class="secret" role="group" aria-labelledby={`${id}-label`}>
      <p id={`${id}-label`}>
        <strong>{label}</strong> {note}
      </p>
      <code id={id} class="token">
        {value}
      </code>
      <button
        type="button"
        onClick={async () => {
          await navigator.clipboard?.writeText(value).catch(() => undefined)
          setCopied(true)
        }}
      >
        {T.copy(label)}
      </button>
      <span role="status">{copied ? T.copied : ''}</span>
    </div>
  )
}

// Sessions: a refused session sends the person back to the sign-in screen with a message.

export interface SessionEnds {
  /** Called with the reason when the service says the session has ended (A000, A001, A003). */
  ended: (message: string) => void
}

export const SessionEndsContext = createContext<SessionEnds>({ ended: () => undefined })

/**
 * Runs one action at a time: `pending` while it runs (buttons disable themselves, so a double
 * click runs nothing twice), `error` when it failed. An ended session goes to the sign-in screen.
 */
export function useAction(sessionCodes: string[] = ['A000', 'A001']) {
  const [pending, setPending] = useState(false)
  const [error, setError] = useState<ShownError | undefined>()
  const session = useContext(SessionEndsContext)
  const busy = useRef(false)
  const run = useCallback(
    async (work: () => Promise<void>) => {
      if (busy.current) return
      busy.current = true
      setPending(true)
      setError(undefined)
      try {
        await work()
      } catch (caught) {
        if (caught instanceof CofferError && sessionCodes.includes(caught.code)) session.ended(describeError(caught).text)
        else setError(describeError(caught))
      } finally {
        busy.current = false
        setPending(false)
      }
    },
    [session],
  )
  const [done, setDone] = useState('')
  /** Runs `work` and then `after` (reloads), and announces the sentence `work` returned. */
  const report = useCallback(
    (work: () => Promise<string>, after: () => Promise<unknown>) =>
      run(async () => {
        setDone('')
        const message = await work()
        await after()
        setDone(message)
      }),
    [run],
  )
  return { run, pending, error, setError, done, setDone, report }
}

/**
 * Loads data on mount and when `deps` change; `reload()` loads again. Only the latest load's
 * answer is kept, so a slow answer to an older search never replaces a newer one.
 */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[], sessionCodes: string[] = ['A000', 'A001']) {
  const [data, setData] = useState<T | undefined>()
  const [loading, setLoading] = useState(true)
  const [error, setError] = useState<ShownError | undefined>()
  const session = useContext(SessionEndsContext)
  const generation = useRef(0)
  const reload = useCallback(async () => {
    const mine = ++generation.current
    setLoading(true)
    try {
      const value = await load()
      if (mine !== generation.current) return
      setData(value)
      setError(undefined)
    } catch (caught) {
      if (mine !== generation.current) return
      if (caught instanceof CofferError && sessionCodes.includes(caught.code)) session.ended(describeError(caught).text)
      else setError(describeError(caught))
    } finally {
      if (mine === generation.current) setLoading(false)
    }
  }, deps)
  useEffect(() => {
    void reload()
  }, [reload])
  return { data, loading: loading && data === undefined, error, reload, setData }
}

// Confirmations before anything that cannot be undone.

export interface ConfirmRequest {
  title: string
  body: ComponentChildren
  action: string
  /** `danger` for what takes something away (voids, deletions, refunds); otherwise the button is the usual primary one. */
  tone?: 'danger'
}

const ConfirmContext = createContext<(request: ConfirmRequest) => Promise<boolean>>(async () => false)

export function useConfirm() {
  return useContext(ConfirmContext)
}

/** A modal dialog asking to confirm; Escape or "Cancel" says no. */
export function ConfirmHost({ children }: { children: ComponentChildren }) {
  const [request, setRequest] = useState<(ConfirmRequest & { answer: (yes: boolean) => void }) | undefined>()
  const dialog = useRef<HTMLDialogElement>(null)
  const opener = useRef<Element | null>(null)
  const confirm = useCallback(
    (next: ConfirmRequest) =>
      new Promise<boolean>((resolve) => {
        opener.current = document.activeElement
        setRequest({ ...next, answer: resolve })
      }),
    [],
  )
  useEffect(() => {
    if (request && dialog.current && !dialog.current.open) dialog.current.showModal()
  }, [request])
  const answer = (yes: boolean) => {
    request?.answer(yes)
    dialog.current?.close()
    setRequest(undefined)
    ;(opener.current as HTMLElement | null)?.focus?.()
  }
  return (
    <ConfirmContext.Provider value={confirm}>
      {children}
      <dialog ref={dialog} aria-labelledby="confirm-title" aria-describedby="confirm-body" onCancel={() => answer(false)}>
        {request && (
          <form method="dialog" onSubmit={(event) => (event.preventDefault(), answer(true))}>
            <h2 id="confirm-title">{request.title}</h2>
            <div id="confirm-body">{request.body}</div>
            <div class="actions">
              <button type="button" onClick={() => answer(false)}>
                {T.cancel}
              </button>
              <button type="submit" class={request.tone === 'danger' ? 'danger' : 'primary'}>
                {request.action}
              </button>
            </div>
          </form>
        )}
      </dialog>
    </ConfirmContext.Provider>
  )
}

/** An active filter as a person reads it ("Kind: Issuance"), and how to remove it. */
export interface Chip {
  label: string
  clear: () => void
}

/** Filters folded behind one "Filter" control; the active ones shown as chips that remove them. */
export function FilterBar({ label, chips, children }: { label: string; chips: Chip[]; children: ComponentChildren }) {
  return (
    <div class="filter-bar">
      {chips.length > 0 && (
        <ul class="chips" aria-label={T.activeFilters}>
          {chips.map((chip) => (
            <li key={chip.label}>
              <button type="button" onClick={chip.clear} aria-label={T.removeFilter(chip.label)}>
                {chip.label} <span aria-hidden="true">✕</span>
              </button>
            </li>
          ))}
        </ul>
      )}
      <details>
        <summary>{T.filter(chips.length)}</summary>
        <form class="filters" onSubmit={(event) => event.preventDefault()} aria-label={label}>
          {children}
        </form>
      </details>
    </div>
  )
}

/** Buttons to the newest, a newer and an older page of a list paged by cursor. */
export function Pager({
  first,
  hasOlder,
  onNewest,
  onNewer,
  onOlder,
}: {
  first: boolean
  hasOlder: boolean
  onNewest: () => void
  onNewer: () => void
  onOlder: () => void
}) {
  return (
    <nav class="pager" aria-label={T.pages}>
      <button type="button" disabled={first} onClick={onNewest}>
        {T.newest}
      </button>
      <button type="button" disabled={first} onClick={onNewer}>
        {T.newer}
      </button>
      <button type="button" disabled={!hasOlder} onClick={onOlder}>
        {T.older}
      </button>
    </nav>
  )
}

/**
 * The navigation of every signed-in screen: a side bar on a desktop; on a phone a compact top bar
 * whose "Menu" button opens who is signed in, sign-out and the links.
 */
export function TopBar(props: {
  brand: string
  home: string
  who: ComponentChildren
  signOut: () => void
  pending: boolean
  navLabel: string
  links: [path: string, label: string][]
  base: string
  current: string
  operator?: boolean
}) {
  const [open, setOpen] = useState(false)
  const id = useId()
  useEffect(() => setOpen(false), [props.current])
  return (
    <header class={props.operator ? 'top operator' : 'top'}>
      <div class="top-row">
        <a class="brand" href={props.home}>
          {props.brand}
        </a>
        <button type="button" class="menu" aria-expanded={open} aria-controls={id} onClick={() => setOpen(!open)}>
          {T.menu}
        </button>
      </div>
      <div id={id} class={open ? 'top-panel open' : 'top-panel'}>
        <nav aria-label={props.navLabel}>
          <ul>
            {props.links.map(([path, label]) => (
              <li key={path}>
                <a href={`${props.base}${path}`} aria-current={props.current === path ? 'page' : undefined} onClick={() => setOpen(false)}>
                  {label}
                </a>
              </li>
            ))}
          </ul>
        </nav>
        <p class="who">{props.who}</p>
        <button type="button" disabled={props.pending} onClick={props.signOut}>
          {T.signOut}
        </button>
      </div>
    </header>
  )
}
