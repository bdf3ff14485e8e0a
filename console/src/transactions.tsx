import type { ComponentChildren } from 'preact'
import { useId, useState } from 'preact/hooks'
import type { Transaction } from './api.ts'
import { formatAssets, formatFullTime, formatQuantity, formatTime } from './format.ts'
import { JOURNAL_TEXT, KIND_TEXT, MOVED_BACK_TEXT, REVERSAL_TEXT, reversalWord, TRANSACTION_TEXT, type ShownError } from './text.ts'
import { ProofStatus } from './proof.tsx'
import { Done, Empty, ErrorNotice, Loading, Pager, useWide } from './ui.tsx'

/** Who a side of a transaction is, as a person reads it. */
function party(username: string | undefined, address: string): string {
  return username ? `${username} (${address})` : address
}

/** What kind of transaction it is, when it is not a plain transfer: "Issuance", "Refund of transaction 12", … */
function kindLabel(transaction: Transaction): string | undefined {
  if (transaction.kind === 'transfer') return undefined
  if (transaction.kind === 'reversal' && transaction.reverses !== undefined)
    return TRANSACTION_TEXT.reversalOf(REVERSAL_TEXT[reversalWord(transaction)], transaction.reverses)
  if (transaction.kind === 'capture' && transaction.hold_id !== undefined) return TRANSACTION_TEXT.captureOf(transaction.hold_id)
  return KIND_TEXT[transaction.kind]
}

/** A transaction's metadata as a short list of "key: value". */
export function MetadataList({ metadata }: { metadata: Record<string, string> }) {
  const entries = Object.entries(metadata)
  if (entries.length === 0) return null
  return (
    <dl class="metadata" aria-label={TRANSACTION_TEXT.metadata}>
      {entries.map(([key, value]) => (
        <div key={key}>
          <dt>{key}</dt>
          <dd>{value}</dd>
        </div>
      ))}
    </dl>
  )
}

/** Per transaction id, its refunds and corrections so far: the word for them, what they moved back per asset name, and each one. */
type MovedBack = Map<number, { word: 'refund' | 'correction'; assets: Map<string, number>; reversals: Transaction[] }>

/** Sums the reversals among `reversals` by the transaction each moves back. */
function movedBack(reversals: Transaction[]): MovedBack {
  const moved: MovedBack = new Map()
  for (const reversal of reversals) {
    if (reversal.reverses === undefined) continue
    const entry = moved.get(reversal.reverses) ?? { word: reversalWord(reversal), assets: new Map<string, number>(), reversals: [] }
    for (const line of reversal.assets) entry.assets.set(line.asset.name, (entry.assets.get(line.asset.name) ?? 0) + line.quantity)
    entry.reversals.push(reversal)
    moved.set(reversal.reverses, entry)
  }
  return moved
}

/** Whether all of `transaction` has been moved back (then no further refund or correction is offered). */
export function allMovedBack(transaction: Transaction, moved: MovedBack): boolean {
  const entry = moved.get(transaction.id)
  return !!entry && transaction.assets.every((line) => (entry.assets.get(line.asset.name) ?? 0) >= line.quantity)
}

/** Controls under a transaction (a refund, a correction); `announce` shows what one of them did, beside it. */
type Actions = (transaction: Transaction, announce: (text: string) => void) => ComponentChildren

/** What an action did to one transaction, shown in its detail. */
interface Notice {
  of: number
  text: string
}

interface ListProps {
  transactions: Transaction[]
  walletId?: number
  actions?: Actions
  moved: MovedBack
  notice: Notice | undefined
  announce: (notice: Notice) => void
  /** Whether each detail checks the transaction's proof (a holder's history). */
  proofs: boolean
}

/** One transaction as the list and the table show it, seen from `walletId` (or from outside, the journal). */
function describe(transaction: Transaction, walletId: number | undefined, moved: MovedBack) {
  const sent = walletId !== undefined && transaction.sending_wallet_id === walletId
  const from = party(transaction.sending_username, transaction.sending_wallet_address)
  const to = party(transaction.receiving_username, transaction.receiving_wallet_address)
  const entry = moved.get(transaction.id)
  return {
    side: walletId === undefined ? 'journal' : sent ? 'sent' : 'received',
    sign: walletId === undefined ? '' : sent ? '−' : '+',
    what:
      walletId === undefined
        ? TRANSACTION_TEXT.between(from, to)
        : sent
          ? TRANSACTION_TEXT.sentTo(to)
          : TRANSACTION_TEXT.receivedFrom(from),
    badges: [
      ...(walletId === undefined
        ? []
        : [{ text: sent ? TRANSACTION_TEXT.sent : TRANSACTION_TEXT.received, tone: sent ? 'sent' : 'received' }]),
      ...(transaction.kind === 'transfer'
        ? []
        : [
            {
              text: transaction.kind === 'reversal' ? REVERSAL_TEXT[reversalWord(transaction)] : KIND_TEXT[transaction.kind],
              tone: 'kind',
            },
          ]),
      ...(entry ? [{ text: MOVED_BACK_TEXT[entry.word][allMovedBack(transaction, moved) ? 'all' : 'part'], tone: 'moved' }] : []),
    ],
  }
}

function Badges({ badges }: { badges: { text: string; tone: string }[] }) {
  return (
    <>
      {badges.map((badge) => (
        <span key={badge.text} class={`badge ${badge.tone}`}>
          {badge.text}
        </span>
      ))}
    </>
  )
}

function Amounts({ transaction, sign }: { transaction: Transaction; sign: string }) {
  return (
    <>
      {transaction.assets.map((line) => (
        <span key={line.asset.id} class="amount">
          {sign}
          {formatQuantity(line.quantity)} {line.asset.name}
        </span>
      ))}
    </>
  )
}

/** The button that shows or hides everything about one transaction. */
function DetailToggle({
  transaction,
  open,
  toggle,
  controls,
}: {
  transaction: Transaction
  open: boolean
  toggle: () => void
  controls: string
}) {
  return (
    <button type="button" class="details-toggle" aria-expanded={open} aria-controls={controls} onClick={toggle}>
      {open ? TRANSACTION_TEXT.hideDetails : TRANSACTION_TEXT.details}
      <span class="visually-hidden"> {TRANSACTION_TEXT.ofTransaction(transaction.id)}</span>
    </button>
  )
}

/**
 * Everything about one transaction beyond its row (which shows its metadata): its sides, assets,
 * memo, what it relates to, its refunds or corrections; then its actions.
 */
function TransactionDetail({
  transaction,
  moved,
  actions,
  notice,
  proof,
  id,
}: {
  transaction: Transaction
  moved: MovedBack
  actions?: ComponentChildren
  notice?: string
  /** Whether to check its proof: a holder's own transaction (the operator has the journal itself). */
  proof: boolean
  id: string
}) {
  const reversals = moved.get(transaction.id)?.reversals ?? []
  const facts: [string, ComponentChildren][] = [
    [TRANSACTION_TEXT.fact.kind, kindLabel(transaction) ?? KIND_TEXT.transfer],
    [TRANSACTION_TEXT.fact.when, formatFullTime(transaction.created_at)],
    [TRANSACTION_TEXT.fact.from, party(transaction.sending_username, transaction.sending_wallet_address)],
    [TRANSACTION_TEXT.fact.to, party(transaction.receiving_username, transaction.receiving_wallet_address)],
    [TRANSACTION_TEXT.fact.assets, formatAssets(transaction.assets)],
    [TRANSACTION_TEXT.fact.memo, transaction.memo ? `“${transaction.memo}”` : TRANSACTION_TEXT.none],
    ...(proof ? [[JOURNAL_TEXT.proof, <ProofStatus key="proof" transactionId={transaction.id} />] as [string, ComponentChildren]] : []),
  ]
  return (
    <div class="transaction-detail" id={id} role="region" aria-label={TRANSACTION_TEXT.detailOf(transaction.id)}>
      <dl class="facts">
        {facts.map(([term, value]) => (
          <div key={term}>
            <dt>{term}</dt>
            <dd>{value}</dd>
          </div>
        ))}
      </dl>
      {reversals.length > 0 && (
        <>
          <h3>{TRANSACTION_TEXT.movedBackHeading(moved.get(transaction.id)?.word ?? 'refund')}</h3>
          <ul class="plain">
            {reversals.map((reversal) => (
              <li key={reversal.id}>
                {TRANSACTION_TEXT.reversalLine(
                  REVERSAL_TEXT[reversalWord(reversal)],
                  reversal.id,
                  formatAssets(reversal.assets),
                  formatTime(reversal.created_at),
                )}
                {reversal.memo && ` · “${reversal.memo}”`}
              </li>
            ))}
          </ul>
        </>
      )}
      {notice && <Done>{notice}</Done>}
      {actions}
    </div>
  )
}

/**
 * Transactions, newest first: a table on a wide screen, compact rows on a phone. Seen from
 * `walletId` each says "Sent to" or "Received from"; without one (the operator's journal) it
 * names both sides. Each opens to everything about it, with its actions (a refund, a correction).
 */
function TransactionList({ transactions, walletId, actions, moved, notice, announce, proofs }: ListProps) {
  const wide = useWide()
  // The table and the rows are different elements, so a change of width makes each detail anew:
  // what it shows lives here (open) or in the page (the notice), not in the detail.
  const detail = (transaction: Transaction, id: string) => (
    <TransactionDetail
      transaction={transaction}
      moved={moved}
      actions={actions?.(transaction, (text) => announce({ of: transaction.id, text }))}
      notice={notice?.of === transaction.id ? notice.text : undefined}
      proof={proofs}
      id={id}
    />
  )
  const [open, setOpen] = useState<Set<number>>(new Set())
  const base = useId()
  const toggle = (id: number) =>
    setOpen((now) => {
      const next = new Set(now)
      if (!next.delete(id)) next.add(id)
      return next
    })
  if (wide) {
    return (
      <table class="transactions-table">
        <caption class="visually-hidden">{TRANSACTION_TEXT.caption}</caption>
        <thead>
          <tr>
            <th scope="col">{TRANSACTION_TEXT.column.when}</th>
            <th scope="col">{TRANSACTION_TEXT.column.transaction}</th>
            <th scope="col" class="number">
              {TRANSACTION_TEXT.column.amount}
            </th>
            <th scope="col">{TRANSACTION_TEXT.column.status}</th>
            <th scope="col">
              <span class="visually-hidden">{TRANSACTION_TEXT.column.details}</span>
            </th>
          </tr>
        </thead>
        {transactions.map((transaction) => {
          const shown = describe(transaction, walletId, moved)
          const isOpen = open.has(transaction.id)
          const detailId = `${base}-${transaction.id}`
          return (
            <tbody key={transaction.id} class={shown.side}>
              <tr>
                <td class="when">
                  <time dateTime={transaction.created_at}>{formatTime(transaction.created_at)}</time>
                </td>
                <td>
                  <span class="what">{shown.what}</span>
                  <span class="meta">
                    {[kindLabel(transaction), TRANSACTION_TEXT.number(transaction.id), transaction.memo && `“${transaction.memo}”`]
                      .filter(Boolean)
                      .join(' · ')}
                  </span>
                  <MetadataList metadata={transaction.metadata} />
                </td>
                <td class="number amounts">
                  <Amounts transaction={transaction} sign={shown.sign} />
                </td>
                <td>
                  <Badges badges={shown.badges} />
                </td>
                <td class="number">
                  <DetailToggle transaction={transaction} open={isOpen} toggle={() => toggle(transaction.id)} controls={detailId} />
                </td>
              </tr>
              {isOpen && (
                <tr class="detail-row">
                  <td colSpan={5}>{detail(transaction, detailId)}</td>
                </tr>
              )}
            </tbody>
          )
        })}
      </table>
    )
  }
  return (
    <ul class="transactions">
      {transactions.map((transaction) => {
        const shown = describe(transaction, walletId, moved)
        const isOpen = open.has(transaction.id)
        const detailId = `${base}-${transaction.id}`
        return (
          <li key={transaction.id} class={shown.side}>
            <p class="what">
              <span>{shown.what}</span>
            </p>
            <div class="amounts-line">
              <p class="amounts">
                <Amounts transaction={transaction} sign={shown.sign} />
              </p>
              <DetailToggle transaction={transaction} open={isOpen} toggle={() => toggle(transaction.id)} controls={detailId} />
            </div>
            <p class="meta">
              <Badges badges={shown.badges.filter((badge) => badge.tone === 'moved')} />
              {kindLabel(transaction) && <span class="kind">{kindLabel(transaction)} · </span>}
              <time dateTime={transaction.created_at}>{formatTime(transaction.created_at)}</time>
              <span> · {TRANSACTION_TEXT.number(transaction.id)}</span>
              {transaction.memo && <span class="memo"> · “{transaction.memo}”</span>}
            </p>
            <MetadataList metadata={transaction.metadata} />
            {isOpen && detail(transaction, detailId)}
          </li>
        )
      })}
    </ul>
  )
}

/** Cursors of the pages seen so far, newest first; `undefined` is the newest page. */
export type Cursors = (number | undefined)[]

/**
 * One page of transactions with its error, loading and empty states and the pager, for a
 * wallet's history and the operator's journal. `empty` is what an empty page says.
 */
export function TransactionPage({
  page,
  cursors,
  setCursors,
  walletId,
  empty,
  actions,
  proofs = false,
}: {
  page: { data?: { data: Transaction[]; next: number | undefined; moved: MovedBack }; loading: boolean; error: ShownError | undefined }
  cursors: Cursors
  setCursors: (cursors: Cursors) => void
  walletId?: number
  empty: string
  /** Controls under each transaction (a refund, a correction). */
  actions?: Actions
  /** Whether each detail checks the transaction's proof in the browser (a holder's history). */
  proofs?: boolean
}) {
  const [notice, setNotice] = useState<Notice | undefined>()
  return (
    <>
      <ErrorNotice error={page.error} />
      {page.loading && <Loading what="transactions" />}
      {page.data && page.data.data.length === 0 && <Empty>{empty}</Empty>}
      {page.data && page.data.data.length > 0 && (
        <TransactionList
          transactions={page.data.data}
          walletId={walletId}
          actions={actions}
          moved={page.data.moved}
          notice={notice}
          announce={setNotice}
          proofs={proofs}
        />
      )}
      <CursorPager cursors={cursors} setCursors={setCursors} next={page.data?.next} />
    </>
  )
}

/** The pager of a list paged by cursor: `next` is the next (older) page's cursor, if any. */
export function CursorPager({
  cursors,
  setCursors,
  next,
}: {
  cursors: Cursors
  setCursors: (cursors: Cursors) => void
  next: number | undefined
}) {
  return (
    <Pager
      first={cursors.length === 1}
      hasOlder={next !== undefined}
      onNewest={() => setCursors([undefined])}
      onNewer={() => setCursors(cursors.slice(0, -1))}
      onOlder={() => setCursors([...cursors, next])}
    />
  )
}

/** Adds to a page of transactions what was moved back of each (its refunds and corrections since the oldest shown). */
export async function withMovedBack<P extends { data: Transaction[] }>(
  page: P,
  reversalsAfter: (after: number) => Promise<{ data: Transaction[] }>,
): Promise<P & { moved: MovedBack }> {
  if (page.data.length === 0) return { ...page, moved: new Map() }
  const reversals = await reversalsAfter(Math.min(...page.data.map((transaction) => transaction.id)))
  return { ...page, moved: movedBack(reversals.data) }
}
